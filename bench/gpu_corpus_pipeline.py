"""GPU validation on real submissions (issue 11): technoabsurdist submissions that the
KernelBench harness judged correct and that build their own kernel, through the whole pipeline.

Phase 1 runs static, build and behaviour for every submission, several at a time (the builds
dominate); phase 2 times, one at a time, those that passed, while the time limit allows. One JSON
line per submission and phase in $OUT/corpus_pipeline.jsonl, flushed as it goes, so a run cut
off at its limit keeps what it did; each timed run's whole report goes to $OUT/timing_reports/.
Run on the GPU machine from the repository root:
    python bench/gpu_corpus_pipeline.py --corpus <corpus dir> --out "$OUT" --count 20
    python bench/gpu_corpus_pipeline.py --corpus <dir> --only level2/36_s0,level2/67_s0 --first-stage build
(`--first-stage build` only compiles in phase 1, several at a time, so that phase 2, one at a
time, runs static, build from the cache, behaviour and timing once per file.)
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

OWN_KERNEL = re.compile(r"load_inline|cpp_extension|@triton\.jit|__global__")


def pick(corpus: Path, count: int, only: list[str] | None = None) -> list[tuple[str, str]]:
    """`count` submissions spread evenly over the sorted list of eligible ones; with `only`,
    the eligible ones whose path contains one of those substrings."""
    eligible = []
    with (corpus / "technoabsurdist" / "labels.csv").open() as fh:
        for rec in csv.DictReader(fh):
            path = corpus / rec["path"]
            if rec.get("correct") == "True" and path.is_file() and OWN_KERNEL.search(path.read_text("utf-8", "replace")):
                eligible.append((rec["path"], rec["ref"]))
    eligible.sort()
    if only:
        return [e for e in eligible if any(o in e[0] for o in only)][:count]
    step = max(1, len(eligible) // count)
    return eligible[::step][:count]


def summary(name: str, phase: str, report, began: float) -> dict:
    return {
        "case": name, "phase": phase, "verdict": report.verdict.value, "seconds": round(time.perf_counter() - began, 1),
        "stages": {s.name.value: [s.status.value, (s.reason or "")[:200]] for s in report.stages},
        "errors": [{"rule": f.rule, "stage": f.stage.value, "line": f.location.line if f.location else None,
                    "message": f.message[:300]} for f in report.findings if f.severity.value == "error"],
        "warnings": sorted({f.rule for f in report.findings if f.severity.value == "warning"}),
        "work": {c: v.get("share") for c, v in ((report.work or {}).get("classes") or {}).items()},
        "top": {c: names[:2] for c, names in ((report.work or {}).get("top") or {}).items()},  # per class, a dict
        "speedup": report.score,
        "timing": {k: v for k, v in (report.timing or {}).items() if not isinstance(v, (list, dict))} or None,
        "error": report.error,
    }


def run(args: tuple[str, str, str, str], reports: str = "") -> dict:
    name, sub, ref, stages = args
    import gatekeeper

    began = time.perf_counter()
    try:
        report = gatekeeper.check(Path(sub), Path(ref), stages=stages, keep_going=True)
        if reports:
            (Path(reports) / (name.replace("/", "_") + f".{stages}.json")).write_text(report.model_dump_json(indent=1))
        return summary(name, stages, report, began)
    except Exception as exc:  # a crash of ours is recorded, not hidden
        return {"case": name, "phase": stages, "crash": f"{type(exc).__name__}: {exc}"}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--budget", type=float, default=500.0, help="seconds; phase 2 stops starting new timings after it")
    parser.add_argument("--only", default="", help="comma-separated substrings of submission paths")
    parser.add_argument("--first-stage", default="behaviour", choices=("build", "behaviour"),
                        help="phase 1's last stage (build: compile only, so phase 2 runs behaviour once)")
    args = parser.parse_args()
    corpus, out = Path(args.corpus), Path(args.out)
    (out / "timing_reports").mkdir(parents=True, exist_ok=True)
    sink = (out / "corpus_pipeline.jsonl").open("a")
    began = time.perf_counter()

    def save(record: dict) -> None:
        sink.write(json.dumps(record, default=str) + "\n")
        sink.flush()
        print(json.dumps({k: record.get(k) for k in ("case", "phase", "verdict", "errors", "speedup", "crash")},
                         default=str)[:600], flush=True)

    chosen = pick(corpus, args.count, [o for o in args.only.split(",") if o])
    work = [(sub, str(corpus / sub), str(corpus / ref), args.first_stage) for sub, ref in chosen]
    passed = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for fut in as_completed([pool.submit(run, w) for w in work]):
            record = fut.result()
            save(record)
            if record.get("verdict") == "pass":
                passed.append(record["case"])
    for sub, ref in chosen:
        if sub not in passed:
            continue
        if time.perf_counter() - began > args.budget:
            save({"case": sub, "phase": "timing", "skipped": "time budget spent"})
            continue
        save(run((sub, str(corpus / sub), str(corpus / ref), "timing"), str(out / "timing_reports")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
