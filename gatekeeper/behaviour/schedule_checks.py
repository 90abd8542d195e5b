"""The checks on every scheduled call (issue 22 item 2), judged in the parent.

The named trials used to be the only calls whose aliasing, mutation, threads and work were
looked at, and a submission could tell them apart (the recorder's profile hook, the Python
dispatch key, its overhead) and behave only there. Now:
  - aliasing, input mutation and the thread census are judged on every scheduled call,
    recorded or not (they need no hook: the worker compares storages, digests and counts);
  - the recorder (who did the work, GK667) runs on a subset of the scheduled calls drawn
    from the run's secret, besides the named trials. A submission that behaves only while
    the hook is set, or only for its first calls, is checked on the calls where it does not.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Optional

from gatekeeper.problem.secret import derive

RECORDED_SHARE = 0.25  # of the scheduled calls run under the recorder (at least MIN_RECORDED)
MIN_RECORDED = 2


def recorded_indices(seed: int, indices: list[int]) -> set[int]:
    """Which scheduled calls run under the recorder: drawn from the run's secret."""
    rng = random.Random(derive(seed, "recorded-calls"))
    count = min(len(indices), max(MIN_RECORDED, round(RECORDED_SHARE * len(indices))))
    return set(rng.sample(sorted(indices), count))


QUEUED_SHARE, MIN_QUEUED = 0.3, 2


def queued_indices(seed: int, calls: list[dict[str, Any]]) -> set[int]:
    """Which plain fresh calls start behind work queued on the current stream (GPU only,
    behaviour.queued_entry): drawn from the run's secret, like the recorded calls."""
    plain = sorted(c["index"] for c in calls if c.get("kind") == "fresh" and c.get("dist", "normal") == "normal")
    rng = random.Random(derive(seed, "queued-calls"))
    return set(rng.sample(plain, min(len(plain), max(MIN_QUEUED, round(QUEUED_SHARE * len(plain))))))


def loop_probe_fractions(seed: int, count: int) -> list[float]:
    """Where in the CPU timing loop its probes fall (behaviour.timing_loop), drawn from the
    run's secret: one in each of `count` equal spans of the loop, at a random point of its
    middle. The last probe runs at the loop's end besides these, so a memo that is active in
    any part of the loop meets one."""
    rng = random.Random(derive(seed, "loop-probes"))
    return [round((k + rng.uniform(0.2, 0.8)) / count, 4) for k in range(max(count, 0))]


def work_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The recorded scheduled calls' work, shaped like a named trial's call message."""
    return [{"kind": "call", "trial": f"scheduled call {m['index']}", "work": m["work"]} for m in messages
            if m.get("kind") == "schedule-call" and isinstance(m.get("work"), dict)]


def _where(indices: list[int], total: int) -> str:
    shown = ", ".join(map(str, indices[:6])) + (", ..." if len(indices) > 6 else "")
    return f"scheduled call{'s' if len(indices) > 1 else ''} {shown} ({len(indices)} of {total})"


def judge_calls(messages: list[dict[str, Any]], nominal: dict[str, Any],
                add: Callable[..., None], correct: Optional[dict[int, bool]] = None) -> None:
    """GK620 / GK610 / GK612 (aliasing), GK625 (mutation), GK645 (threads) on every scheduled
    call. What the reference itself does on the nominal inputs (an aliased input, an input it
    mutates) is allowed here too. `correct`: which scheduled calls' values were right; the
    previous call's storage coming back is stale (GK610) unless the values were right for
    this call (GK612, reused storage)."""
    calls = [m for m in messages if m.get("kind") == "schedule-call" and isinstance(m.get("index"), int)]
    aliased, stale, mutated, threads = {}, {}, {}, {}
    allowed_inputs = set(nominal.get("aliased_inputs", []))
    for m in calls:
        index = int(m["index"])
        aliases = [a for a in m.get("aliases") or [] if isinstance(a, str)
                   and not (a.startswith("input ") and a.split()[-1].isdigit() and int(a.split()[-1]) in allowed_inputs)
                   and not (a == "a parameter or buffer" and nominal.get("aliases_parameter"))]
        if "the output of the previous call" in aliases:
            stale[index] = ["the output of the previous call"]
            aliases.remove("the output of the previous call")
        if aliases:
            aliased[index] = aliases
        changed = [i for i in m.get("mutated") or [] if i not in nominal.get("mutated", [])]
        if changed:
            mutated[index] = changed
        grew = _grew(m.get("threads_before") or {}, m.get("threads_after") or {})
        if grew:
            threads[index] = grew
    total = len(calls)
    if aliased:
        first = min(aliased)
        add("GK620", "schedule", {"calls": {str(k): v for k, v in list(aliased.items())[:10]}},
            what=", ".join(aliased[first]) + f" ({_where(sorted(aliased), total)})")
    wrong = sorted(i for i in stale if not (correct or {}).get(i, False))
    fresh = sorted(i for i in stale if i not in wrong)
    if wrong:
        add("GK610", "schedule", {"calls": wrong[:10]},
            what=f"shares storage with the output of the previous call ({_where(wrong, total)})")
    elif fresh:
        add("GK612", "schedule", {"calls": fresh[:10]},
            what=f"shares storage with the output of the previous call ({_where(fresh, total)})")
    if mutated:
        first = min(mutated)
        add("GK625", "schedule", {"calls": {str(k): v for k, v in list(mutated.items())[:10]}},
            index=", ".join(map(str, mutated[first])) + f" ({_where(sorted(mutated), total)})")
    if threads:
        first = min(threads)
        add("GK645", "schedule", {"calls": {str(k): v for k, v in list(threads.items())[:10]}},
            what=f"{threads[first]} ({_where(sorted(threads), total)})")
    escaped = sorted(int(m["index"]) for m in calls if m.get("stream_escape") is True)
    if escaped:  # queued calls (behaviour.queued_entry): work left on a stream the caller does not wait for
        add("GK640", "schedule", {"calls": escaped[:10], "where": _where(escaped, total), "queued": True})


def _grew(before: dict[str, Any], after: dict[str, Any]) -> str:
    out = []
    for key, words in (("python_threads", "Python thread(s)"), ("os_threads", "native thread(s)"),
                       ("children", "child process(es)")):
        try:
            more = int(after.get(key, 0)) - int(before.get(key, 0))
        except (TypeError, ValueError):
            continue
        if more > 0:
            out.append(f"{more} {words} still running")
    return "; ".join(out)
