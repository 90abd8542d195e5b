"""The sampled attribution judged per group of forward calls (behaviour.executing, parent side).

A share pooled over the whole run lets slow calls outweigh fast ones: an own GEMM on the
checked calls and MKL on the rest, or MKL on the nominal shape and an own loop on the
jittered ones, gives a pooled own share well above the minimum while the vendor library
does all the work wherever it runs. The worker therefore sends the compute samples of every
forward call, in call order, and the calls are judged in groups as well:

  by shape     the calls at the nominal shape (the nominal trials and the whole call
               schedule), the calls at jittered shapes together, and each jittered shape;
  by watching  the scheduled calls the dispatcher recorder did not watch (a secret
               three quarters of the schedule), against which a submission that behaves only
               while watched shows;
  by loop      the calls outside the timing loop near the end of the schedule, and the loop's calls (a
               benchmark's loop: the same tensors back to back), whole and its second half (a
               switch armed by a streak), each as a switch at half the error rate: convicted only
               when the other calls surely ran four times its share of own code at least (99% bounds), so the
               loop's many samples do not turn an honest torch GEMM + own epilogue, whose
               share sits near the minimum, into a conviction on one subgroup's noise;
  by position  every run of calls from call k+1 to the last, the loop left out (a switch after
               any number of calls splits the run there). Runs from the first call are not judged: an honest
               kernel may check itself against torch on its first call (a self-test outside the
               result), and that work sits at the start, never only at the end.

A group is judged only with MIN_SAMPLES compute samples of its own, and convicted by the
same test as the whole run: an own share under the minimum and a 99% upper bound under
MEANINGFUL_SHARE. An honest kernel's own code does the compute of every call, so no group
of its calls is almost all library code.

The calls are matched to their labels by order: each forward call sends exactly one of
`call`/`call-error` (trials) or `schedule-call`/`schedule-error` (the schedule), and the
timing loop one `schedule-loop` for all its calls, followed by one message for each of its
probes, which ran among the loop's calls (`probes_at`); all before the `executing` message
(the parent's copies of recorded scheduled calls, `work_messages`, come after it). When the
counts differ (a run cut short) only the position groups are judged.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

from gatekeeper.behaviour.sample_shares import ALPHA, COMPUTE, MEANINGFUL_SHARE, MIN_SAMPLES, upper_bound

_CALL_KINDS = ("call", "call-error", "schedule-call", "schedule-error")


def _label(m: dict[str, Any]) -> str:
    if m.get("kind") in ("call", "call-error"):
        return str(m.get("trial", "?"))
    # a scheduled call the recorder watched brings its work: the others ran unwatched
    watched = isinstance(m.get("work"), dict)
    return f"schedule-{m.get('index', '?')}{'' if watched else _UNWATCHED}"


def _loop_labels(loop: dict[str, Any], probes: list[str]) -> list[str]:
    """The loop's calls with its probes (the scheduled calls reported after it) where they ran
    (`probes_at`: loop calls before each; behaviour.timing_loop). A loop call that raised ended
    the loop: it is placed after the loop's other calls, before the probes made at the end."""
    count = int(loop.get("calls", 0) or 0)
    at = [a for a in loop.get("probes_at") or [] if isinstance(a, int)]
    if len(at) != len(probes) or at != sorted(at) or any(not 0 <= a <= count for a in at):
        at = [count] * len(probes)  # unknown: at the end, where the probes ran before round 7
    failed = bool(loop.get("error"))
    labels: list[str] = []
    made = 0  # loop calls labelled so far
    for position, probe in zip(at, probes):
        if position == count and failed:
            labels += [_LOOP] * (count - made) + [_LOOP]
            made, failed = count, False
        labels += [_LOOP] * (position - made) + [probe]
        made = position
    return labels + [_LOOP] * (count - made) + ([_LOOP] if failed else [])


def call_labels(messages: list[dict[str, Any]]) -> list[str]:
    """The forward calls' labels in the order they ran: a trial's name, or `schedule-<index>`."""
    labels = []
    shown = []  # the messages the worker sent, up to `executing` (copies the parent appends come after it)
    for m in messages:
        if m.get("kind") == "executing":
            break
        shown.append(m)
    i = 0
    while i < len(shown):
        m = shown[i]
        kind = m.get("kind")
        if kind in _CALL_KINDS:
            labels.append(_label(m))
        elif kind == "schedule-loop":  # the timing loop: one label per call it made, its probes among them
            count = len([a for a in m.get("after") or [] if isinstance(a, int)])
            following = [x for x in shown[i + 1:] if x.get("kind") in _CALL_KINDS][:count]
            if len(following) < count:
                following = []  # a run cut short: the probes' messages are labelled where they come
            labels += _loop_labels(m, [_label(x) for x in following])
            while following and i + 1 < len(shown):  # past the probes' own messages, placed already
                i += 1
                if shown[i] is following[-1]:
                    break
        i += 1
    return labels


_UNWATCHED = " (unwatched)"
_LOOP = LOOP_LABEL = "timing-loop"
LOOP_GROUPS = 2  # the whole loop and its second half
SWITCH_FACTOR = 0.25  # a switch: the group's own share surely under a quarter of the others' (99%)


_Group = tuple[str, list[int], Optional[list[int]]]  # name, its calls, the calls it must differ from


def _groups(n: int, labels: list[str]) -> Iterator[_Group]:
    # The timing loop runs near the end of the schedule, before its last plain fresh calls.
    # Position groups leave it out: its hundreds of calls would make "the last calls" mean "the
    # loop", and the loop is judged as a switch (below), not by the share alone, so that an
    # honest torch GEMM + own epilogue whose loop share happens to dip under the minimum is not
    # convicted on the noise of one subgroup.
    loop = [i for i, label in enumerate(labels) if label == _LOOP] if len(labels) == n else []
    others = [i for i in range(n) if i not in set(loop)]
    if len(labels) == n:
        jittered = [i for i, label in enumerate(labels) if label.startswith("jitter")]
        # the loop's calls are at the nominal shape too, but judged apart (below)
        yield "the calls at the nominal shape", [i for i in others if i not in set(jittered)], None
        if jittered:
            yield "the calls at jittered shapes", jittered, None
            for label in dict.fromkeys(labels[i] for i in jittered):
                yield label, [i for i in jittered if labels[i] == label], None
        # Any call may be checked: code that computes itself only while the recorder watches
        # (its hook slows torch's ops down, which a submission can time) shows here.
        unwatched = [i for i, label in enumerate(labels) if label.endswith(_UNWATCHED)]
        if unwatched and len(unwatched) < n:
            yield "the scheduled calls the recorder did not watch", unwatched, None
        # A benchmark's loop (behaviour.schedule_subject.timing_loop) against every other call.
        if loop and others:
            yield "the calls outside the timing loop", others, None
            yield "the calls of the timing loop at the end of the schedule", loop, others
            # and its second half: a switch armed by a streak of back-to-back calls does its own
            # work on the streak's first calls, which dilute the whole loop's share
            half = len(loop) // 2
            if half:
                yield (f"timing-loop calls {half + 1}-{len(loop)} of {len(loop)}", loop[half:], others)
    for k in range(1, len(others)):
        yield f"forward calls {k + 1}-{len(others)} of {len(others)} (the timing loop left out)" if loop else \
            f"forward calls {k + 1}-{n} of {n}", others[k:], None


def judge_groups(calls: Any, messages: list[dict[str, Any]], minimum: float,
                 alpha: float = ALPHA) -> Optional[dict[str, Any]]:
    """The convicted group with the most compute samples, or None: {name, own, compute,
    classes, own_share_upper_99, calls}."""
    if not isinstance(calls, list) or not calls:
        return None
    width = len(COMPUTE)  # a shorter row (a class added since it was written) counts 0 for the rest
    rows = [([int(x) for x in row] + [0] * width)[:width] if isinstance(row, list) else [0] * width for row in calls]
    labels = call_labels(messages)
    worst: Optional[dict[str, Any]] = None
    for name, members, versus in _groups(len(rows), labels):
        sums = [sum(rows[i][c] for i in members) for c in range(len(COMPUTE))]
        compute, own = sum(sums), sums[0]
        if compute < MIN_SAMPLES or own / compute >= minimum:
            continue
        if worst is not None and compute <= worst["compute"]:
            continue
        # The loop's two switch groups share the error rate one group had (Bonferroni): with ten
        # tails at 1% each, an honest torch GEMM + own epilogue (a 5-20% own share over a few
        # dozen samples) was once convicted on one tail's noise.
        level = alpha / LOOP_GROUPS if versus is not None else alpha
        bound = upper_bound(own, compute, level)
        if versus is not None:  # a switch: the other calls' own share is surely above this group's
            other_own = sum(rows[i][0] for i in versus)
            other = sum(sum(rows[i][:len(COMPUTE)]) for i in versus)
            # ... and by a factor: an honest torch GEMM + own epilogue runs a smaller own share in
            # a tight loop than on checked calls (5% against 20-50% over a few dozen samples, once
            # 99% apart), while a switch to a library leaves next to no own code at all
            if other < MIN_SAMPLES or bound >= SWITCH_FACTOR * (1.0 - upper_bound(other - other_own, other, level)):
                continue
        if bound < MEANINGFUL_SHARE:
            worst = {"name": name, "own": own, "compute": compute, "calls": len(members),
                     "classes": dict(zip(COMPUTE, sums)), "own_share_upper_99": round(bound, 4)}
    return worst
