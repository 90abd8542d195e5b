"""The calls right after the timing loop (submission side): the schedule's last plain fresh
calls, run back to back as the loop's calls are, then checked like every scheduled call.

The loop's last calls are timed against them (behaviour.repeat_probe). They ran under the same
load from other processes, and as warm: their inputs are built before the first of them, no
check runs between them but the copy of each output (inputs digested before and after, threads
counted once they have all returned), and fresh allocations are not NaN-filled, as in the loop.
Their values go to the parent and are judged as any scheduled call's, so a submission that told
them apart (new tensors right after a streak) could not answer them with anything fast and wrong.
Once they have all returned, the last call's output is read again (work still landing in it
after its call returned, GK675), and each output's storage is compared with the call before's
output, as for the other scheduled calls.
"""

from __future__ import annotations

import time
import traceback
from typing import Any

from gatekeeper.behaviour.executing import executing
from gatekeeper.behaviour.observe import Census, input_digests
from gatekeeper.behaviour.schedule_inputs import build_inputs, unpoisoned
from gatekeeper.problem.schedule import AFTER_LOOP as AFTER_CALLS
from gatekeeper.sandbox.tensors import digest, pack_output


def after_loop_entries(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The schedule's trailing plain fresh calls (AFTER_CALLS at most, and never all of it)."""
    tail: list[dict[str, Any]] = []
    for entry in reversed(calls[1:]):
        if len(tail) == AFTER_CALLS or entry.get("kind") != "fresh" or entry.get("dist", "normal") != "normal":
            break
        tail.insert(0, entry)
    return tail


def run_after_loop(runner: Any, entries: list[dict[str, Any]]) -> None:
    """Runs `entries` back to back, then reports each as the schedule's other calls are."""
    import torch

    channel = runner.channel
    prepared = []
    for entry in entries:
        inputs = build_inputs("fresh", entry["inputs"], None, runner.device)
        prepared.append((entry, inputs, input_digests(inputs),
                         [t.data_ptr() if isinstance(t, torch.Tensor) else 0 for t in inputs]))
    census = Census()
    ran: list[tuple[Any, ...]] = []
    with unpoisoned(True):
        for entry, inputs, before, addresses in prepared:
            channel.phase("schedule", call=entry["index"])  # the time limit is per call
            try:
                began, cpu0 = time.perf_counter(), time.thread_time()
                with executing():
                    out = runner.model(*inputs)
                wall, cpu = time.perf_counter() - began, time.thread_time() - cpu0
                # Copied at once: an output kept in a buffer the next call rewrites (a persistent
                # output, honest under `default`) holds this call's values only until then.
                packed = pack_output(out)
                ran.append((entry, inputs, before, addresses, out, packed, wall, cpu, None))
            except Exception as exc:
                ran.append((entry, inputs, before, addresses, None, None, 0.0, 0.0, (exc, traceback.format_exc())))
    after = Census(census).counts
    previous_out = None  # the call before's output, held by `ran` (no honest reuse of its storage)
    for position, (entry, inputs, before, addresses, out, packed, wall, cpu, failed) in enumerate(ran):
        index = entry["index"]
        if failed is not None:
            exc, trace = failed
            channel.send("schedule-error", index=index, type=type(exc).__name__, message=str(exc)[:1000],
                         traceback=trace[-2000:])
            previous_out = None
            continue
        if position == len(ran) - 1 and _changed_since_return(out, packed):
            channel.send("schedule-late", index=index)
        channel.send("schedule-call", index=index, output=packed, threads_before=census.counts, threads_after=after,
                     addresses=addresses, wall_s=wall, cpu_s=cpu,
                     mutated=[i for i, (b, a) in enumerate(zip(before, input_digests(inputs))) if b != a],
                     aliases=runner._aliases(inputs, out, previous_out))
        previous_out = out
    runner.previous = prepared[-1][1] if prepared else runner.previous
    runner.last = None


def _changed_since_return(out: Any, packed: Any) -> bool:
    """Whether the last call's output changed after its copy at return: work still landing in
    it after forward returned (GK675). Read once the run is over, so nothing runs between the
    calls; only the last call's, which no later call may have rewritten (an earlier output may
    sit in storage the next call reuses honestly, as scratch or as a persistent buffer)."""
    import hashlib

    import torch

    if not isinstance(out, torch.Tensor) or not isinstance(packed, dict):
        return False
    early = packed["file"]["sha256"] if "file" in packed else hashlib.sha256(packed["data"]).hexdigest()
    try:
        return digest(out) != early
    except Exception:  # a tensor that cannot be read back now: nothing to compare
        return False
