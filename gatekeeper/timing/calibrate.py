"""Device ceilings measured once per device and cached: the launch-latency floor (an empty
kernel timed by the same method as a submission), the copy bandwidth (a large
device-to-device copy, bytes read plus written) and the matrix rate (a large product on
random data). Runs on the GPU, in a worker that never imported a submission.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from gatekeeper.timing.stats import quantile

_MIB = 1 << 20


def _events_us(fn, reps: int, before=None) -> list[float]:
    out = []
    for _ in range(reps):
        if before is not None:
            before()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end) * 1e3)
    return out


def launch_floor_us(l2_bytes: int, reps: int = 400) -> dict[str, float]:
    """An empty kernel (`torch.cuda._sleep(0)`), queued behind a flush and a spin exactly as a
    timed call is; its 5th percentile is the least time any launched kernel can show. Also
    measured as a CUDA-graph replay, the floor for graph mode."""
    from gatekeeper.timing.method import L2Flush, spin_cycles_for

    device = torch.device("cuda", torch.cuda.current_device())
    flush = L2Flush(l2_bytes, 2.0, device)
    spin = spin_cycles_for(20.0, device)

    def before() -> None:
        flush()
        torch.cuda._sleep(spin)

    for _ in range(20):
        torch.cuda._sleep(0)
    events = sorted(_events_us(lambda: torch.cuda._sleep(0), reps, before))
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(0)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        torch.cuda._sleep(0)
    replays = sorted(_events_us(graph.replay, reps, before))
    return {"launch_floor_us": quantile(events, 0.05), "launch_median_us": quantile(events, 0.5),
            "graph_launch_floor_us": quantile(replays, 0.05), "graph_launch_median_us": quantile(replays, 0.5)}


def copy_gbps(size_mib: int = 2048, reps: int = 20) -> float:
    src = torch.randn(size_mib * _MIB // 4, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    times = sorted(_events_us(lambda: dst.copy_(src), reps))
    moved = 2 * src.numel() * src.element_size()
    del src, dst
    torch.cuda.empty_cache()
    return moved / (quantile(times, 0.5) * 1e-6) / 1e9


def matmul_tflops(dtype: torch.dtype, n: int = 8192, reps: int = 10) -> float:
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(3):
        a @ b
    times = sorted(_events_us(lambda: a @ b, reps))
    del a, b
    torch.cuda.empty_cache()
    return 2 * n**3 / (quantile(times, 0.5) * 1e-6) / 1e12


def measure(l2_bytes: int) -> dict[str, Any]:
    started = time.monotonic()
    out: dict[str, Any] = dict(launch_floor_us(l2_bytes))
    out["copy_gbps"] = copy_gbps()
    tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        out["matmul_tflops"] = {
            "bfloat16": matmul_tflops(torch.bfloat16),
            "float16": matmul_tflops(torch.float16),
            "float32": matmul_tflops(torch.float32, n=4096),
        }
        # float32 inputs on TF32 tensor cores, as cuDNN runs convolutions by default: the faster
        # of the two float32 rates bounds float32 work (floors.measured_matmul_rate).
        torch.backends.cuda.matmul.allow_tf32 = True
        out["matmul_tflops"]["tf32"] = matmul_tflops(torch.float32, n=4096)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    out["calibration_s"] = time.monotonic() - started
    return out
