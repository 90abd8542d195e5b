"""Order statistics: median, IQR, and a distribution-free confidence interval of the median.

The interval comes from the binomial distribution of how many samples fall below the true
median (Binomial(n, 1/2)), so it assumes nothing about the shape of the timing distribution,
which is skewed and often multi-modal on a GPU. No scipy: the binomial tail is summed in log
space, exactly, for the sample counts the timer produces.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of already sorted values (numpy's default method)."""
    if not sorted_values:
        raise ValueError("quantile of no values")
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] * (1 - frac) + sorted_values[hi] * frac


def median(values: Sequence[float]) -> float:
    return quantile(sorted(values), 0.5)


def median_ci_ranks(n: int, confidence: float) -> Optional[tuple[int, int]]:
    """1-based ranks (l, u) with P(x_(l) <= true median <= x_(u)) >= confidence, or None
    when n is too small for any such pair (n = 5 cannot give 95%).

    l is the largest rank with P(B <= l - 1) <= (1 - confidence) / 2, B ~ Binomial(n, 1/2);
    the interval is symmetric, u = n - l + 1. One pass over the lower tail, each term from
    the last (pmf(i + 1) = pmf(i) (n - i) / (i + 1)), in log space so large n cannot underflow.
    """
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    if n < 1:
        return None
    alpha_half = (1 - confidence) / 2
    log_pmf = -n * math.log(2.0)
    cdf = 0.0
    best = 0
    for i in range((n + 1) // 2):  # ranks beyond the middle never qualify
        cdf += math.exp(log_pmf)  # now P(B <= i)
        if cdf > alpha_half:
            break
        best = i + 1  # P(B <= best - 1) <= alpha/2
        log_pmf += math.log(n - i) - math.log(i + 1)
    if best == 0:
        return None
    return best, n - best + 1


@dataclass(frozen=True)
class Summary:
    """One series of times, in microseconds."""

    count: int
    median_us: float
    q1_us: float
    q3_us: float
    min_us: float
    max_us: float
    ci_low_us: Optional[float]
    ci_high_us: Optional[float]
    confidence: float

    @property
    def iqr_us(self) -> float:
        return self.q3_us - self.q1_us

    @property
    def ci_rel_halfwidth(self) -> Optional[float]:
        """Half the interval's width over the median; None while the interval is unbounded."""
        if self.ci_low_us is None or self.ci_high_us is None or self.median_us <= 0:
            return None
        return (self.ci_high_us - self.ci_low_us) / 2 / self.median_us

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "count": self.count, "median_us": self.median_us, "iqr_us": self.iqr_us,
            "q1_us": self.q1_us, "q3_us": self.q3_us, "min_us": self.min_us, "max_us": self.max_us,
            "ci_low_us": self.ci_low_us, "ci_high_us": self.ci_high_us, "ci_confidence": self.confidence,
        }


def summarize(values_us: Sequence[float], confidence: float = 0.95) -> Summary:
    if not values_us:
        raise ValueError("no samples to summarise")
    xs = sorted(values_us)
    ranks = median_ci_ranks(len(xs), confidence)
    low = high = None
    if ranks is not None:
        low, high = xs[ranks[0] - 1], xs[ranks[1] - 1]
    return Summary(
        count=len(xs), median_us=quantile(xs, 0.5), q1_us=quantile(xs, 0.25), q3_us=quantile(xs, 0.75),
        min_us=xs[0], max_us=xs[-1], ci_low_us=low, ci_high_us=high, confidence=confidence,
    )


@dataclass(frozen=True)
class Speedup:
    """Reference time over submission time, from interleaved pairs."""

    value: float  # median of the per-pair ratios
    ci_low: Optional[float]
    ci_high: Optional[float]
    of_medians: float  # median(reference) / median(submission), for comparison
    pairs: int

    def as_dict(self) -> dict[str, float | int | None]:
        return {"speedup": self.value, "speedup_ci_low": self.ci_low, "speedup_ci_high": self.ci_high,
                "speedup_of_medians": self.of_medians, "pairs": self.pairs}


def speedup(reference_us: Sequence[float], submission_us: Sequence[float], confidence: float = 0.95) -> Speedup:
    """Per-pair ratios cancel drift (clocks, thermals) common to a pair timed back to back;
    their median gets the same order-statistics interval as a time does."""
    if len(reference_us) != len(submission_us) or not reference_us:
        raise ValueError("speedup needs the same non-zero number of reference and submission samples")
    if min(submission_us) <= 0:
        raise ValueError("a submission time of zero or less cannot give a speedup")
    ratios = sorted(r / s for r, s in zip(reference_us, submission_us))
    ranks = median_ci_ranks(len(ratios), confidence)
    low = high = None
    if ranks is not None:
        low, high = ratios[ranks[0] - 1], ratios[ranks[1] - 1]
    return Speedup(value=quantile(ratios, 0.5), ci_low=low, ci_high=high,
                   of_medians=median(reference_us) / median(submission_us), pairs=len(ratios))
