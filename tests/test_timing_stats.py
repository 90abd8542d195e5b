"""Order statistics, the median's interval, speedup, and the adaptive stopping rule."""

import math
import random

import pytest

from gatekeeper.timing.adaptive import StopRule, sample_until_stable
from gatekeeper.timing.stats import median, median_ci_ranks, quantile, speedup, summarize


def test_quantiles_match_linear_interpolation():
    xs = [1.0, 2.0, 3.0, 4.0]
    assert median(xs) == 2.5
    assert quantile(xs, 0.25) == pytest.approx(1.75)
    assert quantile(xs, 0.75) == pytest.approx(3.25)
    assert median([5.0, 1.0, 3.0]) == 3.0


def test_median_interval_ranks_follow_the_binomial_table():
    assert median_ci_ranks(5, 0.95) is None  # 2 * (1/32) > 5%: no interval exists
    assert median_ci_ranks(6, 0.95) == (1, 6)
    assert median_ci_ranks(100, 0.95) == (40, 61)  # the textbook ranks for n = 100
    low, high = median_ci_ranks(1000, 0.99)
    assert low + high == 1001 and 450 < low < 470


def test_median_interval_covers_the_true_median_of_a_skewed_distribution():
    rng = random.Random(7)
    true_median = math.log(2)  # exponential(1)
    hits = 0
    trials = 400
    for _ in range(trials):
        s = summarize([rng.expovariate(1.0) for _ in range(60)], 0.95)
        hits += s.ci_low_us <= true_median <= s.ci_high_us
    assert hits / trials >= 0.93


def test_summary_reports_iqr_count_and_bounds():
    s = summarize([float(i) for i in range(1, 101)])
    assert s.count == 100 and s.median_us == 50.5
    assert s.iqr_us == pytest.approx(49.5)
    assert (s.ci_low_us, s.ci_high_us) == (40.0, 61.0)
    d = s.as_dict()
    assert d["median_us"] == 50.5 and d["iqr_us"] == pytest.approx(49.5) and d["count"] == 100


def test_speedup_is_the_median_of_paired_ratios_with_its_interval():
    rng = random.Random(3)
    sub = [10.0 + rng.random() for _ in range(200)]
    ref = [2.0 * s * (1 + rng.uniform(-0.01, 0.01)) for s in sub]
    up = speedup(ref, sub)
    assert up.value == pytest.approx(2.0, rel=0.01)
    assert up.ci_low <= up.value <= up.ci_high
    assert up.ci_high - up.ci_low < 0.02
    with pytest.raises(ValueError):
        speedup([1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        speedup([1.0], [0.0])


class FakeGpu:
    """A sampler whose 'device time' advances a controllable clock."""

    def __init__(self, ref_us, sub_us, spread, seed=0, overhead_s=0.0):
        self.rng = random.Random(seed)
        self.ref_us, self.sub_us, self.spread, self.overhead_s = ref_us, sub_us, spread, overhead_s
        self.clock = 0.0

    def now(self):
        return self.clock

    def sample(self, n):
        ref = [self.ref_us * (1 + self.rng.gauss(0, self.spread)) for _ in range(n)]
        sub = [self.sub_us * (1 + self.rng.gauss(0, self.spread)) for _ in range(n)]
        self.clock += (sum(ref) + sum(sub)) * 1e-6 + n * self.overhead_s
        return ref, sub


def test_stops_on_precision_when_times_are_steady():
    gpu = FakeGpu(100.0, 50.0, spread=0.01)
    out = sample_until_stable(gpu.sample, StopRule(min_reps=50, batch=25, ci_rel_halfwidth=0.01, budget_s=60), gpu.now)
    assert out.stopped_by == "ci"
    assert len(out.submission_us) == 50  # steady: the first check already passes
    s = summarize(out.submission_us)
    assert s.ci_rel_halfwidth <= 0.01


def test_noisy_times_need_more_samples_then_stop_on_precision():
    gpu = FakeGpu(100.0, 50.0, spread=0.2)
    out = sample_until_stable(gpu.sample, StopRule(min_reps=50, batch=25, ci_rel_halfwidth=0.02, budget_s=60), gpu.now)
    assert out.stopped_by == "ci"
    assert len(out.submission_us) > 100


def test_budget_stops_a_run_that_cannot_reach_the_precision():
    gpu = FakeGpu(100.0, 50.0, spread=0.5, overhead_s=0.01)
    rule = StopRule(min_reps=50, max_reps=100000, batch=25, ci_rel_halfwidth=0.001, budget_s=2.0)
    out = sample_until_stable(gpu.sample, rule, gpu.now)
    assert out.stopped_by == "budget"
    assert 2.0 <= out.elapsed_s < 2.0 + 25 * 0.0102  # at most one batch past the budget
    assert len(out.reference_us) == len(out.submission_us)


def test_max_reps_caps_the_run():
    gpu = FakeGpu(100.0, 50.0, spread=0.5)
    out = sample_until_stable(gpu.sample, StopRule(min_reps=10, max_reps=60, batch=25, ci_rel_halfwidth=1e-4,
                                                   budget_s=1e9), gpu.now)
    assert out.stopped_by == "max-reps" and len(out.submission_us) == 60


def test_reference_only_run_checks_only_the_reference():
    gpu = FakeGpu(100.0, 50.0, spread=0.01)
    calls = []

    def sample(n):
        ref, _ = gpu.sample(n)
        calls.append(n)
        return ref, [1e9 * (i % 2 + 1) for i in range(n)]  # wildly noisy, ignored

    out = sample_until_stable(sample, StopRule(min_reps=50, batch=25), gpu.now, sides=(True, False))
    assert out.stopped_by == "ci" and sum(calls) == 50


def test_a_sampler_that_returns_short_batches_is_an_error():
    with pytest.raises(ValueError):
        sample_until_stable(lambda n: ([1.0], [1.0]), StopRule(batch=5), lambda: 0.0)
