"""GPU validation of the timing stage, issue 5 items 1..5 (item 6, ncu, is gpu_ncu.py).

Runs the real timing stage (gatekeeper.timing.stage.run_timing: sandboxed reference and
pair workers, the parent's judgement) on each case and prints one line per figure; writes
everything to $OUT/validate.json (or ./gpu-validate.json). Usage, on a GPU machine:

    python bench/gpu_validate.py [item ...]      # items: seed memory matmul escape repeat
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import gpu_cases as cases  # noqa: E402
import torch  # noqa: E402

import gatekeeper  # noqa: E402
from gatekeeper.problem.loaded import load_problem  # noqa: E402
from gatekeeper.config import Config  # noqa: E402
from gatekeeper.pipeline import RunOptions, Submission  # noqa: E402
from gatekeeper.timing.render import timing_lines  # noqa: E402
from gatekeeper.timing.stage import run_timing  # noqa: E402

SCRATCH = Path(tempfile.mkdtemp(prefix="gk-gpu-validate-"))
CACHE = SCRATCH / "cache"
RESULTS: dict = {"date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                 "torch": torch.__version__, "device": torch.cuda.get_device_name(0), "items": {}}


def write(name: str, text: str) -> Path:
    path = SCRATCH / name
    path.write_text(text, "utf-8")
    return path


def config(**timing) -> Config:
    base = {"cache_dir": str(CACHE), "budget_s": 6.0}
    base.update(timing)
    return Config.model_validate({"timing": base})


def time_case(label: str, submission: Path, problem: Path, cfg: Config) -> dict:
    started = time.monotonic()
    sub = Submission(path=str(submission), data=submission.read_bytes())
    out = run_timing(sub, load_problem(problem), cfg, RunOptions(time=True, seed=1234), [])
    result = {"status": out.status.value, "reason": out.reason, "wall_s": round(time.monotonic() - started, 1),
              "findings": [{"rule": f.rule, "name": f.name, "severity": f.severity.value, "message": f.message}
                           for f in out.findings], **out.report}
    print(f"--- {label}: {out.status.value} in {result['wall_s']} s {out.reason or ''}")
    for line in timing_lines(out.report.get("timing"), out.report.get("score")):
        print("   ", line)
    for f in result["findings"]:
        print(f"    finding {f['rule']} {f['name']} ({f['severity']}): {f['message'][:300]}")
    return result


def item_seed() -> dict:
    problem = ROOT / "fixtures/problems/seed_mean.py"
    hacked = gatekeeper.check_static(ROOT / "fixtures/submissions/seed_cached_hardcoded.py", problem)
    print(f"--- seed submission, static: {hacked.verdict.value}: "
          f"{sorted({f.category.value for f in hacked.errors()})}")
    honest = time_case("seed honest kernel vs reference", ROOT / "fixtures/submissions/seed_honest_generic.py",
                       problem, config())
    return {"seed_static_verdict": hacked.verdict.value,
            "seed_static_categories": sorted({f.category.value for f in hacked.errors()}), "honest": honest}


def item_memory() -> dict:
    problem = write("elementwise_1g.py", cases.ELEMENTWISE_PROBLEM.format(n=1 << 28))  # 1 GiB of float32
    sub = write("elementwise_triton.py", cases.ELEMENTWISE_TRITON)
    return time_case("elementwise 1 GiB, Triton vs torch", sub, problem, config())


def item_matmul() -> dict:
    problem = write("matmul_4096.py", cases.MATMUL_PROBLEM.format(n=4096))
    sub = write("matmul_triton.py", cases.MATMUL_TRITON)
    return time_case("matmul 4096^3 bf16, Triton vs cuBLAS", sub, problem, config())


def item_escape() -> dict:
    problem = write("elementwise_256m.py", cases.ELEMENTWISE_PROBLEM.format(n=1 << 26))
    sub = write("elementwise_side_stream.py", cases.ELEMENTWISE_SIDE_STREAM)
    return time_case("side-stream escape vs torch", sub, problem, config())


def item_repeat() -> dict:
    out = {}
    for name, make in (("memory", item_memory), ("matmul", item_matmul)):
        runs = [make(), make()]
        ups = [r["score"]["speedup"] for r in runs if r.get("score")]
        meds = [r["timing"]["submission"]["median_us"] for r in runs if r.get("timing")]
        diff = abs(ups[0] - ups[1]) / max(ups) if len(ups) == 2 else None
        print(f"--- repeat {name}: speedups {ups}, submission medians {meds} µs, relative difference {diff}")
        out[name] = {"speedups": ups, "submission_median_us": meds, "relative_difference": diff}
    return out


ITEMS = {"seed": item_seed, "memory": item_memory, "matmul": item_matmul, "escape": item_escape,
         "repeat": item_repeat}


def main() -> None:
    wanted = [w for w in sys.argv[1:] if w in ITEMS] if sys.argv[1:] else list(ITEMS)
    for name in wanted:
        try:
            RESULTS["items"][name] = ITEMS[name]()
        except Exception:
            RESULTS["items"][name] = {"crashed": traceback.format_exc()}
            print(f"--- {name} crashed:\n{traceback.format_exc()}")
    cal = sorted(CACHE.glob("*.json"))
    if cal:
        RESULTS["calibration"] = json.loads(cal[0].read_text())
        print("--- calibration:", json.dumps(RESULTS["calibration"]))
    target = Path(os.environ.get("OUT", ".")) / ("validate.json" if os.environ.get("OUT") else "gpu-validate.json")
    target.write_text(json.dumps(RESULTS, indent=1, default=str))
    print(f"written {target}")


if __name__ == "__main__":
    main()
