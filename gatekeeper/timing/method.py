"""The timing method. Runs inside the sandboxed worker, on the GPU.

Per timed call, in this order on the current stream:
  L2 flush (a write of >= 2x the L2 size)  -> evicts what the last call left in the cache
  a GPU spin sized to the host's launch time -> work queued ahead of the start event
  start event, the call, end event          -> brackets device time, not host launch latency
  device-wide synchronize, then a second end event
The second event covers work the call left on side streams (the host sync waits for every
stream), so each call yields two times: `event_us` (start..end, the figure) and `synced_us`
(start..after the device sync). Their difference, against the reference's, measures work
that escaped the current stream.

Before the flush, persisting L2 lines and the stream's access-policy window are reset
(gatekeeper.timing.l2), so lines a submission pinned are evicted like the rest.

The timing stage times each side in its own worker, in alternating blocks
(gatekeeper.timing.blocks, driven by gatekeeper.timing.conduct): the submission's process
never holds the reference. `time_pair` below times one or two callables in one process, for
the benches (bench/gpu_ncu.py) and the calibration's method.

The CUDA primitives are captured when this module is imported, which the worker does before
it imports the submission, so a submission that rebinds `torch.cuda.Event` or
`torch.cuda.synchronize` does not change what the timer calls.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import torch

from gatekeeper.timing.adaptive import Sampled, StopRule, sample_until_stable
from gatekeeper.timing.l2 import L2Reset

_Event = torch.cuda.Event
_elapsed_ms = torch.cuda.Event.elapsed_time
_record = torch.cuda.Event.record
_synchronize = torch.cuda.synchronize
_sleep = torch.cuda._sleep
_perf = time.perf_counter
L2_RESET = L2Reset()  # libcuda bound now, before any submission code; inert without a driver

Inputs = Sequence[Any]
Call = Callable[..., Any]


@dataclass
class Side:
    """One thing to time: a callable and its pre-generated input sets."""

    name: str
    call: Call
    input_sets: list[Inputs]
    graphs: Optional[list[Any]] = None  # CUDA graphs, one per input set, in graph mode
    graph_outputs: Optional[list[Any]] = None
    event_us: list[float] = field(default_factory=list)
    synced_us: list[float] = field(default_factory=list)
    kept: dict[int, Any] = field(default_factory=dict)  # timed call index -> output clone


class L2Flush:
    """Writes a buffer of `factor` x the L2 size: a write evicts the cache lines any earlier
    call left behind, and it is long enough device work to queue the call behind."""

    def __init__(self, l2_bytes: int, factor: float, device: torch.device) -> None:
        n = max(int(l2_bytes * factor) // 4, 1 << 20)
        self.buffer = torch.empty(n, dtype=torch.int32, device=device)
        self.nbytes = n * 4

    def __call__(self) -> None:
        self.buffer.fill_(0)


def _host_call_us(side: Side, reps: int = 5) -> float:
    """How long the host takes to issue one call (Python, dispatch, launches)."""
    worst = 0.0
    for k in range(reps):
        t0 = _perf()
        _run(side, k % len(side.input_sets))
        worst = max(worst, (_perf() - t0) * 1e6)
        _synchronize()
    return worst


def _run(side: Side, k: int) -> Any:
    if side.graphs is not None:
        side.graphs[k].replay()
        return side.graph_outputs[k]
    return side.call(*side.input_sets[k])


def capture_graphs(side: Side) -> None:
    """Graph mode: one CUDA graph per input set, captured after warm-up. Raises when the
    callable cannot be captured (host syncs, CPU work); the caller reports that."""
    graphs, outs = [], []
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for inputs in side.input_sets:  # warm-up on the capture stream, as torch advises
            side.call(*inputs)
    torch.cuda.current_stream().wait_stream(stream)
    for inputs in side.input_sets:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs.append(side.call(*inputs))
        graphs.append(graph)
    _synchronize()
    side.graphs, side.graph_outputs = graphs, outs


class PairTimer:
    """Times interleaved (reference, submission) pairs; `sample(n)` is the adaptive rule's
    sampler. `keep` names the timed call indices whose outputs are cloned for the check."""

    def __init__(self, reference: Side, submission: Optional[Side], flush: L2Flush,
                 spin_cycles: int, keep: Sequence[int] = ()) -> None:
        self.reference, self.submission = reference, submission
        self.flush, self.spin_cycles = flush, spin_cycles
        self.keep = set(keep)
        self.calls = 0

    def _time_one(self, side: Side, index: int) -> None:
        k = index % len(side.input_sets)
        start, end, after = _Event(enable_timing=True), _Event(enable_timing=True), _Event(enable_timing=True)
        L2_RESET.reset(torch.cuda.current_stream().cuda_stream)
        self.flush()
        _sleep(self.spin_cycles)
        _record(start)
        out = _run(side, k)
        _record(end)
        _synchronize()
        _record(after)
        _synchronize()
        side.event_us.append(_elapsed_ms(start, end) * 1e3)
        side.synced_us.append(_elapsed_ms(start, after) * 1e3)
        if index in self.keep:
            side.kept[index] = _clone(out)

    def sample(self, n: int) -> tuple[list[float], list[float]]:
        ref0, sub0 = len(self.reference.event_us), len(self.submission.event_us) if self.submission else 0
        for _ in range(n):
            index = self.calls
            order = (self.reference, self.submission) if index % 2 == 0 else (self.submission, self.reference)
            for side in order:
                if side is not None:
                    self._time_one(side, index)
            self.calls += 1
        ref = self.reference.event_us[ref0:]
        sub = self.submission.event_us[sub0:] if self.submission else list(ref)
        return ref, sub


def _clone(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return out.detach().clone()
    if isinstance(out, (list, tuple)):
        return [_clone(o) for o in out]
    return out


def spin_cycles_for(us: float, device: torch.device) -> int:
    """GPU clock cycles for a spin of about `us` microseconds (at the SM clock torch reports;
    a slower actual clock only lengthens the spin, which is harmless)."""
    props = torch.cuda.get_device_properties(device)
    khz = getattr(props, "clock_rate", 0) or 2_000_000
    return int(us * khz / 1e3)


@dataclass
class MethodResult:
    sampled: Sampled
    mode: str
    flush_bytes: int
    spin_us: float
    host_call_us: dict[str, float]


def time_pair(reference: Side, submission: Optional[Side], *, rule: StopRule, warmup_calls: int,
              l2_bytes: int, flush_factor: float, mode: str = "events", keep: Sequence[int] = (),
              device: Optional[torch.device] = None, now: Callable[[], float] = time.monotonic) -> MethodResult:
    device = device or torch.device("cuda", torch.cuda.current_device())
    sides = [s for s in (reference, submission) if s is not None]
    with torch.no_grad():
        for side in sides:  # warm-up: compilation, autotuning, allocator growth; not timed
            for k in range(warmup_calls):
                side.call(*side.input_sets[k % len(side.input_sets)])
        _synchronize()
        if mode == "graph":
            for side in sides:
                capture_graphs(side)
        host = {side.name: _host_call_us(side) for side in sides}
        # Queue at least twice the slowest host issue time ahead of the start event.
        spin_us = max(20.0, 2 * max(host.values()))
        flush = L2Flush(l2_bytes, flush_factor, device)
        timer = PairTimer(reference, submission, flush, spin_cycles_for(spin_us, device), keep)
        sides_needed = (True, submission is not None)
        sampled = sample_until_stable(timer.sample, rule, now, sides=sides_needed)
        _synchronize()
    return MethodResult(sampled=sampled, mode=mode, flush_bytes=flush.nbytes, spin_us=spin_us, host_call_us=host)
