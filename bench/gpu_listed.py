"""Whole-pipeline checks of listed submissions on a GPU, several at a time: the red team's and
the honest-code helpers' files of a round, before they become fixtures.

    GATEKEEPER_ISOLATION=bwrap python bench/gpu_listed.py CASES --out DIR [--jobs 8] [--time] [--budget 420]

CASES has one case per line, `SUBMISSION PROBLEM LABEL` (paths relative to the file's folder or
to fixtures/problems/ for the problem; LABEL is `hack` or `honest`). One JSON line per case in
DIR/listed.jsonl, flushed as it goes (verdict, exit code, error and warning rules, the run-time
findings' first lines, the timing's speedup when timed), and each case's whole report in
DIR/reports/. A case not finished within the budget is written as `not run`, never as a verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _problem(name: str, base: Path) -> Path:
    for candidate in (base / name, ROOT / "fixtures" / "problems" / name):
        if candidate.exists():
            return candidate
    return ROOT / "fixtures" / "problems" / name


def _run(sub: Path, prob: Path, label: str, out: Path, timed: bool, limit: float) -> dict:
    cmd = [sys.executable, "-m", "gatekeeper", "check", str(sub), "--problem", str(prob), "-f", "json", "--keep-going"]
    if timed:
        cmd.append("--time")
    began = time.time()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=max(limit, 1), cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"case": sub.name, "label": label, "verdict": "not run", "why": f"over {limit:.0f} s"}
    row: dict = {"case": sub.name, "label": label, "rc": done.returncode, "wall_s": round(time.time() - began, 1)}
    try:
        report = json.loads(done.stdout)
    except ValueError:
        row.update(verdict="no report", stderr=done.stderr[-800:])
        return row
    (out / "reports" / f"{sub.stem}.json").write_text(json.dumps(report, indent=1))
    findings = report.get("findings", [])
    row["verdict"] = report.get("verdict")
    row["errors"] = sorted({f["rule"] for f in findings if f["severity"] == "error"})
    row["warnings"] = sorted({f["rule"] for f in findings if f["severity"] == "warning"})
    row["runtime"] = [f"{f['rule']}: {f['message'][:160]}" for f in findings
                      if f.get("stage") in ("behaviour", "timing") and f["severity"] in ("error", "warning")][:4]
    row["stages"] = {s.get("name"): s.get("status") for s in report.get("stages", [])}
    score = report.get("score") or {}
    if score:
        row["speedup"] = score.get("speedup", score.get("speedup_x"))
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", type=Path)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-out")))
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--time", action="store_true")
    parser.add_argument("--budget", type=float, default=420.0)
    args = parser.parse_args()
    (args.out / "reports").mkdir(parents=True, exist_ok=True)
    base = args.cases.resolve().parent
    cases = []
    for line in args.cases.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2 and not line.startswith("#"):
            cases.append((base / parts[0], _problem(parts[1], base), parts[2] if len(parts) > 2 else "?"))
    deadline = time.time() + args.budget
    with (args.out / "listed.jsonl").open("a") as sink, ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(lambda c=c: _run(*c, args.out, args.time, deadline - time.time())) for c in cases]
        for future in as_completed(futures):
            row = future.result()
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            print(json.dumps(row)[:400], flush=True)


if __name__ == "__main__":
    main()
