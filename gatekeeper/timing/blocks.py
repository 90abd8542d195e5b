"""The worker side of block timing: one timing worker per side (reference, submission), each
timing blocks of calls when the trusted parent says so, alternately, so the two never share
the device and drift over the run falls on both alike.

Commands the parent feeds (`channel.receive()`):
  {"op": "warmup", "start": i, "calls": n, "graph": g}   untimed calls i..i+n-1, a CUDA graph
        per input set when g (graph mode: replays read the working buffers), then the host
        issue time; {"op": "events"} drops the graphs (the other side could not be captured)
  {"op": "block", "start": i, "calls": n, "spin_us": s, "gather_seed": g}
        per call: prepare call i's inputs (gatekeeper.timing.fresh), reset persisting L2
        lines and the stream's access window, flush L2, queue a spin, then the call between
        events; afterwards sample the output at positions drawn from (g, i)
  {"op": "report", "indices": [...]}         the samples of those calls (chosen after the block)
  {"op": "stop"} or end of input              the job returns
On a CPU (tests) the call is timed by the host clock and nothing CUDA is touched.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

import torch

from gatekeeper.timing import method
from gatekeeper.timing.fresh import FreshInputs


def sample_positions(out: Any, seed: int, index: int, per_tensor: int) -> list[Any]:
    """Sampled elements of each output tensor (on the device, small), positions from (seed, index)."""
    tensors = [out] if isinstance(out, torch.Tensor) else [t for t in (out or []) if isinstance(t, torch.Tensor)]
    samples = []
    for i, t in enumerate(tensors):
        flat = t.detach().reshape(-1)
        n = flat.numel()
        g = torch.Generator().manual_seed((seed * 1_000_003 + index * 31 + i) & 0x7FFFFFFFFFFF)
        idx = torch.randint(0, max(n, 1), (min(per_tensor, n),), generator=g).to(flat.device)
        samples.append((list(t.shape), str(t.dtype).replace("torch.", ""), (flat[idx] if n else flat).clone()))
    return samples


class BlockTimer:
    """Times blocks of calls of one callable over fresh inputs."""

    def __init__(self, call: Callable[..., Any], inputs: FreshInputs, device: torch.device,
                 flush_factor: float = 2.0, per_tensor: int = 4096) -> None:
        self.call, self.inputs, self.device = call, inputs, device
        self.cuda = device.type == "cuda"
        self.per_tensor = per_tensor
        self.samples: dict[int, list[Any]] = {}
        self.flush: Optional[method.L2Flush] = None
        self.l2 = method.L2_RESET if self.cuda else None
        self.limits_seen: set[int] = set()
        self.graphs: Optional[list[Any]] = None
        self.graph_outputs: list[Any] = []
        if self.cuda:
            l2_bytes = torch.cuda.get_device_properties(device).L2_cache_size or 50 << 20
            self.flush = method.L2Flush(l2_bytes, flush_factor, device)

    def _invoke(self, index: int, args: list[Any]) -> Any:
        if self.graphs is not None:
            slot = self.inputs.slot(index)
            self.graphs[slot].replay()
            return self.graph_outputs[slot]
        return self.call(*args)

    def capture(self) -> Optional[str]:
        """One graph per working set; the reason when the callable cannot be captured."""
        side = method.Side("timed", self.call, self.inputs.work)
        try:
            method.capture_graphs(side)
        except Exception as exc:  # host syncs, CPU work: plain launches then, and the report says so
            return f"{type(exc).__name__}: {exc}"[:500]
        self.graphs, self.graph_outputs = side.graphs, side.graph_outputs or []
        return None

    def warmup(self, start: int, calls: int, graph: bool = False) -> dict[str, Any]:
        graph_error = None
        with torch.no_grad():
            for i in range(start, start + calls):
                self.call(*self.inputs.prepare(i))
            self._sync()
            if graph and self.cuda:
                graph_error = self.capture()
            host = 0.0
            for i in range(start + calls, start + calls + 5):  # host issue time, as method._host_call_us
                args = self.inputs.prepare(i)
                self._sync()
                t0 = time.perf_counter()
                self._invoke(i, args)
                host = max(host, (time.perf_counter() - t0) * 1e6)
                self._sync()
        return {"host_call_us": host, "next": start + calls + 5, "graph_error": graph_error,
                "mode": "graph" if self.graphs is not None else "events"}

    def _sync(self) -> None:
        if self.cuda:
            method._synchronize()

    def block(self, start: int, calls: int, spin_us: float, gather_seed: int) -> dict[str, Any]:
        event_us, synced_us = [], []
        spin = method.spin_cycles_for(spin_us, self.device) if self.cuda else 0
        self.samples = {}
        with torch.no_grad():
            for i in range(start, start + calls):
                args = self.inputs.prepare(i)  # outside the timed region
                if self.cuda:
                    e, s, out = self._time_cuda(i, args, spin)
                else:
                    t0 = time.perf_counter()
                    out = self.call(*args)
                    e = s = (time.perf_counter() - t0) * 1e6
                event_us.append(e)
                synced_us.append(s)
                self.samples[i] = sample_positions(out, gather_seed, i, self.per_tensor)
        limit = self.l2.persisting_limit() if self.l2 is not None else None
        if limit:
            self.limits_seen.add(limit)
        return {"event_us": event_us, "synced_us": synced_us, "persisting_l2_limit": limit,
                "l2_reset": None if self.l2 is None else ("ok" if self.l2.available and not self.l2.errors
                                                          else "; ".join(self.l2.errors) or "no libcuda")}

    def _time_cuda(self, index: int, args: list[Any], spin: int) -> tuple[float, float, Any]:
        stream = torch.cuda.current_stream(self.device)
        start, end, after, quiet, woken = (method._Event(enable_timing=True) for _ in range(5))
        if self.l2 is not None:
            self.l2.reset(stream.cuda_stream)
        self.flush()
        # This process's own sync-to-next-launch gap, with nothing left on any stream (the
        # previous call ended in a device sync): the baseline for the gap after the call.
        # The reference runs in another process, whose gap can differ by microseconds; only
        # the part of the after-call gap beyond this baseline is work that escaped the stream.
        method._record(quiet)
        method._synchronize()
        method._record(woken)
        method._sleep(spin)
        method._record(start)
        out = self._invoke(index, args)
        method._record(end)
        method._synchronize()
        method._record(after)
        method._synchronize()
        event = method._elapsed_ms(start, end) * 1e3
        beyond = method._elapsed_ms(end, after) * 1e3 - method._elapsed_ms(quiet, woken) * 1e3
        return event, event + max(0.0, beyond), out

    def report(self, indices: list[int]) -> list[dict[str, Any]]:
        from gatekeeper.sandbox.tensors import dtype_name, raw_bytes

        def pack(values: torch.Tensor) -> dict[str, Any]:  # a few KiB: always inside the frame, never a file
            host = values.detach().cpu()
            return {"__tensor__": True, "dtype": dtype_name(host.dtype), "shape": list(host.shape),
                    "stride": list(host.stride()), "device": str(values.device), "data": raw_bytes(host)}

        out = []
        for i in indices:
            got = self.samples.get(int(i))
            if got is None:
                out.append({"index": int(i), "tensors": None})
                continue
            out.append({"index": int(i), "tensors": [{"shape": shape, "dtype": dtype, "values": pack(values)}
                                                     for shape, dtype, values in got]})
        return out


def serve(timer: BlockTimer, channel: Any) -> None:
    """Answer the parent's commands until it says stop (or closes the pipe)."""
    while True:
        cmd = channel.receive()
        op = cmd.get("op") if cmd else "stop"
        if op == "stop":
            return
        if op == "warmup":
            channel.phase("warmup")
            channel.send("warm", **timer.warmup(int(cmd["start"]), int(cmd["calls"]), bool(cmd.get("graph"))))
        elif op == "events":
            timer.graphs = None
        elif op == "block":
            channel.phase("block")
            channel.send("block", start=int(cmd["start"]), **timer.block(
                int(cmd["start"]), int(cmd["calls"]), float(cmd.get("spin_us", 20.0)), int(cmd["gather_seed"])))
        elif op == "report":
            channel.phase("report")
            channel.send("samples", outputs=timer.report([int(i) for i in cmd.get("indices", [])]))
        channel.phase("idle")
