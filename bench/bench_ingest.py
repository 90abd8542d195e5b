"""Throughput of static-only ingestion: N distinct generated submissions into a fresh
SQLite store, at --jobs 1 and 2, through the real `gatekeeper ingest` command.

Prints, per job count, submissions per second two ways: over the whole command (process
start-up, worker start-up, planning, checks, store writes) and as the command reports it
(from reading the source to the last commit). Usage:

    python bench/bench_ingest.py [--count 1000] [--jobs 1 2] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "fixtures" / "ingest"))
from make_batch import write_jsonl  # noqa: E402


def one_run(source: Path, jobs: int, folder: Path) -> tuple[float, float, int]:
    store = folder / f"bench-{jobs}-{time.monotonic_ns()}.db"
    command = [sys.executable, "-m", "gatekeeper", "ingest", str(source), "--problems",
               str(ROOT / "fixtures" / "problems"), "--store", str(store), "--stages", "static", "--jobs", str(jobs)]
    started = time.perf_counter()
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if run.returncode not in (0, 3):
        raise SystemExit(f"ingest failed ({run.returncode}): {run.stderr[-2000:]}")
    reported = float(re.search(r"checked on .* in ([\d.]+) s", run.stdout).group(1))
    rows = sqlite3.connect(store).execute("SELECT count(*) FROM results").fetchone()[0]
    return wall, reported, rows


def in_process_rate(count: int) -> float:
    """The ceiling for one process: api.check in a loop, no ingest around it."""
    from make_batch import submission

    from gatekeeper.api import check
    from gatekeeper.config import Config

    config, problem = Config(), ROOT / "fixtures" / "problems" / "seed_mean.py"
    codes = [submission(i) for i in range(count)]
    check(codes[0], problem=problem, stages="static", config=config)
    started = time.perf_counter()
    for code in codes:
        check(code, problem=problem, stages="static", config=config)
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gk-bench-ingest-") as tmp:
        folder = Path(tmp)
        source = write_jsonl(folder / "batch.jsonl", args.count)
        print(f"static-only ingest of {args.count} distinct submissions (seed problem, 1 in 4 hacked); "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
        ceiling = in_process_rate(min(args.count, 300))
        print(f"ceiling, api.check in one process with no ingest around it: {ceiling:7.1f} submissions/s")
        for jobs in args.jobs:
            best = None
            for _ in range(args.repeat):
                wall, reported, rows = one_run(source, jobs, folder)
                if rows != args.count:
                    raise SystemExit(f"expected {args.count} rows, the store has {rows}")
                if best is None or wall < best[0]:
                    best = (wall, reported)
            wall, reported = best
            print(f"--jobs {jobs}: {args.count / wall:7.1f} submissions/s whole command ({wall:.2f} s), "
                  f"{args.count / reported:7.1f} submissions/s as reported by ingest ({reported:.2f} s)")


if __name__ == "__main__":
    main()
