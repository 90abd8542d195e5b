"""Text rendering of timing: every time printed with its unit, never a bare number."""

from __future__ import annotations

from typing import Any, Optional


def format_us(us: Optional[float]) -> str:
    """A time given in microseconds, in the unit that reads best, with the unit."""
    if us is None:
        return "n/a"
    a = abs(us)
    if a >= 1e6:
        return f"{us / 1e6:.3g} s"
    if a >= 1e3:
        return f"{us / 1e3:.3g} ms"
    if a >= 1:
        return f"{us:.3g} µs"
    return f"{us * 1e3:.3g} ns"


def _series(label: str, s: Optional[dict[str, Any]]) -> Optional[str]:
    if not s:
        return None
    ci = (f"[{format_us(s['ci_low_us'])}, {format_us(s['ci_high_us'])}]"
          if s.get("ci_low_us") is not None else "[interval unbounded: too few samples]")
    return (f"{label}: median {format_us(s['median_us'])}, IQR {format_us(s['iqr_us'])}, "
            f"{s['count']} calls, {int(round(s.get('ci_confidence', 0.95) * 100))}% CI {ci}")


def timing_lines(timing: Optional[dict[str, Any]], score: Optional[dict[str, Any]]) -> list[str]:
    if not timing:
        return []
    lines = [f"timing ({timing.get('mode_label', timing.get('mode'))}, on {timing.get('device', 'GPU')})"]
    for label, key in (("submission", "submission"), ("reference, own worker, alternating blocks", "reference"),
                       ("reference, alone before the submission started", "reference_alone")):
        text = _series(label, timing.get(key))
        if text:
            lines.append("  " + text)
    if timing.get("distinct_calls"):
        lines.append(f"  inputs: {timing['distinct_calls']} calls, each on inputs new to its process "
                     f"({timing.get('input_sets')} generated sets, rolled beyond them); "
                     f"{timing.get('outputs_checked', 0)} timed outputs compared")
    if timing.get("persisting_l2_limit_bytes"):
        lines.append(f"  the submission set a persisting-L2 limit of {timing['persisting_l2_limit_bytes']} bytes; "
                     "persisting lines were reset before every timed call")
    floors = timing.get("floors") or {}
    if floors:
        lines.append(f"  floor {format_us(floors.get('floor_us'))} ({floors.get('bound')}): memory "
                     f"{format_us(floors.get('memory_floor_us'))}, compute {format_us(floors.get('compute_floor_us'))}, "
                     f"launch {format_us(floors.get('launch_floor_us'))}")
    if score:
        lo, hi = score.get("speedup_ci_low"), score.get("speedup_ci_high")
        interval = f"[{lo:.2f}x, {hi:.2f}x]" if lo is not None and hi is not None else "[interval unbounded]"
        lines.append(f"  speedup {score['speedup']:.2f}x {interval} over the reference, same run")
        parts = []
        if score.get("sol_fraction") is not None:
            parts.append(f"speed of light {score['sol_fraction']:.1%} of peak (roofline)")
        if score.get("sol_fraction_measured_ceilings") is not None:
            parts.append(f"{score['sol_fraction_measured_ceilings']:.1%} of the measured ceilings")
        if score.get("floor_fraction") is not None:
            parts.append(f"{score['floor_fraction']:.1%} of the floor")
        if parts:
            lines.append("  " + "; ".join(parts))
        if score.get("explanation"):
            lines.append(f"  {score['explanation']}")
    return lines
