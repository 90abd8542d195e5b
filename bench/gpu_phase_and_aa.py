"""GPU checks of the timing stage's fairness (issue 23 items 4 and 6). Run on the H200 from
the repo root (after the .pth setup of bench/gpu_timing.sh); one JSON line per case in
$OUT/phase_aa.jsonl, written as each case finishes.

phase (item 6): can a submission tell the calls that are timed from the calls that are checked?
  - probe: fixtures/submissions/phase_probe_gpu_honest.py records, per process, every view of a
    call that could tell them apart (dispatch/function modes, graph capture, stream, grad,
    tracer, gap since the last call, call index, input address reuse). It runs through the
    behaviour stage (the checking worker) and through the timing stage's two workers
    (gatekeeper.timing.stage.measure), events and graph mode. Printed: the views of each phase,
    and the views seen only while timed (a tell).
  - sniffer: phase_sniffer_gpu_hacked.py acts on those tells (returns its last output when no
    recorder is on the stack and the call looks like a timing loop). Printed: how many calls it
    cheated on in each phase, and whether the behaviour stage and the timed-output comparison
    (GK703's evidence) caught it.
aa (item 4): the same torch code as reference and as submission (A/A) at three sizes, and a
  role swap (torch vs a Triton kernel, then the Triton kernel as the reference and torch as the
  submission): the product of the two speedups is 1 for a fair method; its distance from 1,
  and each A/A speedup's distance from 1, is the bias.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = Path(os.environ.get("OUT") or ROOT / "gpu-out")
SUBS = ROOT / "fixtures/submissions"
SEED = ROOT / "fixtures/problems/seed_mean.py"

TORCH_MODEL = '''import torch
import torch.nn as nn


class {cls}(nn.Module):
    def forward(self, x):
        return {expr}
'''

TRITON_MODEL = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale_shift(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0 + 1.0, mask=mask)


class {cls}(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        _scale_shift[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096)
        return y
'''

INPUTS = '''

def get_inputs():
    return [torch.randn({shape}, device="cuda", dtype=torch.{dtype})]


def get_init_inputs():
    return []
'''


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def _measure(submission: Path, problem: Path, mode: str, ext: Path, seed: int = 7) -> dict:
    from gatekeeper.config import Config
    from gatekeeper.timing.outputs import compare_checks
    from gatekeeper.timing.stage import measure
    from gatekeeper.timing.stats import median

    config = Config.model_validate({"timing": {"budget_s": 8.0, "mode": mode}})
    began = time.monotonic()
    out = measure(str(submission), problem, config, seed=seed, device="cuda", calibrate=False, ext_dir=ext)
    check = compare_checks(out.checks)
    sub = median(out.paired.submission_us) if out.paired.submission_us else None
    ref = median(out.paired.reference_us) if out.paired.reference_us else None
    return {"failed": out.failed, "wall_s": round(time.monotonic() - began, 1), "pairs": len(out.paired.submission_us),
            "sub_us": sub, "ref_us": ref, "speedup": (ref / sub) if sub and ref else None,
            "outputs_checked": check["checked"], "mismatches": len(check["mismatches"]),
            "mismatch_detail": check["detail"][:300]}


def _views(folder: Path) -> dict:
    """phase-<pid>.json files in `folder`, merged: calls, cheated and the views' counts."""
    calls, cheated, views = 0, 0, Counter()
    for path in folder.glob("phase-*.json"):
        data = json.loads(path.read_text())
        calls += data["calls"]
        cheated += data.get("cheated", 0)
        views.update(data["views"])
        path.unlink()
    return {"calls": calls, "cheated": cheated, "views": dict(views)}


def phase(fixture: str) -> list[dict]:
    import gatekeeper
    from gatekeeper.build.cache import extensions_dir
    from gatekeeper.build.sources import extract_bundle

    path = SUBS / fixture
    ext = extensions_dir(extract_bundle(path.read_bytes(), str(path)).cache_key())
    lines = []
    began = time.monotonic()
    report = gatekeeper.check(path, SEED, stages="behaviour", keep_going=True)
    checked = _views(ext)
    lines.append({"case": f"phase:{fixture}:behaviour", "verdict": report.verdict.value,
                  "wall_s": round(time.monotonic() - began, 1),
                  "runtime_errors": sorted({f.rule for f in report.errors() if f.stage.value in ("build", "behaviour")}),
                  **checked})
    for mode in ("events", "graph"):
        timed = _measure(path, SEED, mode, ext)
        seen = _views(ext)
        tells = sorted(set(seen["views"]) - set(checked["views"]))
        lines.append({"case": f"phase:{fixture}:timing-{mode}", **timed, **seen, "views_only_when_timed": tells})
    return lines


def aa() -> list[dict]:
    folder = Path(tempfile.mkdtemp(prefix="gk-aa-"))
    ext = folder / "ext"
    ext.mkdir()
    lines = []
    sizes = [("launch-bound", "4, 16, 48", "float32", "x.mean(dim=0)"),
             ("memory-bound", "1 << 26", "float32", "x * 2.0 + 1.0"),
             ("matmul", "4096, 4096", "bfloat16", "x @ x")]
    for label, shape, dtype, expr in sizes:
        problem = _write(folder, f"aa_{label}_ref.py".replace("-", "_"),
                         TORCH_MODEL.format(cls="Model", expr=expr) + INPUTS.format(shape=shape, dtype=dtype))
        sub = _write(folder, f"aa_{label}_sub.py".replace("-", "_"), TORCH_MODEL.format(cls="ModelNew", expr=expr))
        for seed in (7, 8):
            lines.append({"case": f"aa:{label}:seed{seed}", **_measure(sub, problem, "events", ext, seed)})
    shape = "1 << 26"
    torch_ref = _write(folder, "swap_torch_ref.py", TORCH_MODEL.format(cls="Model", expr="x * 2.0 + 1.0")
                       + INPUTS.format(shape=shape, dtype="float32"))
    triton_sub = _write(folder, "swap_triton_sub.py", TRITON_MODEL.format(cls="ModelNew"))
    triton_ref = _write(folder, "swap_triton_ref.py", TRITON_MODEL.format(cls="Model") + INPUTS.format(shape=shape, dtype="float32"))
    torch_sub = _write(folder, "swap_torch_sub.py", TORCH_MODEL.format(cls="ModelNew", expr="x * 2.0 + 1.0"))
    first = {"case": "swap:torch-ref/triton-sub", **_measure(triton_sub, torch_ref, "events", ext)}
    second = {"case": "swap:triton-ref/torch-sub", **_measure(torch_sub, triton_ref, "events", ext)}
    lines += [first, second]
    if first["speedup"] and second["speedup"]:
        lines.append({"case": "swap:product", "product": first["speedup"] * second["speedup"],
                      "bias": abs(first["speedup"] * second["speedup"] - 1.0)})
    shutil.rmtree(folder, ignore_errors=True)
    return lines


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    sink = (OUT / "phase_aa.jsonl").open("a")
    wanted = set(sys.argv[1:]) or {"phase", "aa"}
    jobs = []
    if "phase" in wanted:
        jobs += [lambda: phase("phase_probe_gpu_honest.py"), lambda: phase("phase_sniffer_gpu_hacked.py")]
    if "aa" in wanted:
        jobs.append(aa)
    for job in jobs:
        try:
            lines = job()
        except Exception as exc:  # one case's failure must not lose the others' lines
            lines = [{"case": getattr(job, "__name__", "job"), "error": f"{type(exc).__name__}: {exc}"[:800]}]
        for line in lines:
            text = json.dumps(line, default=str)
            print(text, flush=True)
            sink.write(text + "\n")
            sink.flush()


if __name__ == "__main__":
    main()
