"""The call schedule of one behaviour run: many cheap calls that no fixed rule can count.

After the named trials, the submission's process is called `count` more times, `count`
drawn per run from a secret (well above any arming threshold a submission could bake in).
Every call gets inputs the process has never seen, generated in the reference worker:
  fresh        new values from get_inputs, under a value distribution (problem.values)
  near-one     an earlier call's inputs with one element changed at a random position
  near-sparse  an earlier call's inputs with a random sparse set of elements changed
  overwrite    new values written in place into the previous call's tensors (same objects)
  reuse        new values in a tensor at the same address as the previous call's, with the
               same `_version` (a fresh tensor over the same storage)
  repeat       new tensors holding exactly the contents of an earlier fresh call (a content
               memo is right on them, and faster: behaviour.repeat_probe times them)
  again        the very tensor objects of the call just before, unmodified: what a benchmark's
               timing loop hands over and over (a memo keyed on the inputs' identity and
               `_version` is right on them, and faster: timed with the repeats)
From a random position on (`timed_from`) the submission's process is made to look like a
timing run (problem.schedule.DECOY), so a submission that arms a memo when it thinks it is
timed is checked while armed. Every call's output is compared with the reference.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any, Optional

from gatekeeper.problem.secret import derive

KINDS = ("fresh", "near-one", "near-sparse", "overwrite", "reuse")
# Drawn per run: how many calls. Tiny problems take hundreds; the reference worker trims the
# count to the byte and time budgets below for larger ones (never under MIN_CALLS).
LOW, HIGH = 160, 320
MIN_CALLS = 24
# A problem too large for MIN_CALLS within the budgets still gets this many calls (issue 22:
# large problems were skipped): fresh calls, two of them under a value distribution, and
# whatever kinds the plan draws next. Its transfer files are bounded by the disk check in
# behaviour.schedule_ref, never by skipping the schedule.
MIN_LARGE_CALLS = 8
# Every plan starts the same way, so that the shortest schedule (MIN_LARGE_CALLS) still lets the
# repeated-contents probe (behaviour.repeat_probe) judge: calls 3-5 are plain fresh calls to time
# against, call 6 repeats the contents of call 5 (the call just before it) and call 7 those of
# call 4. With 6 calls and repeats only among calls 6-23, the probe never judged a problem over
# 8 MiB a call (an H100 run, docs/gpu-validation.md, sixth round): most of KernelBench's GEMMs
# and convolutions. A repeat of the call just before is what a memo of any depth holds (one of
# only the last call's contents never hit a base 3 or more calls back: red team h06, h15).
PROBE_FRESH = (3, 4, 5)
PROBE_REPEATS = {6: 5, 7: 4}
# Besides, among calls 8-23: one repeat of the call just before and one of the call two back,
# then repeats of a base 3-16 calls back (a memo of several entries, or one keyed on recency).
NEAR_DISTANCES = (1, 2)
BUDGET_BYTES = 48 << 20  # inputs + outputs of the whole schedule, across the channel
BUDGET_S = 6.0  # reference compute time for the whole schedule


@dataclass
class Step:
    index: int
    kind: str
    seed: int  # the values' seed (torch.manual_seed in the reference worker)
    dist: str = "normal"  # problem.values distribution (fresh, overwrite, reuse)
    base: Optional[int] = None  # the earlier step a near-duplicate copies

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Step":
        return cls(**data)


@dataclass
class Schedule:
    steps: list[Step]
    timed_from: int  # index of the first call made while the process looks like a timing run

    def to_json(self) -> dict[str, Any]:
        return {"steps": [s.to_json() for s in self.steps], "timed_from": self.timed_from}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Schedule":
        return cls([Step.from_json(s) for s in data["steps"]], int(data["timed_from"]))

    def trimmed(self, count: int) -> "Schedule":
        count = max(0, min(count, len(self.steps)))
        return Schedule(plain_tail([Step(**asdict(s)) for s in self.steps[:count]]),
                        min(self.timed_from, max(count - 1, 0)))


# The last calls of a schedule are plain fresh ones: on the CPU the submission's worker
# runs them right after its timing loop (behaviour.schedule_subject.timing_loop), and the loop's
# last calls are timed against them, under the same load from other processes. They are
# value-checked like every call: nothing tells them from the calls before the loop.
AFTER_LOOP = 8


def plain_tail(steps: list[Step]) -> list[Step]:
    """Makes the last AFTER_LOOP steps plain fresh calls, past the first MIN_CALLS (where the
    value distributions are judged), leaving the repeated-contents probe's calls as they are:
    a repeat, an `again` call, and a repeat's base. The worker runs the trailing plain fresh
    calls after the loop, however many there are."""
    if len(steps) < MIN_CALLS + AFTER_LOOP:
        return steps
    bases = {s.base for s in steps if s.kind == "repeat"}
    for step in steps[-AFTER_LOOP:]:
        if step.kind not in ("repeat", "again") and step.index not in bases:
            step.kind, step.dist, step.base = "fresh", "normal", None
    return steps


def plan_schedule(seed: int, distributions: list[str], low: int = LOW, high: int = HIGH) -> Schedule:
    """The schedule of a run, from its seed through the one-way secret (problem.secret)."""
    rng = random.Random(derive(seed, "schedule"))
    count = rng.randint(low, high)
    dists = ["normal"] + [d for d in distributions if d != "normal"]
    steps: list[Step] = []
    for index in range(count):
        # The first calls are plain fresh ones, so that near-duplicates have something to copy
        # and a wrong answer from the start is told apart from one that begins later.
        if index < 4:
            kind = "fresh"
        else:
            kind = rng.choices(KINDS, weights=(50, 15, 15, 8, 12))[0]
        dist = rng.choice(dists) if kind in ("fresh", "overwrite", "reuse") and rng.random() < 0.6 else "normal"
        base = None
        if kind.startswith("near"):
            base = rng.randrange(max(0, index - 16), index)  # recent: a cache may keep only a few
        steps.append(Step(index, kind, rng.getrandbits(31), dist, base))
    timed_from = rng.randint(count // 4, count // 2)
    for index in PROBE_FRESH:
        steps[index].kind, steps[index].dist, steps[index].base = "fresh", "normal", None
    _value_calls(steps, dists, seed)
    _repeat_calls(steps, seed)
    before = [(s.kind, s.base, s.dist) for s in steps]
    _again_calls(steps, seed)  # first: a distribution an `again` call carried is given to another call
    _cover_distributions(steps, dists, seed)
    if not _covered(steps, dists):  # the run took the room a distribution needed (about 3% of plans)
        for step, (kind, base, dist) in zip(steps, before):
            step.kind, step.base, step.dist = kind, base, dist
        _cover_distributions(steps, dists, seed)
    _late_again_runs(steps, seed)  # after: the value distributions are judged in the first MIN_CALLS only
    return Schedule(plain_tail(steps), timed_from)


def _covered(steps: list[Step], dists: list[str]) -> bool:
    carried = {s.dist for s in steps[:MIN_CALLS] if s.kind in CARRIERS}
    return all(d in carried for d in dists if d != "normal")


REPEATS = 6  # with the two near ones: more leave too few calls for every value distribution


def _repeat_calls(steps: list[Step], seed: int) -> None:
    """A few calls become repeats of an earlier plain fresh call's contents, in new tensors:
    calls 6 and 7 always (PROBE_REPEATS: the shortest schedule keeps them), the rest drawn among
    calls 8-23 so that they survive the budget's trimming (never under MIN_CALLS): one whose base
    is the call just before it, one whose base is two calls back (NEAR_DISTANCES: the base made a
    plain fresh call where it was not one), the others with a base 3-16 calls back. So a memo
    of the last call's contents, or of the last few, is hit whatever its depth. From their own
    stream: the rest of the plan is the one the seed gave."""
    rng = random.Random(derive(seed, "schedule-repeats"))
    for index, base in PROBE_REPEATS.items():
        steps[index].kind, steps[index].base, steps[index].dist = "repeat", base, "normal"
    window = [s for s in steps if max(PROBE_REPEATS) < s.index < MIN_CALLS]
    for distance in NEAR_DISTANCES:
        free = [s for s in window if s.kind != "repeat" and not _is_base(steps, s.index)
                and _can_be_base(steps, s.index - distance)]
        if not free:
            continue
        step = rng.choice(free)
        base = steps[step.index - distance]
        base.kind, base.dist, base.base = "fresh", "normal", None
        step.kind, step.base, step.dist = "repeat", base.index, "normal"
    more = REPEATS - sum(s.kind == "repeat" for s in steps)
    free = [s for s in window if s.kind != "repeat" and not _is_base(steps, s.index)]
    for step in sorted(rng.sample(free, min(more, len(free))), key=lambda s: s.index):
        bases = [b.index for b in steps if step.index - 16 <= b.index <= step.index - 3
                 and b.kind == "fresh" and b.dist == "normal"]
        if bases:
            step.kind, step.base, step.dist = "repeat", rng.choice(bases), "normal"


AGAIN_RUN = 3  # consecutive `again` calls: a memo may wait for the same tensors twice in a row
AGAIN_SINGLE = 0  # more calls taken from the first MIN_CALLS leave some distribution none


def _again_calls(steps: list[Step], seed: int) -> None:
    """Calls among calls 8-23 become `again` calls: the previous call's tensor objects,
    unmodified. One run of AGAIN_RUN in a row (a timing loop passes the same tensors hundreds of
    times; a memo that replays only from the second time in a row is hit there) and AGAIN_SINGLE
    more alone. Never a repeat or a repeat's base (repeats are timed against plain fresh calls
    and a large problem draws a repeat's base again from its seed). Before _cover_distributions,
    which gives a distribution an `again` call carried to another call. From their own stream."""
    rng = random.Random(derive(seed, "schedule-again"))

    def eligible(index: int) -> bool:
        step = steps[index] if 0 <= index < len(steps) else None
        return (step is not None and max(PROBE_REPEATS) < index < MIN_CALLS and step.kind != "repeat"
                and not _is_base(steps, index) and index not in PROBE_FRESH)

    starts = [i for i in range(len(steps)) if all(eligible(i + k) for k in range(AGAIN_RUN))]
    if starts:
        first = rng.choice(starts)
        for index in range(first, first + AGAIN_RUN):
            steps[index].kind, steps[index].base, steps[index].dist = "again", index - 1, "normal"
    singles = [i for i in range(len(steps)) if eligible(i) and steps[i].kind != "again" and steps[i].dist == "normal"
               and "again" not in (steps[i - 1].kind, steps[i + 1].kind if i + 1 < len(steps) else "")]
    for index in rng.sample(singles, min(AGAIN_SINGLE, len(singles))):
        steps[index].kind, steps[index].base = "again", index - 1


LATE_AGAIN_RUNS = 3  # more runs past MIN_CALLS, where a long schedule (a small problem) has room
LATE_WINDOW = 60  # ... early in it: the budgets (budgeted_count) often keep only the first 50-70 calls


def _late_again_runs(steps: list[Step], seed: int) -> None:
    """More runs of AGAIN_RUN past the first MIN_CALLS calls. Whether the allocator hands a
    dropped output's block back to the next call depends on its state (glibc's free lists, its
    mmap threshold), so one run may not meet it; each further run is another chance, where the
    calls cost little. Budget trimming drops them first."""
    rng = random.Random(derive(seed, "schedule-again-late"))
    taken: set[int] = set()
    for _ in range(LATE_AGAIN_RUNS):
        starts = [i for i in range(MIN_CALLS + 1, min(len(steps), LATE_WINDOW) - AGAIN_RUN)
                  if all(steps[i + k].kind != "repeat" and not _is_base(steps, i + k) and i + k not in taken
                         and i + k - 1 not in taken for k in range(AGAIN_RUN))]
        if not starts:
            return
        first = rng.choice(starts)
        for index in range(first, first + AGAIN_RUN):
            steps[index].kind, steps[index].base, steps[index].dist = "again", index - 1, "normal"
            taken.add(index)
        taken.add(first + AGAIN_RUN)  # runs never touch: each starts after a call that is not one


def _is_base(steps: list[Step], index: int) -> bool:
    return any(s.kind == "repeat" and s.base == index for s in steps)


def _can_be_base(steps: list[Step], index: int) -> bool:
    """A call past the probe's calls that is no repeat: it can become a plain fresh call (a
    near-duplicate that copies it copies whatever it holds; an overwrite or reuse after it
    writes into whatever tensors it had)."""
    return max(PROBE_REPEATS) < index < len(steps) and steps[index].kind != "repeat"


CARRIERS = ("fresh", "overwrite", "reuse")  # the kinds whose new values a distribution shapes


def _cover_distributions(steps: list[Step], dists: list[str], seed: int) -> None:
    """Every allowed distribution at least once among the first MIN_CALLS calls, so that a
    schedule the budgets trim to MIN_CALLS (any problem past a couple of MiB) still tries each.
    Drawn call by call, some distribution was missing from the first 24 calls in most runs
    (outliers in about a third of them), and a GEMM that clamps its inputs to the benchmark's
    range (fixtures: value_sniff_clamp_gemm_cpp) passed about 3% of its runs: no outliers call,
    no near-sparse call. A missing distribution takes the place of one that another call of
    those MIN_CALLS also carries, else goes to a plain fresh call (past the first four and no
    near-duplicate's base where there is one: a near-duplicate keeps its base's distribution),
    else a near-duplicate becomes a fresh call for it; never to a repeat or a repeat's base
    (repeats are timed against plain fresh calls), nor to the first call. From its own stream:
    the rest of the plan is the one the seed gave."""
    head = steps[:MIN_CALLS]
    values = [d for d in dists if d != "normal"]
    carried = {s.dist for s in head if s.kind in CARRIERS}
    missing = [d for d in values if d not in carried]
    if not missing:
        return
    rng = random.Random(derive(seed, "schedule-coverage"))
    # Plain, as the fresh calls they are timed against: repeats' bases and the probe's fresh calls.
    repeated = {s.base for s in steps if s.kind == "repeat"} | set(PROBE_FRESH)
    copied = {s.base for s in steps if s.base is not None}
    for dist in missing:
        counts: dict[str, int] = {}
        for s in head:
            if s.kind in CARRIERS:
                counts[s.dist] = counts.get(s.dist, 0) + 1
        open_ = [s for s in head if s.kind in CARRIERS and s.index not in repeated and s.index > 0]
        plain = [s for s in open_ if s.kind == "fresh" and s.dist == "normal"]
        near = [s for s in head if s.kind.startswith("near")]
        spare = ([s for s in open_ if s.dist != "normal" and counts[s.dist] > 1]
                 or [s for s in plain if s.index >= 4 and s.index not in copied]
                 or [s for s in plain if s.index >= 4] or plain
                 or [s for s in near if s.index not in copied] or near)
        if not spare:
            return
        step = rng.choice(spare)
        if step.kind.startswith("near"):  # no room left among the fresh calls: one near-duplicate fewer
            step.kind, step.base = "fresh", None
        step.dist = dist


def _value_calls(steps: list[Step], dists: list[str], seed: int) -> None:
    """Two of the first fresh calls always carry a value distribution (when the problem allows
    one), so that a schedule trimmed to MIN_LARGE_CALLS still runs value trials. Drawn from a
    separate stream: the rest of the plan is the one the seed always gave."""
    values = [d for d in dists if d != "normal"]
    if not values:
        return
    rng = random.Random(derive(seed, "schedule-values"))
    head = steps[:PROBE_FRESH[0]]  # the calls before the probe's plain fresh ones
    for step in head[1:]:
        if step.dist == "normal" and sum(s.dist != "normal" for s in head) < 2:
            step.dist = rng.choice(values)


def budgeted_count(planned: int, bytes_per_call: int, seconds_per_call: float) -> int:
    """How many of the planned calls fit the budgets (never under MIN_CALLS unless planned is)."""
    by_bytes = BUDGET_BYTES // max(bytes_per_call, 1)
    by_time = int(BUDGET_S / max(seconds_per_call, 1e-6))
    floor = MIN_CALLS if bytes_per_call * MIN_CALLS <= 4 * BUDGET_BYTES else MIN_LARGE_CALLS
    return min(planned, max(floor, min(by_bytes, by_time)))
