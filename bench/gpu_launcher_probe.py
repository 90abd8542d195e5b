"""Does the CUPTI launcher tracker (gatekeeper/runtime/kernel_owner.py) see every launch, and
does it name the right launcher? A direct probe for a GPU machine (issue 22 item 3, issue 23).

In this process, with the tracker started before CUDA is first used (as the worker does), it
launches kernels whose launcher is known and compares the tracker's class with that truth:
  own_cuda     a load_inline kernel launched with <<<...>>>       -> own (the extension's .so)
  torch_relu   torch.relu                                         -> torch (libtorch_cuda)
  cublas_mm    a float32 2048^3 torch.mm                          -> vendor (libcublas/libcublasLt)
  own_triton   a @triton.jit kernel                               -> own (Triton's launcher)
  graph        own kernel + torch.relu captured in a CUDA graph, replayed 3 times
               -> each keeps the launcher of its capture
Kernels that ran while recording but got no launcher (their callback did not fire) are counted
as `unowned`. The cost per launch: a 1-element add_ 20,000 times (5 runs, median) in a process
without the tracker (a child, before and after) and here with it, recording off and on. A failed
build of the test extension skips its section only; the graph then captures a Triton kernel.

Then the same question through the whole pipeline: `gatekeeper check` on a few submissions,
once by kernel name and once with GATEKEEPER_KERNEL_OWNERSHIP=launcher, keeping each report's
`work` section (kernel_ownership says whether the tracker ran in the worker).

    python bench/gpu_launcher_probe.py --out "$OUT" [--checks SUB:PROBLEM,...]
One JSON line per item in $OUT/launcher_probe.jsonl, flushed as it goes; reports in $OUT/launcher_reports/.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
LAUNCHES = int(os.environ.get("GK_PROBE_LAUNCHES", "20000"))
REPEATS = int(os.environ.get("GK_PROBE_REPEATS", "5"))

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void probe_scale(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
torch::Tensor scale(torch::Tensor x) {
  auto y = torch::empty_like(x);
  long n = x.numel();
  probe_scale<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""
CPP_SRC = "torch::Tensor scale(torch::Tensor x);"  # the stream header belongs in the .cu (2026-12-05: nvcc failed without it)


def per_launch_us() -> float:
    import torch

    x = torch.zeros(1, device="cuda")
    for _ in range(200):
        x.add_(1)
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(LAUNCHES):
        x.add_(1)
    torch.cuda.synchronize()
    return (time.perf_counter() - began) / LAUNCHES * 1e6


def per_launch_runs() -> list[float]:
    """REPEATS runs of per_launch_us (one alone moved by a few percent between runs)."""
    return [round(per_launch_us(), 3) for _ in range(REPEATS)]


def triton_launch_runs() -> list[float]:
    """REPEATS runs of a 1-element Triton kernel launched LAUNCHES // 4 times (its Python
    launch path is slower than torch's)."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def cost_add(x_ptr):
        tl.store(x_ptr, tl.load(x_ptr) + 1.0)

    x = torch.zeros(1, device="cuda")
    for _ in range(50):
        cost_add[(1,)](x)
    runs = []
    for _ in range(REPEATS):
        torch.cuda.synchronize()
        began = time.perf_counter()
        for _ in range(LAUNCHES // 4):
            cost_add[(1,)](x)
        torch.cuda.synchronize()
        runs.append(round((time.perf_counter() - began) / (LAUNCHES // 4) * 1e6, 3))
    return runs


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def direct(save: Callable[[dict], None]) -> None:
    os.environ["GATEKEEPER_KERNEL_OWNERSHIP"] = "launcher"
    os.environ["TORCH_EXTENSIONS_DIR"] = os.environ.get("GK_PROBE_EXT_DIR") or tempfile.mkdtemp(prefix="gk-probe-ext-")
    import torch

    from gatekeeper.runtime import kernel_owner

    params = kernel_owner.worker_params()
    walk = os.environ.get("GK_PROBE_WALK", "")  # a variant of COST_VARIANTS instead of the product's library
    if walk and "kernel_owner" in params:
        params = {**params, "kernel_owner": variant_library(walk, Path(tempfile.mkdtemp(prefix="gk-probe-walk-"))),
                  "variant": walk}
    save({"item": "params", **params})
    if "kernel_owner" not in params:
        return
    kernel_owner.start({**params, "submission": __file__}, "cuda")  # before CUDA is first used, as the worker does
    owners = kernel_owner.active()
    save({"item": "start", "status": kernel_owner.status(), "own_roots": kernel_owner.own_roots()})
    if owners is None:
        return
    from torch.utils.cpp_extension import load_inline

    began = time.perf_counter()
    try:  # a failed build costs the own-CUDA section only; Triton, torch, cuBLAS and the graph still run
        ext = load_inline("gk_probe_ext", CPP_SRC, cuda_sources=CUDA_SRC, functions=["scale"], verbose=False)
        save({"item": "build", "seconds": round(time.perf_counter() - began, 1)})
    except Exception as exc:
        ext = None
        save({"item": "build", "crash": f"{type(exc).__name__}: {exc}"[-2000:]})
    import triton
    import triton.language as tl

    @triton.jit
    def probe_triton_add(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)

    def triton_add(x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        probe_triton_add[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y

    x = torch.randn(1 << 20, device="cuda")
    a = torch.randn(2048, 2048, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    static_in = torch.randn(1 << 20, device="cuda")
    own = ext.scale if ext is not None else triton_add  # the graph's own kernel: the extension's, else Triton's
    for _ in range(2):  # warm: lazy module loads and Triton's compile happen outside the sections
        own(x), torch.relu(x), torch.mm(a, a), triton_add(x)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.relu(own(static_in))
    torch.cuda.current_stream().wait_stream(side)
    owners.record(True)  # the capture is inside a recorded span, as a submission's capture in its first call is
    with torch.cuda.graph(graph):
        torch.relu(own(static_in))
    owners.record(False)
    torch.cuda.synchronize()
    save({"item": "graph_capture", "own_kernel": "extension <<<...>>>" if ext is not None else "Triton"})

    sections: dict[str, tuple[Callable[[], Any], str]] = {
        "torch_relu": (lambda: torch.relu(x), "torch"),
        "cublas_mm": (lambda: torch.mm(a, a), "vendor"),
        "own_triton": (lambda: triton_add(x), "own"),
        "graph": (lambda: [graph.replay() for _ in range(3)], "own+torch"),
    }
    if ext is not None:
        sections = {"own_cuda": (lambda: ext.scale(x), "own"), **sections}
    for name, (fn, expected) in sections.items():
        torch.cuda.synchronize()
        owners.collect()  # deliver what earlier launches left in CUPTI's buffers
        owners.record(True)  # resets the tables
        fn()
        owners.record(False)
        torch.cuda.synchronize()
        kernels = kernel_owner.classed(owners.collect())
        got = sorted({k["owner"] for k in kernels})
        save({"item": "section", "section": name, "expected": expected, "classes": got,
              "as_expected": "+".join(got) == expected if "+" in expected else got == [expected],
              "unowned_ns": owners.lib.gk_unowned_ns(), "dropped": owners.lib.gk_dropped(),
              "kernels": [{**k, "name": k["name"][:90]} for k in kernels]})
    off = per_launch_runs()
    owners.record(True)
    on = per_launch_runs()
    owners.record(False)
    save({"item": "cost", "launches": LAUNCHES, "repeats": REPEATS,
          "us_per_launch_tracker_recording_off": median(off), "us_per_launch_tracker_recording_on": median(on),
          "runs_recording_off": off, "runs_recording_on": on})


# --part cost: where the tracker's cost per launch goes. Each variant in a child of its own (CUPTI
# takes one subscriber a process), started before CUDA is first used. The variants are
# gatekeeper/runtime/kernel_owner.c built here with the defines it documents; the product's
# library is not changed.
COST_VARIANTS: dict[str, Any] = {
    "none": None,             # no tracker: the baseline
    "hold": "hold",           # the timing worker's setup: subscribed, no callback enabled
    "full": [],               # the product's tracker as the checking worker starts it
    "walk_every_launch": ["-DGK_WALK_EVERY_LAUNCH"],               # a stack walk per launch, segment table
    "dladdr_every_launch": ["-DGK_WALK_EVERY_LAUNCH", "-DGK_DLADDR"],  # the first version (2026-12-05)
    "dladdr_stub": ["-DGK_DLADDR"],                                # stubs and cache, dladdr's lookup
}


def variant_library(name: str, scratch: Path) -> str:
    from gatekeeper.runtime import kernel_owner

    if COST_VARIANTS[name] in ([], "hold"):
        library, why = kernel_owner.build_kernel_owner()
        if library is None:
            raise RuntimeError(why)
        return str(library)
    target = scratch / f"kernel_owner_{name}.so"
    flags = [f"-I{d}" for d in kernel_owner._include_dirs()] + list(COST_VARIANTS[name])
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", *flags, "-o", str(target), str(kernel_owner.SOURCE), "-ldl",
                    "-lpthread"], check=True, capture_output=True, text=True, timeout=120)
    return str(target)


def cost_child(name: str, library: str) -> dict:
    """In a fresh process: start the variant, then the cost per launch (recording off)."""
    from gatekeeper.runtime import kernel_owner

    out: dict[str, Any] = {"variant": name}
    owners = None
    if COST_VARIANTS[name] is not None:
        libcupti = kernel_owner.find_libcupti()
        owners = kernel_owner.KernelOwners(library)
        if COST_VARIANTS[name] == "hold":
            owners.hold(libcupti)
        else:
            owners.start(libcupti)
    runs = per_launch_runs()
    out.update({"us_per_launch": median(runs), "runs": runs})
    try:  # a driver-API launch (Triton's launcher): the tracker's per-CUfunction cache
        triton_runs = triton_launch_runs()
        out.update({"us_per_triton_launch": median(triton_runs), "triton_runs": triton_runs})
    except Exception as exc:
        out["triton"] = f"{type(exc).__name__}: {exc}"[-300:]
    if owners is not None and COST_VARIANTS[name] != "hold":
        for _ in range(100):
            owners.launcher_here()
        began = time.perf_counter()
        for _ in range(2000):
            where = owners.launcher_here()
        out["us_per_stack_walk_from_python"] = round((time.perf_counter() - began) / 2000 * 1e6, 3)
        out["launcher_here"] = where
        if COST_VARIANTS[name] == []:
            owners.record(True)
            out["us_per_launch_recording_on"] = median(per_launch_runs())
            owners.record(False)
    return out


def cost_parts(save: Callable[[dict], None]) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="gk-probe-cost-"))
    for name in list(COST_VARIANTS) + ["none"]:  # the baseline again at the end: drift
        try:
            library = variant_library(name, scratch) if COST_VARIANTS[name] is not None else ""
        except Exception as exc:
            save({"item": "cost_variant", "variant": name, "build_crash": f"{type(exc).__name__}: {exc}"[-800:]})
            continue
        done = subprocess.run([sys.executable, __file__, "--cost-child", name, "--library", library],
                              capture_output=True, text=True, timeout=150)
        try:
            save({"item": "cost_variant", "launches": LAUNCHES, "repeats": REPEATS, **json.loads(done.stdout)})
        except json.JSONDecodeError:
            save({"item": "cost_variant", "variant": name, "exit": done.returncode, "stderr": done.stderr[-800:]})


def check(sub: str, problem: str, mode: str, reports: Path) -> dict:
    env = {**os.environ, "GATEKEEPER_KERNEL_OWNERSHIP": mode}
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "gatekeeper", "check", sub, "--problem", problem, "--keep-going",
                           "--format", "json"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=400)
    stem = f"{Path(sub).parent.name}_{Path(sub).stem}__{mode}"
    (reports / f"{stem}.json").write_text(done.stdout or done.stderr)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"item": "check", "submission": sub, "mode": mode, "exit": done.returncode, "stderr": done.stderr[-800:]}
    work = report.get("work") or {}
    return {"item": "check", "submission": sub, "mode": mode, "exit": done.returncode, "verdict": report.get("verdict"),
            "seconds": round(time.perf_counter() - began, 1), "kernel_ownership": work.get("kernel_ownership"),
            "shares": {c: v.get("share") for c, v in (work.get("classes") or {}).items()},
            "own_share_of_compute": work.get("own_share_of_compute"), "top": work.get("top"),
            "errors": [f"{f['rule']}: {f['message'][:400]}" for f in report.get("findings", []) if f.get("severity") == "error"]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--checks", default="fixtures/submissions/fallback_nn_linear.py:fixtures/problems/fallback_linear_relu.py,"
                        "fixtures/submissions/fallback_honest_triton.py:fixtures/problems/seed_mean.py")
    parser.add_argument("--baseline", action="store_true", help="(child) the cost per launch without the tracker")
    parser.add_argument("--part", choices=("direct", "checks", "both", "cost"), default="both")
    parser.add_argument("--cost-child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--library", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cost_child:
        print(json.dumps(cost_child(args.cost_child, args.library)))
        return 0
    if args.baseline:
        runs = per_launch_runs()
        print(json.dumps({"us_per_launch_no_tracker": median(runs), "runs": runs}))
        return 0
    out = Path(args.out)
    reports = out / "launcher_reports"
    reports.mkdir(parents=True, exist_ok=True)
    sink = os.open(out / "launcher_probe.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def save(record: dict) -> None:
        line = json.dumps(record, default=str)
        os.write(sink, (line + "\n").encode())
        print(line[:1500], flush=True)

    if args.part in ("direct", "both"):
        base = subprocess.run([sys.executable, __file__, "--baseline"], capture_output=True, text=True, timeout=120)
        save({"item": "cost_baseline", "stdout": base.stdout.strip(), "stderr": base.stderr[-400:]})
        try:
            direct(save)
        except Exception as exc:  # the checks below still tell something
            save({"item": "direct", "crash": f"{type(exc).__name__}: {exc}"[-2000:]})  # a compiler's complaint is at the end
        base = subprocess.run([sys.executable, __file__, "--baseline"], capture_output=True, text=True, timeout=120)
        save({"item": "cost_baseline_after", "stdout": base.stdout.strip(), "stderr": base.stderr[-400:]})
    if args.part == "cost":
        cost_parts(save)
    if args.part in ("direct", "cost"):
        return 0
    pairs = [tuple(p.split(":", 1)) for p in args.checks.split(",") if p]
    with ThreadPoolExecutor(max_workers=2 * len(pairs)) as pool:
        futures = [pool.submit(check, s, p, m, reports) for s, p in pairs for m in ("name", "launcher")]
        for fut in futures:
            try:
                save(fut.result())
            except Exception as exc:
                save({"item": "check", "crash": f"{type(exc).__name__}: {exc}"[:600]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
