"""Static-only latency through the Python API, warm, in process: the pre-submission hook's
fast path. Bar: p50 under 15 ms per typical submission.

The seed pair (fixtures/manifest/seed.toml; --all-fixtures for every static fixture, most
of which are small targeted probes), then generated ~120-170-line submissions
(bench/corpus.py) against the seed problem, each checked with its code and problem passed
as source strings, as an agent's hook passes them, after a warm-up. The figure is the
median over submissions of each submission's p50. Wall time and the process's CPU time are
both shown: on a shared machine the CPU time is what an idle core would see.

    python bench/bench_api_latency.py [--repeat 100] [--corpus 20] [--all-fixtures]
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


def cases(corpus: int, all_fixtures: bool = False) -> list[tuple[str, str, str]]:
    """The seed pair (or every static fixture), then `corpus` generated submissions."""
    out = []
    manifests = sorted((ROOT / "fixtures/manifest").glob("*.toml")) if all_fixtures else [
        ROOT / "fixtures/manifest/seed.toml"]
    for manifest in manifests:
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
    parser.add_argument("--all-fixtures", action="store_true", help="every static fixture, not just the seed pair")
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    print(f"gatekeeper {gatekeeper.__version__}, Python {platform.python_version()}, "
          f"{platform.machine()}, {os.cpu_count()} CPUs visible")
    medians, cpu_medians = [], []
    for name, code, problem in cases(args.corpus, args.all_fixtures):
        for _ in range(args.warmup):
            gatekeeper.check_static(code, problem)
        samples, cpu = [], []
        for _ in range(args.repeat):
            started, cpu_started = time.perf_counter(), time.process_time()
            report = gatekeeper.check_static(code, problem)
            samples.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - cpu_started) * 1000)
        p50 = statistics.median(samples)
        medians.append(p50)
        cpu_medians.append(statistics.median(cpu))
        print(f"{name:40s} {report.verdict.value:7s} {len(code.splitlines()):4d} lines  "
              f"p50 {p50:6.2f} ms  p90 {percentile(samples, 0.9):6.2f} ms  min {min(samples):6.2f} ms  "
              f"cpu p50 {cpu_medians[-1]:6.2f} ms")
    overall = statistics.median(medians)
    print(f"{len(medians)} submissions; p50 of the per-submission p50s; worst p50 {max(medians):.2f} ms")
    ok = overall < BAR_MS
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average during the run: {load:.1f} on {os.cpu_count()} CPUs; "
          f"CPU-time p50 {statistics.median(cpu_medians):.2f} ms per submission")
    print(f"static-only over the API, warm: p50 {overall:.2f} ms per submission "
          f"(bar < {BAR_MS:.0f} ms): {'MET' if ok else 'NOT MET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
