"""CPU cost of the timing stage's statistics, which run inside the timed loop's stopping rule
(every `batch` pairs). Prints microseconds per summary and the total for a full adaptive run.

    python bench/bench_timing_stats.py
"""

from __future__ import annotations

import random
import time

from gatekeeper.timing.adaptive import StopRule, sample_until_stable
from gatekeeper.timing.stats import speedup, summarize


def per_call(fn, reps: int) -> float:
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - start) / reps * 1e6


def main() -> None:
    rng = random.Random(0)
    print(f"{'samples':>8} {'summarize':>14} {'speedup':>14}")
    for n in (50, 500, 5000, 50000):
        xs = [rng.lognormvariate(0, 0.3) for _ in range(n)]
        ys = [rng.lognormvariate(0, 0.3) for _ in range(n)]
        reps = max(3, 20000 // n)
        print(f"{n:>8} {per_call(lambda: summarize(xs), reps):>11.0f} µs {per_call(lambda: speedup(xs, ys), reps):>11.0f} µs")

    def sample(k: int):
        return [rng.lognormvariate(0, 0.5) for _ in range(k)], [rng.lognormvariate(0, 0.5) for _ in range(k)]

    rule = StopRule(min_reps=50, max_reps=5000, batch=25, ci_rel_halfwidth=1e-6, budget_s=1e9)
    start = time.perf_counter()
    out = sample_until_stable(sample, rule, time.monotonic)
    print(f"adaptive run to max_reps={len(out.submission_us)} ({out.stopped_by}): "
          f"{(time.perf_counter() - start) * 1e3:.0f} ms of CPU for the stopping rule and sampling")


if __name__ == "__main__":
    main()
