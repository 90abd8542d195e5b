"""Inline SVG charts drawn here, so the page needs no library and no network.

Every piece of text that reaches the SVG goes through `esc`: submission ids are hostile."""

from __future__ import annotations

import math
from html import escape
from typing import Optional, Sequence

WIDTH, HEIGHT = 640, 360
PAD_L, PAD_R, PAD_T, PAD_B = 64, 20, 20, 48


def esc(value: object) -> str:
    return escape(str(value), quote=True)


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * power:
            return step * power
    return 10 * power


def _ticks(top: float, count: int = 5) -> list[float]:
    return [top * k / count for k in range(count + 1)]


def scatter(points: Sequence[tuple[float, float, str]], *, empty_note: str) -> str:
    """Speedup (y) against SOL fraction (x); each point is (sol_fraction, speedup, label)."""
    plot_w, plot_h = WIDTH - PAD_L - PAD_R, HEIGHT - PAD_T - PAD_B
    x_top = max(1.0, _nice_max(max((p[0] for p in points), default=1.0)))
    y_top = _nice_max(max((p[1] for p in points), default=1.0) * 1.05)
    parts = [f'<svg class="chart" id="scatter" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" '
             f'xmlns="http://www.w3.org/2000/svg" aria-label="speedup against SOL fraction">']
    for value in _ticks(x_top):
        x = PAD_L + plot_w * value / x_top
        parts.append(f'<line class="grid" x1="{x:.1f}" y1="{PAD_T}" x2="{x:.1f}" y2="{PAD_T + plot_h}"/>')
        parts.append(f'<text class="tick" x="{x:.1f}" y="{PAD_T + plot_h + 16}" text-anchor="middle">'
                     f'{value * 100:.0f}%</text>')
    for value in _ticks(y_top):
        y = PAD_T + plot_h - plot_h * value / y_top
        parts.append(f'<line class="grid" x1="{PAD_L}" y1="{y:.1f}" x2="{PAD_L + plot_w}" y2="{y:.1f}"/>')
        parts.append(f'<text class="tick" x="{PAD_L - 6}" y="{y + 4:.1f}" text-anchor="end">{value:g}x</text>')
    if y_top >= 1 and points:  # with no points, the 1x line would strike through the note
        y_one = PAD_T + plot_h - plot_h / y_top
        parts.append(f'<line class="parity" x1="{PAD_L}" y1="{y_one:.1f}" x2="{PAD_L + plot_w}" y2="{y_one:.1f}"/>')
    parts.append(f'<text class="axis" x="{PAD_L + plot_w / 2}" y="{HEIGHT - 8}" text-anchor="middle">'
                 'fraction of speed of light</text>')
    parts.append(f'<text class="axis" transform="translate(16 {PAD_T + plot_h / 2}) rotate(-90)" '
                 'text-anchor="middle">speedup over reference</text>')
    for sol, speedup, label in points:
        x = PAD_L + plot_w * min(sol, x_top) / x_top
        y = PAD_T + plot_h - plot_h * min(speedup, y_top) / y_top
        parts.append(f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="5"><title>{esc(label)}: '
                     f'{speedup:.2f}x, {sol * 100:.1f}% of SOL</title></circle>')
    if not points:
        parts.append(f'<text class="note" x="{PAD_L + plot_w / 2}" y="{PAD_T + plot_h / 2}" '
                     f'text-anchor="middle">{esc(empty_note)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def bars(counts: Sequence[tuple[str, int]], *, empty_note: str, chart_id: str = "rejects") -> str:
    """Horizontal bars, one per category, longest first."""
    row_h, label_w = 24, 190
    height = max(60, PAD_T + row_h * len(counts) + 30)
    plot_w = WIDTH - label_w - PAD_R - 40
    top: Optional[int] = max((c for _, c in counts), default=0)
    parts = [f'<svg class="chart" id="{esc(chart_id)}" role="img" viewBox="0 0 {WIDTH} {height}" '
             f'xmlns="http://www.w3.org/2000/svg" aria-label="rejects by category">']
    for index, (label, count) in enumerate(counts):
        y = PAD_T + index * row_h
        width = plot_w * count / top if top else 0
        parts.append(f'<text class="label" x="{label_w - 8}" y="{y + 16}" text-anchor="end">{esc(label)}</text>')
        parts.append(f'<rect class="bar" x="{label_w}" y="{y + 3}" width="{width:.1f}" height="{row_h - 6}">'
                     f'<title>{esc(label)}: {count}</title></rect>')
        parts.append(f'<text class="value" x="{label_w + width + 6:.1f}" y="{y + 16}">{count}</text>')
    if not counts:
        parts.append(f'<text class="note" x="{WIDTH / 2}" y="{height / 2}" text-anchor="middle">'
                     f'{esc(empty_note)}</text>')
    parts.append("</svg>")
    return "".join(parts)
