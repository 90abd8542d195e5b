"""Judge the measurements: the report's `timing` and `score` dicts and the findings.

Runs in the trusted parent on what the workers reported. Every time field names its unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from gatekeeper.report import Finding
from gatekeeper.timing import findings as rules
from gatekeeper.timing.floors import Counts, Floors, measured_matmul_rate, measured_roofline_us
from gatekeeper.timing.stats import Speedup, Summary, median, speedup, summarize


@dataclass
class Measured:
    """What the submission's worker reported (times in µs, one per timed call)."""

    reference_event_us: list[float]
    submission_event_us: list[float]
    reference_synced_us: list[float]
    submission_synced_us: list[float]
    mode: str = "events"
    stopped_by: str = ""
    elapsed_s: float = 0.0
    method: dict[str, Any] = field(default_factory=dict)


def _fmt(us: float) -> str:
    from gatekeeper.timing.render import format_us

    return format_us(us)


def explain_bound(floors: Floors, median_us: Optional[float] = None) -> str:
    if floors.bound == "launch":
        times = f"; the measured time is {median_us / floors.floor_us:.2f}x that launch floor" if median_us else ""
        return (f"launch-bound: the floor is one kernel launch ({_fmt(floors.floor_us)}); moving the "
                f"problem's bytes at peak bandwidth would take {_fmt(floors.memory_floor_us)} and its "
                f"counted operations {_fmt(floors.compute_floor_us)}, so the speed-of-light fraction "
                f"(roofline over measured time) is small by construction and launch latency sets the pace{times}")
    if floors.bound == "memory":
        return (f"memory-bound: the floor is the bytes it must move at {floors.bandwidth_gbps:.0f} GB/s "
                f"({_fmt(floors.memory_floor_us)})")
    return (f"compute-bound: the floor is its counted operations at {floors.peak_tflops:.0f} TFLOP/s "
            f"({_fmt(floors.compute_floor_us)})")


def clean_reference_speedup(alone: Summary, sub: Summary, pairs: int) -> Speedup:
    """Speedup of medians against the reference timed alone; the interval pairs the ends of
    the two medians' intervals, so it is conservative."""
    low = alone.ci_low_us / sub.ci_high_us if alone.ci_low_us and sub.ci_high_us else None
    high = alone.ci_high_us / sub.ci_low_us if alone.ci_high_us and sub.ci_low_us else None
    value = alone.median_us / sub.median_us
    return Speedup(value=value, ci_low=low, ci_high=high, of_medians=value, pairs=pairs)


def stream_escape_excess_us(m: Measured) -> float:
    """How much longer the submission's calls run to the device-wide sync than the
    reference's do, beyond their own event time: work left on other streams."""
    sub = median([s - e for s, e in zip(m.submission_synced_us, m.submission_event_us)])
    ref = median([s - e for s, e in zip(m.reference_synced_us, m.reference_event_us)])
    return sub - ref


def judge(m: Measured, counts: Counts, floors: Floors, settings: Any, config: Any = None, *,
          ceilings: Optional[dict[str, Any]] = None, spec: Optional[dict[str, Any]] = None,
          reference_alone_us: Optional[list[float]] = None, output_check: Optional[dict[str, Any]] = None,
          ) -> tuple[dict[str, Any], dict[str, Any], list[Finding]]:
    conf = settings.confidence
    found: list[Finding] = []

    def add(rule: rules.TimingRule, detail: str, evidence: dict[str, Any]) -> None:
        f = rule.finding(detail, evidence, config)
        if f is not None:
            found.append(f)

    sub = summarize(m.submission_event_us, conf)
    ref = summarize(m.reference_event_us, conf)
    excess = stream_escape_excess_us(m)
    escaped = excess > max(settings.stream_escape_min_us, 0.25 * sub.median_us)
    sub_for_score = m.submission_event_us
    basis = "events"
    if escaped:
        # Charge the submission up to the device-wide sync, less what that costs the reference.
        base = median([s - e for s, e in zip(m.reference_synced_us, m.reference_event_us)])
        sub_for_score = [max(s - base, e) for s, e in zip(m.submission_synced_us, m.submission_event_us)]
        basis = "device-synchronised (work escaped the current stream)"
        add(rules.STREAM_ESCAPE, f"About {_fmt(excess)} of work per call ran after the end event.",
            {"escaped_us": excess, "event_median_us": sub.median_us})
    scored = summarize(sub_for_score, conf)
    up = speedup(m.reference_event_us, sub_for_score, conf)

    alone = summarize(reference_alone_us, conf) if reference_alone_us else None
    threshold = floors.floor_us * (1 - settings.floor_tolerance)
    # The launch floor assumes the problem needs a kernel; a reference that launches none
    # (a view, a reshape) shows that it does not. The clean worker's reference decides, since
    # the submission's worker could have patched its reference into doing nothing.
    launch_free_problem = floors.bound == "launch" and (alone or ref).median_us < threshold
    if scored.median_us < threshold and not launch_free_problem:
        add(rules.BELOW_FLOOR,
            f"Median {_fmt(scored.median_us)} against a floor of {_fmt(floors.floor_us)} ({floors.bound}).",
            {"median_us": scored.median_us, "floor_us": floors.floor_us, "bound": floors.bound})
    speedup_basis = "paired: reference and submission each in its own worker, timed in alternating blocks"
    if alone is not None and ref.median_us > alone.median_us * (1 + settings.reference_drift):
        add(rules.REFERENCE_SLOWED,
            f"Reference median {_fmt(ref.median_us)} beside the submission against {_fmt(alone.median_us)} alone; "
            f"the speedup is taken against the clean worker's reference.",
            {"reference_median_us": ref.median_us, "reference_alone_median_us": alone.median_us})
        # The submission slowed its own reference: score it against the one it could not touch.
        up = clean_reference_speedup(alone, scored, up.pairs)
        speedup_basis = "clean reference: the reference timed alone, before the submission's worker started"
    if up.value > settings.speedup_review:
        add(rules.EXTREME_SPEEDUP,
            f"Speedup {up.value:.2f}x (interval {_ratio(up.ci_low)} to {_ratio(up.ci_high)}) is above "
            f"the review threshold of {settings.speedup_review:g}x.",
            {"speedup": up.value, "threshold": settings.speedup_review})
    if output_check and output_check.get("mismatches"):
        add(rules.TIMED_OUTPUT_WRONG, output_check.get("detail", ""), output_check)

    med = scored.median_us
    sol = floors.roofline_floor_us / med if med > 0 else None
    measured_roofline = None
    if ceilings:
        rates = ceilings.get("matmul_tflops") or {}
        measured_roofline = measured_roofline_us(counts, ceilings.get("copy_gbps"),
                                                 measured_matmul_rate(counts.dtype, rates))
    timing = {
        "mode": m.mode,
        "mode_label": "CUDA-graph replay per call" if m.mode == "graph" else "one launch per call, CUDA events",
        "submission": _series(sub),
        "reference": _series(ref),
        "reference_alone": _series(alone) if alone else None,
        "scored_basis": basis,
        "stream_escape_excess_us": excess,
        "stopped_by": m.stopped_by,
        "elapsed_s": m.elapsed_s,
        **m.method,
        "floors": {**floors.as_dict(), **counts.as_dict(), "measured_roofline_us": measured_roofline},
        "ceilings": ceilings,
        "gpu_spec": spec,
        "outputs_checked": (output_check or {}).get("checked", 0),
    }
    if escaped:
        timing["submission_scored"] = _series(scored)
    score = {
        **up.as_dict(),
        "speedup_basis": speedup_basis,
        # Speed of light: the roofline (bytes at peak bandwidth, operations at peak rate) over
        # the measured time. floor_fraction adds the launch floor; the *_measured_ceilings
        # variant uses the copy bandwidth and matrix rate measured on this device.
        "sol_fraction": sol,
        "sol_fraction_measured_ceilings": (measured_roofline / med) if measured_roofline and med > 0 else None,
        "floor_fraction": floors.floor_us / med if med > 0 else None,
        "floor_us": floors.floor_us,
        "roofline_floor_us": floors.roofline_floor_us,
        "median_us": med,
        "bound": floors.bound,
        "explanation": explain_bound(floors, med),
    }
    return timing, score, found


def _series(s: Summary) -> dict[str, Any]:
    return s.as_dict()


def _ratio(x: Optional[float]) -> str:
    return "unbounded" if x is None else f"{x:.2f}x"
