"""The adaptive stopping rule: time interleaved pairs in batches until both medians are
known to a set precision, or the budget runs out.

Pure: the sampler and the clock are passed in, so CPU tests drive it with a controllable
clock and known distributions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from gatekeeper.timing.stats import Summary, summarize

# One batch: (reference times, submission times), in µs, same length, interleaved pairs.
PairSampler = Callable[[int], tuple[list[float], list[float]]]


@dataclass
class StopRule:
    min_reps: int = 50
    max_reps: int = 5000
    batch: int = 25
    ci_rel_halfwidth: float = 0.01
    confidence: float = 0.95
    budget_s: float = 20.0


@dataclass
class Sampled:
    reference_us: list[float] = field(default_factory=list)
    submission_us: list[float] = field(default_factory=list)
    stopped_by: str = ""  # "ci" | "budget" | "max-reps"
    elapsed_s: float = 0.0


def precise_enough(summary: Summary, rule: StopRule) -> bool:
    width = summary.ci_rel_halfwidth
    return width is not None and width <= rule.ci_rel_halfwidth


def sample_until_stable(sample: PairSampler, rule: StopRule, now: Callable[[], float],
                        sides: tuple[bool, bool] = (True, True)) -> Sampled:
    """`sides` says which series must reach the precision (reference, submission): a
    reference-only calibration run checks only the first."""
    out = Sampled()
    start = now()
    while True:
        n = len(out.submission_us)
        take = min(rule.batch, rule.max_reps - n)
        ref, sub = sample(take)
        if len(ref) != take or len(sub) != take:
            raise ValueError(f"sampler returned {len(ref)}/{len(sub)} samples for a batch of {take}")
        out.reference_us.extend(ref)
        out.submission_us.extend(sub)
        n = len(out.submission_us)
        out.elapsed_s = now() - start
        if n >= rule.min_reps:
            series = [s for s, want in zip((out.reference_us, out.submission_us), sides) if want]
            if all(precise_enough(summarize(s, rule.confidence), rule) for s in series):
                out.stopped_by = "ci"
                return out
        if n >= rule.max_reps:
            out.stopped_by = "max-reps"
            return out
        if out.elapsed_s >= rule.budget_s:
            out.stopped_by = "budget"
            return out


def rule_from_settings(settings: Optional[object]) -> StopRule:
    if settings is None:
        return StopRule()
    return StopRule(
        min_reps=settings.min_reps, max_reps=settings.max_reps, batch=settings.batch,
        ci_rel_halfwidth=settings.ci_rel_halfwidth, confidence=settings.confidence, budget_s=settings.budget_s,
    )
