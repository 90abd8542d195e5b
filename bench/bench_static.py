"""Static-stage throughput against bare libcst parsing, side by side, on one core.

    python bench/bench_static.py [--files 1000] [--jobs 2] [--real ../shared/corpus]

For each file of a generated corpus (bench/corpus.py), in one process pinned to one core,
it times `libcst.parse_module` alone and the whole static stage (parse, every rule, C++
extraction, positions for findings), alternating file by file so both see the same
machine state. Then it times `check_many` at --jobs 1 and N over the same folder.

`--real CORPUS` measures on the real submissions of ../shared/corpus instead (the first
--files of them, each checked against its own reference, whose facts are loaded before
the clock starts), and skips the check_many part.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import libcst

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import write_corpus  # noqa: E402

from gatekeeper.api import check_many  # noqa: E402
from gatekeeper.config import Config  # noqa: E402
from gatekeeper.static.problem_facts import load_problem_facts  # noqa: E402
from gatekeeper.static.stage import run_static  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def real_corpus(corpus: Path, limit: int) -> tuple[list[tuple[str, bytes]], dict]:
    """The first `limit` non-empty corpus submissions, with the facts of their references."""
    import csv

    data: list[tuple[str, bytes]] = []
    problems: dict = {}
    facts: dict[str, object] = {}
    for source in ("technoabsurdist", "hzeng2000", "cuda_l1"):
        with (corpus / source / "labels.csv").open() as fh:
            for rec in csv.DictReader(fh):
                path = corpus / rec["path"]
                raw = path.read_bytes() if path.is_file() else b""
                if len(raw.strip()) < 64 or len(data) >= limit:
                    continue
                ref = str(corpus / rec["ref"])
                if ref not in facts:
                    facts[ref] = load_problem_facts(Path(ref))
                data.append((str(path), raw))
                problems[str(path)] = facts[ref]
    return data, problems


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--rounds", type=int, default=2, help="passes over the corpus; the best is kept")
    parser.add_argument("--wall", action="store_true", help="wall-clock time instead of this process's CPU time")
    parser.add_argument("--real", type=Path, help="the real corpus folder (../shared/corpus) instead of generated files")
    args = parser.parse_args()
    # CPU time of this one process by default: on a shared machine, wall time also counts
    # the time other processes held the core.
    clock = time.perf_counter if args.wall else time.process_time
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    with tempfile.TemporaryDirectory() as tmp:
        config = Config()
        if args.real:
            data, problems = real_corpus(args.real, args.files)
        else:
            files = write_corpus(Path(tmp) / "corpus", args.files)
            data = [(str(p), p.read_bytes()) for p in files]
            seed = load_problem_facts(ROOT / "fixtures" / "problems" / "seed_mean.py")
            problems = {path: seed for path, _ in data}
        lines = statistics.mean(len(d.splitlines()) for _, d in data)
        run_static(data[0][1], data[0][0], config, problems[data[0][0]])  # warm: rule discovery, imports
        best_parse, best_static, per_file = float("inf"), float("inf"), []
        findings = 0
        for _ in range(args.rounds):
            parse_total = static_total = 0.0
            samples = []
            findings = 0
            for path, raw in data:
                text = raw.decode()
                t0 = clock()
                libcst.parse_module(text)
                t1 = clock()
                found = run_static(raw, path, config, problems[path])
                t2 = clock()
                findings += len(found)
                parse_total += t1 - t0
                static_total += t2 - t1
                samples.append(t2 - t1)
            if static_total < best_static:
                best_parse, best_static, per_file = parse_total, static_total, samples
        n = len(data)
        parse_rate, static_rate = n / best_parse, n / best_static
        what = "wall time" if args.wall else "CPU time"
        print(f"corpus: {n} files, mean {lines:.0f} lines; {findings} findings; one core; {what}; "
              f"load average {os.getloadavg()[0]:.2f}")
        print(f"libcst.parse_module alone : {parse_rate:7.1f} files/s")
        print(f"gatekeeper static stage   : {static_rate:7.1f} files/s "
              f"({static_rate / parse_rate:.2f} of bare parse); p50 {statistics.median(per_file) * 1e3:.1f} ms, "
              f"p90 {statistics.quantiles(per_file, n=10)[-1] * 1e3:.1f} ms")
    if args.real:
        return
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
    with tempfile.TemporaryDirectory() as tmp:
        files = write_corpus(Path(tmp) / "corpus", args.files)
        for jobs in sorted({1, args.jobs}):
            t0 = time.perf_counter()
            count = sum(1 for _ in check_many(files, None, jobs=jobs, stages="static", config=Config()))
            wall = time.perf_counter() - t0
            print(f"check_many --jobs {jobs}: {count / wall:7.1f} files/s wall ({count} files, process start included)")


if __name__ == "__main__":
    main()
