"""The call schedule, submission side (runs in the submission's worker). Observes, decides nothing.

For each scheduled call (problem.schedule): builds the inputs as asked (fresh tensors,
written in place into the previous call's tensors, new tensors over the previous call's
storage: same address, same `_version`, or the previous call's tensors again), calls the model, copies the output at once (before
anything that lets other threads run on), and on the next call looks at that output again:
an output that changed after forward returned was still being written (lazy completion).
From `timed_from` on, the process carries what a timing process would (DECOY).
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
import time
import traceback
import types
from typing import Any, Optional

from gatekeeper.behaviour.queued_entry import queue_behind_work
from gatekeeper.behaviour.schedule_inputs import build_inputs, unpoisoned
from gatekeeper.behaviour.timing_loop import probe_entries, timing_loop
from gatekeeper.behaviour.executing import executing, scan_blocked_threads
from gatekeeper.behaviour.attribution import Recorder
from gatekeeper.runtime.kernel_owner import LaunchesOnly
from gatekeeper.behaviour.observe import (
    Census, changed, identities, input_digests, overlaps, storage_range, tensors_of,
)
from gatekeeper.sandbox.tensors import digest, pack_output

# What a timing worker holds that a submission could look for: a module with the reference
# `Model` (an nn.Module subclass), get_inputs / get_init_inputs, and the timing method.
DECOY_SOURCE = '''
import torch

class Model(torch.nn.Module):
    def forward(self, *args):
        raise RuntimeError("not the reference")

def get_inputs():
    return []

def get_init_inputs():
    return []
'''


def plant_decoy() -> None:
    module = types.ModuleType("gk_problem")
    exec(compile(DECOY_SOURCE, "<problem>", "exec"), module.__dict__)
    sys.modules["gk_problem"] = module
    try:
        import gatekeeper.timing.method  # noqa: F401  (what the timing worker imports first)
    except Exception:
        pass
    # The timing worker runs without the poison (deterministic mode would change what it
    # times): from here on the checking worker does too, so the two look alike.
    import torch

    try:
        torch._C._set_deterministic_algorithms(False)
    except (AttributeError, TypeError):
        torch.use_deterministic_algorithms(False)


def _escapes(out: Any) -> bool:
    """Whether the output still changes after the caller's stream is synchronised (a queued
    call, where a branch on a busy stream takes its timed path): GK640 on a scheduled call."""
    import torch

    torch.cuda.current_stream().synchronize()
    early = digest(out)
    torch.cuda.synchronize()
    return early != digest(out)


class Runner:
    def __init__(self, model: Any, channel: Any, device: str, attribute: bool = True) -> None:
        self.model, self.channel, self.device = model, channel, device
        self.attribute = attribute
        self.previous: Optional[list[Any]] = None
        self.previous_kind = ""
        self.last: Optional[tuple[int, Any, str]] = None  # (index, output, digest at return)

    def _check_last(self) -> None:
        """The previous output, looked at again one call later."""
        if self.last is None:
            return
        index, out, early = self.last
        try:
            later = digest(out)
        except Exception:
            later = early
        if later != early:
            self.channel.send("schedule-late", index=index)
        self.last = None

    def call(self, entry: dict[str, Any]) -> None:
        import torch

        index = entry["index"]
        previous_out = self.last[1] if self.last is not None else None  # kept alive: no honest reuse
        # Before this call's inputs are written: they may go into the previous call's storage,
        # which an output may share when the reference itself works in place.
        self._check_last()
        # Past the first of an again run, as a timing loop that drops each result before the next
        # call: the allocator may hand the same block back, holding the previous result, and
        # code that asks whether the caller still holds it sees that nobody does (both are
        # caught by time). The first of the run keeps it, as a caller that holds results does.
        dropping = entry["kind"] == "again" and self.previous_kind == "again"
        self.previous_kind = entry["kind"]
        inputs = build_inputs(entry["kind"], entry["inputs"], self.previous, self.device)
        self.previous = None  # the previous call's tensors are released before this call
        # Where the inputs sit: the allocator may hand a fresh call an earlier input's
        # address too, and a cache keyed on it then fails there (evidence for GK672).
        addresses = [t.data_ptr() if isinstance(t, torch.Tensor) else 0 for t in inputs]
        # Every call gets the cheap checks (input digests before and after, storage overlap,
        # the thread census); the recorder (profile hook, dispatch mode) runs on the calls the
        # parent drew from the secret (issue 22 item 2), so a submission that behaves only
        # under the hook is checked where it does not.
        census = Census()
        before = input_digests(inputs)
        recorder = Recorder(self.device) if self.attribute and entry.get("record") else None
        if recorder is None and self.attribute and LaunchesOnly.available(self.device):
            recorder = LaunchesOnly()  # GPU: kernels by launcher on every call, invisibly
        if dropping:
            # Dropped only now, right before the call: the checks above allocate (an input's
            # digest is a buffer of its size) and would take the freed block first.
            previous_out = None
        staged: list[Any] = []  # the values the current stream copies in behind a spin: kept to the end
        if entry.get("queued"):
            try:
                inputs, staged = queue_behind_work(inputs, self.device)
            except Exception:  # the harness's own failure (no spin kernel in this torch): a plain call
                torch.cuda.synchronize()
                staged = []
            addresses = [t.data_ptr() if isinstance(t, torch.Tensor) else 0 for t in inputs]
        try:
            began, cpu0, pcpu0 = time.perf_counter(), time.thread_time(), time.process_time()
            with recorder if recorder is not None else contextlib.nullcontext(), executing(), \
                    unpoisoned(entry["kind"] == "again"):
                out = self.model(*inputs)
            wall, cpu = time.perf_counter() - began, time.thread_time() - cpu0
            pcpu = time.process_time() - pcpu0
            escaped = staged and isinstance(out, torch.Tensor) and _escapes(out)
            scan_blocked_threads()  # between calls: a thread started in this one may hide from the sampler
            if recorder is not None:
                recorder.finish_device()
            packed = pack_output(out)
        except Exception as exc:
            if recorder is not None:
                recorder.finish_device()
            self.channel.send("schedule-error", index=index, type=type(exc).__name__, message=str(exc)[:1000],
                              traceback=traceback.format_exc()[-2000:])
            self.previous = inputs
            return
        after = Census(census).counts
        observed: dict[str, Any] = {
            "mutated": [i for i, (b, a) in enumerate(zip(before, input_digests(inputs))) if b != a],
            "aliases": self._aliases(inputs, out, previous_out),
        }
        if recorder is not None:
            observed["work"] = recorder.summary(out, wall)
        if isinstance(out, torch.Tensor):
            early = packed["file"]["sha256"] if "file" in packed else hashlib.sha256(packed["data"]).hexdigest()
            self.last = (index, out, early)  # as it was at return (a large output's file carries it)
        self.channel.send("schedule-call", index=index, output=packed, threads_before=census.counts,
                          threads_after=after, addresses=addresses, wall_s=wall, cpu_s=cpu, pcpu_s=pcpu,
                          queued=bool(staged), stream_escape=bool(escaped), **observed)
        self.previous = inputs

    def _aliases(self, inputs: list[Any], out: Any, previous_out: Any) -> list[str]:
        """What the output's storage shares: an input, a parameter or buffer, the previous output."""
        import torch

        ranges = [storage_range(t) for t in tensors_of(out)]
        found = [f"input {i}" for i, t in enumerate(inputs)
                 if isinstance(t, torch.Tensor) and any(overlaps(storage_range(t), r) for r in ranges)]
        if isinstance(self.model, torch.nn.Module) and any(
                overlaps(storage_range(p), r) for p in list(self.model.parameters()) + list(self.model.buffers())
                for r in ranges):
            found.append("a parameter or buffer")
        if any(overlaps(storage_range(t), r) for t in tensors_of(previous_out) for r in ranges):
            found.append("the output of the previous call")
        return found


def run_schedule(model: Any, channel: Any, device: str, fed: dict[str, Any], attribute: bool = True) -> None:
    channel.phase("schedule")
    baseline = identities()
    runner = Runner(model, channel, device, attribute)
    timed_from = int(fed.get("timed_from", 0))
    calls = list(fed.get("calls", []))
    looped = loop_runs(runner)
    probes = probe_entries(calls) if looped else []
    fractions = [f for f in fed.get("loop_probes") or [] if isinstance(f, (int, float))]
    for entry in calls:
        if entry["index"] >= timed_from and not fed.get("decoy_planted"):
            plant_decoy()
            fed["decoy_planted"] = True
            baseline = identities()
        if probes and entry is probes[0]:
            break  # the schedule's last calls are the timing loop's probes
        channel.phase("schedule", call=entry["index"])  # the time limit is per call: large problems run too
        runner.call(entry)
    if looped:
        runner._check_last()
        timing_loop(runner, channel, probes, fractions)
    now = identities()
    if changed(baseline, now):
        channel.send("tampering", when="during the call schedule", names=changed(baseline, now))


def loop_runs(runner: Runner) -> bool:
    """Whether the timing loop runs in this worker: on the CPU, with the sampler armed."""
    from gatekeeper.behaviour import executing as sampled

    return sampled.active() and str(runner.device).startswith("cpu")
