"""The timing loop, and the checked calls inside it (CPU, the submission's worker).

A benchmark times a model by calling it on the same tensors back to back. The loop does the
same with the schedule's last call's tensors: no checks between its calls, the output held
across the next call for the first half (`out = model(x)`) and dropped for the second
(`model(x)`), fresh allocations unpoisoned. Each call's wall time and the calling thread's CPU
time go to the parent, and the sampler attributes the loop's samples like any call's.

The schedule's last plain fresh calls are the loop's probes. At positions drawn from the run's
secret (`fed["loop_probes"]`: fractions of the loop, the last one at its end), each probe
writes its own inputs' values in place into the loop's tensors and is called like the loop's
calls. It gets the same objects at the same addresses, as warm as the loop, under the same load
from other processes: only `_version` and the contents change. Its output is copied at once,
value-checked by the parent like any scheduled call's, and its time compared with the loop's
calls just before it (behaviour.repeat_probe).

Until round 7 (2026-12-06) the probes ran after the loop on new tensors. Code that told them
apart (new objects after a long streak) could answer them by other means, and a memo dropped
before the loop's end cleared the comparison (docs/threat-model.md). Now a memo that hits on the loop's
calls misses on each probe and must do the work there, wherever the probe falls. A memo that
ignores the change returns a stale result, which the value check sees (GK611). To tell a probe
from a loop call, code must look at `_version` or the contents, which is the memo's own test.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Optional

from gatekeeper.behaviour.executing import executing
from gatekeeper.behaviour.observe import Census, input_digests
from gatekeeper.behaviour.schedule_inputs import build_inputs, unpoisoned, write_in_place
from gatekeeper.problem.schedule import AFTER_LOOP as PROBE_CALLS
from gatekeeper.sandbox.tensors import digest, pack_output

LOOP_S = 1.0  # wall time of the timing loop at most
LOOP_CALLS = 1000  # ... and calls at most: a benchmark's loop is hundreds of calls long
# Loop calls at least before a probe, counted from the loop's start or the last probe: a memo
# armed by a streak re-arms there, and they are the calls the probe is compared with.
MIN_GAP = 16


def probe_entries(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The schedule's trailing plain fresh calls (PROBE_CALLS at most, and never all of it)."""
    tail: list[dict[str, Any]] = []
    for entry in reversed(calls[1:]):
        if len(tail) == PROBE_CALLS or entry.get("kind") != "fresh" or entry.get("dist", "normal") != "normal":
            break
        tail.insert(0, entry)
    return tail


@dataclass
class _Probe:
    entry: dict[str, Any]
    fresh: list[Any]  # its inputs as new tensors, built before the loop (untimed)
    before: list[Optional[str]]  # their digests: the values the call gets
    position: int = -1  # loop calls made before it
    inputs: list[Any] = field(default_factory=list)  # what the call got
    in_place: bool = False  # every tensor written into the loop's own
    addresses: list[int] = field(default_factory=list)
    after: list[Optional[str]] = field(default_factory=list)
    out: Any = None
    packed: Any = None
    wall: float = 0.0
    cpu: float = 0.0
    pcpu: float = 0.0
    failed: Optional[tuple[BaseException, str]] = None


def _call_probe(runner: Any, probe: _Probe, inputs: list[Any], position: int,
                following: Optional[_Probe]) -> list[Any]:
    """Writes the probe's values into `inputs`, calls the model as the loop does; returns the
    inputs the loop goes on with (the same objects, unless a shape or dtype did not fit)."""
    import torch

    probe.inputs, probe.in_place = write_in_place(inputs, probe.fresh)
    probe.fresh = []
    probe.position = position
    probe.addresses = [t.data_ptr() if isinstance(t, torch.Tensor) else 0 for t in probe.inputs]
    try:
        began, cpu0, pcpu0 = time.perf_counter(), time.thread_time(), time.process_time()
        with executing():
            out = runner.model(*probe.inputs)
        probe.wall, probe.cpu = time.perf_counter() - began, time.thread_time() - cpu0
        probe.pcpu = time.process_time() - pcpu0
        # Copied at once: an output kept in a buffer the next call rewrites (a persistent
        # output, honest under `default`) holds this call's values only until then.
        probe.packed, probe.out = pack_output(out), out
    except Exception as exc:
        probe.failed = (exc, traceback.format_exc())
    probe.after = input_digests(probe.inputs)  # now: the loop's next call gets the same tensors
    if following is not None:
        # The time limit is per call: the next probe's starts now, not right before it, so that
        # the parent's handling of the message does not land in that probe's time.
        runner.channel.phase("schedule", call=following.entry["index"])
    return probe.inputs


def _at(probes: list[_Probe], k: int) -> Optional[_Probe]:
    return probes[k] if k < len(probes) else None


def timing_loop(runner: Any, channel: Any, entries: list[dict[str, Any]], fractions: list[float]) -> None:
    """Runs the loop with `entries` as its probes (see the module's docstring), then reports
    the loop (`schedule-loop`) and each probe as a scheduled call."""
    probes = [_Probe(e, f, input_digests(f)) for e in entries
              for f in [build_inputs("fresh", e["inputs"], None, runner.device)]]
    inner = sorted(float(x) for x in fractions if isinstance(x, (int, float)))[:max(len(probes) - 1, 0)]
    inner += [1.0] * (max(len(probes) - 1, 0) - len(inner))  # too few drawn: the rest at the end
    inputs: list[Any] = list(runner.previous) if runner.previous is not None else []
    walls: list[float] = []
    cpus: list[float] = []  # the calling thread's CPU time per call: other processes' load does not add to it
    pcpus: list[float] = []  # the whole process's: work the caller hands to other threads (red team round 8)
    error = ""
    out: Any = None
    census = Census()
    done, since = 0, 0  # probes made; loop calls since the last one
    if probes:
        channel.phase("schedule", call=probes[0].entry["index"])
    began = time.perf_counter()
    with unpoisoned(True):
        while runner.previous is not None and len(walls) < LOOP_CALLS and time.perf_counter() - began < LOOP_S:
            progress = max(len(walls) / LOOP_CALLS, (time.perf_counter() - began) / LOOP_S)
            if done < len(inner) and since >= MIN_GAP and progress >= inner[done]:
                inputs = _call_probe(runner, probes[done], inputs, len(walls), _at(probes, done + 1))
                done, since = done + 1, 0
                continue
            if len(walls) * 2 >= LOOP_CALLS or (time.perf_counter() - began) * 2 >= LOOP_S:
                out = None  # the second half: each result dropped before the next call
            start, cpu0, pcpu0 = time.perf_counter(), time.thread_time(), time.process_time()
            try:
                with executing():
                    out = runner.model(*inputs)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"[:500]
                break
            walls.append(time.perf_counter() - start)
            cpus.append(time.thread_time() - cpu0)
            pcpus.append(time.process_time() - pcpu0)
            since += 1
        out = None
        for k in range(done, len(probes)):  # the last always, and any the loop ended before
            inputs = _call_probe(runner, probes[k], inputs, len(walls), _at(probes, k + 1))
    after = Census(census).counts
    channel.send("schedule-loop", calls=len(walls), walls=[round(w, 7) for w in walls],
                 cpus=[round(c, 7) for c in cpus], pcpus=[round(c, 7) for c in pcpus], after=[p.entry["index"] for p in probes],
                 probes_at=[p.position for p in probes], in_place=[p.entry["index"] for p in probes if p.in_place],
                 error=error)
    previous_out = None  # the probe before's output, held by `probes` (no honest reuse of its storage)
    for k, probe in enumerate(probes):
        index = probe.entry["index"]
        if probe.failed is not None:
            exc, trace = probe.failed
            channel.send("schedule-error", index=index, type=type(exc).__name__, message=str(exc)[:1000],
                         traceback=trace[-2000:])
            previous_out = None
            continue
        if k == len(probes) - 1 and _changed_since_return(probe.out, probe.packed):
            channel.send("schedule-late", index=index)
        channel.send("schedule-call", index=index, output=probe.packed, threads_before=census.counts,
                     threads_after=after, addresses=probe.addresses, wall_s=probe.wall, cpu_s=probe.cpu, pcpu_s=probe.pcpu,
                     mutated=[i for i, (b, a) in enumerate(zip(probe.before, probe.after)) if b != a],
                     aliases=runner._aliases(probe.inputs, probe.out, previous_out))
        previous_out = probe.out
    runner.previous = inputs or runner.previous
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
