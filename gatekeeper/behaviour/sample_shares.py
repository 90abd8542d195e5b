"""The test the sampled attribution applies to a share of compute samples (behaviour.executing
for the whole run, behaviour.executing_groups for groups of calls)."""

from __future__ import annotations

MIN_SAMPLES = 12  # fewer: the forward calls were too short to judge from samples (said, not judged)
# `anonymous`: code no file holds (a JIT's, pc_sampler): compute, never own. Last, so the
# per-call rows of earlier classes keep their places.
COMPUTE = ("own", "torch", "vendor", "numpy", "anonymous")
DEFAULT_MIN_OWN_SHARE = 0.05
# The kernel checks CPU timers at its tick (1-10 ms), so a short run gives few samples. A
# finding needs both: the sampled own share under the minimum, and a 99% upper confidence
# bound under MEANINGFUL_SHARE, so that an honest submission whose own code does a real
# part of the work is not rejected for the luck of a few samples.
MEANINGFUL_SHARE = 0.5
ALPHA = 0.01


def upper_bound(k: int, n: int, alpha: float = ALPHA) -> float:
    """One-sided Clopper-Pearson upper bound on a share seen k times in n samples."""
    from math import comb

    if n <= 0:
        return 1.0
    if k >= n:
        return 1.0
    n_eff = min(n, 1000)
    k_eff = round(k * n_eff / n)

    def cdf(p: float) -> float:
        return sum(comb(n_eff, i) * p ** i * (1 - p) ** (n_eff - i) for i in range(k_eff + 1))

    low, high = k_eff / n_eff, 1.0
    for _ in range(60):  # P(X <= k; p) falls as p rises: bisect for alpha
        mid = (low + high) / 2
        if cdf(mid) > alpha:
            low = mid
        else:
            high = mid
    return high
