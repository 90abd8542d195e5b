"""Static-only latency through the Python API, warm, in process: the pre-submission hook's
fast path. Bar: p50 under 15 ms per typical submission.

Each labelled fixture (fixtures/manifest/*.toml), then a sample of generated ~170-line
submissions (bench/corpus.py) against the seed problem, is checked with its code and
problem passed as source strings, as an agent's hook passes them, after a warm-up.
The figure is the median over submissions of each submission's p50.

    python bench/bench_api_latency.py [--repeat 100] [--corpus 20]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import make_submission  # noqa: E402

import gatekeeper  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BAR_MS = 15.0


def cases(corpus: int) -> list[tuple[str, str, str]]:
    out = []
    for manifest in sorted((ROOT / "fixtures/manifest").glob("*.toml")):
        for case in tomllib.loads(manifest.read_text("utf-8")).get("case", []):
            if case.get("mode", "static") != "static":
                continue  # the behaviour fixtures are probes (hangs, forks), not typical code
            sub = ROOT / "fixtures" / case["submission"]
            prob = ROOT / "fixtures" / case["problem"] if case.get("problem") else None
            out.append((sub.name, sub.read_text("utf-8"), prob.read_text("utf-8") if prob else None))
    problem = (ROOT / "fixtures/problems/seed_mean.py").read_text("utf-8")
    for seed in range(corpus):
        out.append((f"corpus/{seed:04d}.py", make_submission(seed), problem))
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=100)
    parser.add_argument("--corpus", type=int, default=20, help="generated submissions to add")
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    print(f"gatekeeper {gatekeeper.__version__}, Python {platform.python_version()}, "
          f"{platform.machine()}, {os.cpu_count()} CPUs visible")
    medians = []
    for name, code, problem in cases(args.corpus):
        for _ in range(args.warmup):
            gatekeeper.check_static(code, problem)
        samples = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            report = gatekeeper.check_static(code, problem)
            samples.append((time.perf_counter() - started) * 1000)
        p50 = statistics.median(samples)
        medians.append(p50)
        print(f"{name:40s} {report.verdict.value:7s} {len(code.splitlines()):4d} lines  "
              f"p50 {p50:6.2f} ms  p90 {percentile(samples, 0.9):6.2f} ms  min {min(samples):6.2f} ms")
    overall = statistics.median(medians)
    print(f"{len(medians)} submissions; p50 of the per-submission p50s; worst p50 {max(medians):.2f} ms")
    ok = overall < BAR_MS
    print(f"static-only over the API, warm: p50 {overall:.2f} ms per submission "
          f"(bar < {BAR_MS:.0f} ms): {'MET' if ok else 'NOT MET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
