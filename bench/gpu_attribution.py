"""GPU validation of the run-time work attribution (issue 11, item 1) and the error budget (item 3).

Run on the H200 from the repository root, saving as it goes (a run cut off at its limit keeps
what it did):
    python bench/gpu_attribution.py --out "$OUT" 2>&1 | tee "$OUT/gpu_attribution.log"

What it does, one JSON line per case in $OUT/attribution.jsonl (flushed after each case):
  1. overhead: a Recorder around a CUDA matmul + relu versus the bare call, per call (ms);
  2. the torch-fallback fixtures (CUDA ones from fixtures/manifest/torch_fallback.toml) and the
     CPU runtime_* fixtures, through the behaviour stage with --keep-going;
  3. ten corpus submissions (CORPUS below): verdict, GK667/GK668 findings, the `work` section
     (own/torch/vendor shares and top kernels by name), the error ratios.
Not run by the engineer who wrote it (no GPU there); the lead runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import tomllib
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
# GATEKEEPER_CORPUS: where the corpus lies on a machine without ../shared beside the checkout.
CORPUS_ROOT = Path(os.environ.get("GATEKEEPER_CORPUS", ROOT.parent / "shared" / "corpus"))
# (submission, reference) relative to the corpus: 6 judged correct by KernelBench's harness
# (load_inline CUDA), 2 Triton, 2 CUDA-L1 with torch fallbacks.
CORPUS = [
    ("technoabsurdist/opus4_level2_20250903_065424/level2/5_s0.py", "refs/kb_v0.1/level2/5_ConvTranspose2d_Subtract_Tanh.py"),
    ("technoabsurdist/qwencoder_level1_run/level1/88_s0.py", "refs/kb_v0.1/level1/88_MinGPTNewGelu.py"),
    ("technoabsurdist/qwen3_level1_run/level1/52_s0.py", "refs/kb_v0.1/level1/52_Argmin_over_a_dimension.py"),
    ("technoabsurdist/qwencoder_level1_run/level1/1_s0.py", "refs/kb_v0.1/level1/1_Square_matrix_multiplication_.py"),
    ("technoabsurdist/gemini_level2_run/level2/36_s0.py", "refs/kb_v0.1/level2/36_ConvTranspose2d_Min_Sum_GELU_Add.py"),
    ("technoabsurdist/gemini_level2_run/level2/33_s0.py", "refs/kb_v0.1/level2/33_Gemm_Scale_BatchNorm.py"),
    ("hzeng2000/triton_Kimi-K2-0905/level2/100_s0.py", "refs/kb_head/level2/100_ConvTranspose3d_Clamp_Min_Divide.py"),
    ("hzeng2000/triton_Kimi-K2-0905/level2/10_s0.py", "refs/kb_head/level2/10_ConvTranspose2d_MaxPool_Hardtanh_Mean_Tanh.py"),
    ("cuda_l1/final_2025-11/level1/1_Square_matrix_multiplication_.py", "refs/kb_v0/level1/1_Square_matrix_multiplication_.py"),
    ("cuda_l1/final_2025-11/level1/6_Matmul_with_large_K_dimension_.py", "refs/kb_v0/level1/6_Matmul_with_large_K_dimension_.py"),
    # calls cublasSgemm itself (a vendor library reached directly, not through torch)
    ("technoabsurdist/qwen3_level1_run/level1/16_s0.py", "refs/kb_v0.1/level1/16_Matmul_with_transposed_A.py"),
]


def overhead(reps: int = 50) -> dict:
    import torch

    from gatekeeper.behaviour.attribution import Recorder, warm_up

    warm_up("cuda")
    a = torch.randn(2048, 2048, device="cuda")
    torch.set_grad_enabled(False)

    def bare() -> float:
        torch.cuda.synchronize()
        began = time.perf_counter()
        (a @ a).relu()
        torch.cuda.synchronize()
        return time.perf_counter() - began

    def recorded() -> float:
        torch.cuda.synchronize()
        began = time.perf_counter()
        recorder = Recorder("cuda")
        with recorder:
            out = (a @ a).relu()
        recorder.finish_device()
        recorder.summary(out, 0.0)
        return time.perf_counter() - began

    for fn in (bare, recorded):
        fn()
    b = sorted(bare() for _ in range(reps))[reps // 2]
    r = sorted(recorded() for _ in range(reps))[reps // 2]
    recorder = Recorder("cuda")
    with recorder:
        out = (a @ a).relu()
    recorder.finish_device()
    return {"case": "overhead", "bare_ms": b * 1e3, "recorded_ms": r * 1e3, "overhead_ms": (r - b) * 1e3,
            "kernels": recorder.summary(out, 0.0)["kernels"][:5]}


def cases() -> list[tuple[str, Path, Path, str]]:
    out = []
    for manifest in ("torch_fallback.toml", "behaviour.toml"):
        for case in tomllib.loads((FIXTURES / "manifest" / manifest).read_text())["case"]:
            sub = case["submission"]
            if manifest == "behaviour.toml" and "runtime_" not in sub:
                continue
            if case.get("problem"):
                out.append((f"fixture:{sub}:{case.get('profile', 'default')}", FIXTURES / sub, FIXTURES / case["problem"],
                            case.get("profile", "default")))
    for sub, ref in CORPUS:
        out.append((f"corpus:{sub}", CORPUS_ROOT / sub, CORPUS_ROOT / ref, "default"))
    return out


def run_case(name: str, sub: Path, problem: Path, profile: str) -> dict:
    import gatekeeper

    began = time.perf_counter()
    report = gatekeeper.check(sub, problem, stages="behaviour", keep_going=True, profile=profile)
    work = report.work or {}
    return {
        "case": name, "profile": profile, "verdict": report.verdict.value, "seconds": round(time.perf_counter() - began, 1),
        "stages": {s.name.value: [s.status.value, s.reason] for s in report.stages},
        "device": report.environment.device, "gpu": report.environment.gpu, "error": report.error,
        "findings": [{"rule": f.rule, "severity": f.severity.value, "stage": f.stage.value, "message": f.message[:400],
                      "runtime": f.evidence.get("runtime")} for f in report.findings],
        "shares": {c: v.get("share") for c, v in work.get("classes", {}).items()},
        "own_share_of_compute": work.get("own_share_of_compute"),
        "top": work.get("top"), "error_ratio": work.get("error_ratio"),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--only", default="", help="substring of the case names to run")
    parser.add_argument("--jobs", type=int, default=1, help="cases at a time (their builds dominate)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sink = (out / "attribution.jsonl").open("a")

    def save(record: dict) -> None:
        sink.write(json.dumps(record, default=str) + "\n")
        sink.flush()
        print(json.dumps({k: record.get(k) for k in ("case", "verdict", "shares", "error_ratio", "overhead_ms")}),
              flush=True)

    try:
        save(overhead())
    except Exception as exc:  # keep going: the cases matter more
        save({"case": "overhead", "error": f"{type(exc).__name__}: {exc}"})
    chosen = [c for c in cases() if not args.only or args.only in c[0]]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_case, *c): c[0] for c in chosen}
        for fut in as_completed(futures):
            try:
                save(fut.result())
            except Exception as exc:
                save({"case": futures[fut], "error": f"{type(exc).__name__}: {exc}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
