"""The labelled fixtures that build GPU code (CUDA through load_inline, or Triton), through the
whole pipeline on a GPU under the isolation GATEKEEPER_ISOLATION names (bwrap for issue 23
item 2), several at a time. The manifest labels are the static stage's; here a hacked fixture
must be rejected by some stage and an honest one must pass every stage that runs. A fixture
whose static verdict is held (`held = true`) is the interesting case: only a run-time check
can reject it under the default profile.

One JSON line per fixture in $OUT/gpu_fixtures.jsonl, flushed as it goes:
    GATEKEEPER_ISOLATION=bwrap python bench/gpu_fixtures.py --jobs 12 --budget 420
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import tomllib
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
GPU_CODE = re.compile(r"__global__|@triton\.jit")


def gpu_cases() -> list[dict]:
    cases, seen = [], set()
    for manifest in sorted((FIXTURES / "manifest").glob("*.toml")):
        for case in tomllib.loads(manifest.read_text("utf-8")).get("case", []):
            path = FIXTURES / case["submission"]
            if not case.get("problem") or not path.is_file() or case.get("profile", "default") != "default":
                continue
            key = (case["submission"], case["problem"])
            if key in seen or not GPU_CODE.search(path.read_text("utf-8", "replace")):
                continue
            seen.add(key)
            cases.append({**case, "manifest": manifest.stem})
    # honest ones and held hacks first: they are the ones that reach the GPU
    cases.sort(key=lambda c: (c["verdict"] == "reject" and not c.get("held"), c["submission"]))
    return cases


def run(case: dict) -> dict:
    import gatekeeper

    began = time.perf_counter()
    try:
        report = gatekeeper.check(FIXTURES / case["submission"], FIXTURES / case["problem"], stages="behaviour")
    except Exception as exc:  # a crash of ours is recorded, not hidden
        return {"case": case["submission"], "crash": f"{type(exc).__name__}: {exc}"[:600]}
    verdict = report.verdict.value
    return {"case": case["submission"], "problem": case["problem"], "label": case["verdict"], "held": bool(case.get("held")),
            "verdict": verdict, "as_labelled": verdict == case["verdict"], "seconds": round(time.perf_counter() - began, 1),
            "isolation": (report.environment.isolation if report.environment else None),
            "stages": {s.name.value: s.status.value for s in report.stages},
            "errors": [f"{f.rule} {f.stage.value} {f.category.value}: {f.message[:200]}" for f in report.errors()],
            "unconfirmed": [f.rule for f in report.unconfirmed()], "error": (report.error or "")[:400]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--jobs", type=int, default=12)
    parser.add_argument("--budget", type=float, default=420.0, help="seconds; no new fixture starts after it")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sink = (out / "gpu_fixtures.jsonl").open("a")
    began = time.perf_counter()
    cases = gpu_cases()
    print(f"{len(cases)} GPU fixtures", flush=True)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        pending = {pool.submit(run, c) for c in cases}
        for fut in as_completed(pending):
            if fut.cancelled():
                continue
            record = fut.result()
            sink.write(json.dumps(record, default=str) + "\n")
            sink.flush()
            print(json.dumps({k: record.get(k) for k in ("case", "label", "held", "verdict", "errors", "crash")},
                             default=str)[:400], flush=True)
            if time.perf_counter() - began > args.budget:
                for other in pending:
                    other.cancel()
    return 0


if __name__ == "__main__":
    sys.exit(main())
