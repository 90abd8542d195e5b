"""GPU validation of large tensors between workers (issue 11, item 5): a KernelBench-style
level-1 problem whose output is over 2 GB, checked end to end through `gatekeeper check
--keep-going`. Before the transfer files (gatekeeper/sandbox/spill.py) this failed with "the
reference worker failed (forged): frame length ... is implausible".

Run on the H200 from the repository root (the lead; not run by the engineer who wrote it):
    python bench/gpu_large_output.py --out "$OUT" 2>&1 | tee "$OUT/gpu_large_output.log"

Cases (each one `gatekeeper check` subprocess, in this order; `--cases` picks):
  honest  a Triton ReLU kernel (a CUDA load_inline one with --impl cuda): must pass
  wrong   the same kernel scaling by --wrong-scale (1.01 by default): must be rejected, not error.
          1.01 is within atol = rtol = 1e-2 everywhere (|0.01 r| <= 0.01 + 0.01 |r|), so only
          the error budget (GK668) could reject it, and that has no float64 reference past 2^26
          output elements: on the H100 (docs/gpu-validation.md, sixth round) it passed. 1.1 is
          off the tolerance wherever r > 0.111 (GK601).
One JSON line per case in $OUT/large_output.jsonl, flushed when the case ends, plus a line
per 10 s while it runs (free disk under the temp dir, resident memory of gatekeeper and its
workers, GPU memory used), so a run cut off at its time limit keeps what it did.

Default problem: ReLU on x of shape [32768, 16384] float32: 2 GiB in, 2 GiB out (--rows,
--cols for larger). Disk: the trials' tensors are held as files until the submission has run;
for 2 GiB in and out expect a peak under 25 GiB in the temp dir (GATEKEEPER_SPILL_BYTES
sets the size above which a tensor travels as a file, 64 MiB by default).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Simple model that performs a ReLU activation (KernelBench level 1 style)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = {rows}
dim = {cols}


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
'''

TRITON = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0) * SCALE, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
'''

CUDA = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
__global__ void relu_kernel(const float* x, float* out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(x[i], 0.0f) * SCALE;
}
torch::Tensor relu_forward(torch::Tensor x) {
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    long long n = input.numel();
    int threads = 256;
    long long blocks = (n + threads - 1) / threads;
    relu_kernel<<<blocks, threads>>>(input.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""
cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"
relu = load_inline(name="large_relu_SUFFIX", cpp_sources=cpp_source, cuda_sources=cuda_source,
                   functions=["relu_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu.relu_forward(x)
'''


def submission(impl: str, wrong: bool, scale: str = "1.01") -> str:
    if impl == "triton":
        return TRITON.replace("SCALE", scale if wrong else "1.0")
    return CUDA.replace("SCALE", f"{scale}f" if wrong else "1.0f").replace("SUFFIX", "wrong" if wrong else "honest")


class Monitor:
    """Peaks while a case runs: free disk under the temp dir, RSS of a process tree, GPU memory."""

    def __init__(self, pid: int, log, case: str) -> None:
        self.pid, self.log, self.case = pid, log, case
        self.min_free_gb = float("inf")
        self.max_rss_gb = 0.0
        self.max_gpu_gb = 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _rss_gb(self) -> float:
        total, todo, seen = 0.0, [self.pid], set()
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            try:
                with open(f"/proc/{pid}/status") as fh:
                    total += next((int(line.split()[1]) for line in fh if line.startswith("VmRSS:")), 0) / 2**20
                for task in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{task}/children") as fh:
                        todo += [int(c) for c in fh.read().split()]
            except (OSError, ValueError):
                continue
        return total

    def _gpu_gb(self) -> float:
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=10).stdout.split()
            return max(float(v) for v in out) / 1024 if out else 0.0
        except (OSError, ValueError, subprocess.SubprocessError):
            return 0.0

    def _run(self) -> None:
        began, last = time.time(), 0.0
        while not self.stop.wait(1.0):
            free = shutil.disk_usage(tempfile.gettempdir()).free / 2**30
            rss, gpu = self._rss_gb(), self._gpu_gb()
            self.min_free_gb, self.max_rss_gb = min(self.min_free_gb, free), max(self.max_rss_gb, rss)
            self.max_gpu_gb = max(self.max_gpu_gb, gpu)
            if time.time() - last >= 10:
                last = time.time()
                emit(self.log, {"case": self.case, "progress_s": round(time.time() - began), "free_disk_gb": round(free, 1),
                                "rss_gb": round(rss, 2), "gpu_used_gb": round(gpu, 1)})

    def finish(self) -> dict:
        self.stop.set()
        self.thread.join(5)
        return {"min_free_disk_gb": round(self.min_free_gb, 1), "peak_rss_gb": round(self.max_rss_gb, 2),
                "peak_gpu_used_gb": round(self.max_gpu_gb, 1)}


def emit(log, record: dict) -> None:
    line = json.dumps(record)
    print(line, flush=True)
    log.write(line + "\n")
    log.flush()


def run_case(name: str, sub: Path, problem: Path, log, timeout: int) -> None:
    began = time.perf_counter()
    cmd = [sys.executable, "-m", "gatekeeper", "check", str(sub), "--problem", str(problem), "--keep-going",
           "--format", "json"]
    emit(log, {"case": name, "command": " ".join(cmd)})
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    monitor = Monitor(proc.pid, log, name)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
    peaks = monitor.finish()
    record = {"case": name, "exit_code": proc.returncode, "seconds": round(time.perf_counter() - began, 1), **peaks}
    try:
        report = json.loads(stdout)
        report = report[0] if isinstance(report, list) else report
        record.update(verdict=report.get("verdict"), error=report.get("error"),
                      stages={s["name"]: [s["status"], (s.get("reason") or "")[:300], s.get("duration_s")]
                              for s in report.get("stages", [])},
                      findings=[{"rule": f["rule"], "severity": f["severity"], "stage": f["stage"],
                                 "message": f["message"][:300]} for f in report.get("findings", [])],
                      work=(report.get("work") or {}).get("classes"))
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        record.update(parse_error=str(exc), stdout_tail=stdout[-2000:])
    record["stderr_tail"] = stderr[-1500:]
    (Path(log.name).parent / f"large_{name}_report.json").write_text(stdout)  # the whole report, for the record
    emit(log, record)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--rows", type=int, default=32768)
    parser.add_argument("--cols", type=int, default=16384)
    parser.add_argument("--impl", choices=("triton", "cuda"), default="triton")
    parser.add_argument("--cases", default="honest,wrong")
    parser.add_argument("--timeout", type=int, default=540, help="seconds per case")
    parser.add_argument("--wrong-scale", default="1.01", help="the wrong case's factor on the ReLU")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "large_output.jsonl").open("a") as log:
        import torch

        emit(log, {"start": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "torch": torch.__version__,
                   "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                   "shape": [args.rows, args.cols], "output_bytes": args.rows * args.cols * 4, "impl": args.impl,
                   "tmp": tempfile.gettempdir(), "free_disk_gb": round(shutil.disk_usage(tempfile.gettempdir()).free / 2**30, 1),
                   "isolation": os.environ.get("GATEKEEPER_ISOLATION", "auto"),
                   "spill_bytes": os.environ.get("GATEKEEPER_SPILL_BYTES", "default (64 MiB)")})
        with tempfile.TemporaryDirectory(prefix="gk-large-") as scratch:
            problem = Path(scratch) / "19_ReLU_large.py"
            problem.write_text(PROBLEM.format(rows=args.rows, cols=args.cols))
            (out / problem.name).write_text(problem.read_text())
            for case in [c.strip() for c in args.cases.split(",") if c.strip()]:
                sub = Path(scratch) / f"{case}_{args.impl}.py"
                sub.write_text(submission(args.impl, wrong=case == "wrong", scale=args.wrong_scale))
                (out / sub.name).write_text(sub.read_text())
                run_case(case, sub, problem, log, args.timeout)


if __name__ == "__main__":
    main()
