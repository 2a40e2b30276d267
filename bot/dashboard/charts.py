"""Charts drawn on the server as SVG: no script, no inline style (the CSP allows neither).

Each chart is shown beside a table of the same figures (the table is what a screen reader and
a copy-paste read); the SVG carries a ``<title>`` per bar. Geometry only: presentation comes
from ``static/dashboard.css`` classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar: its label (under it, and in its title) and its value (any unit)."""

    label: str
    value: int
    title: str


def bar_chart(bars: Sequence[Bar], *, width: int = 720, height: int = 180, label: str) -> str:
    """Return an SVG bar chart that scales to its box (``viewBox``; CSS gives the width).

    Args:
        bars: the bars, left to right.
        width: the drawing's width in its own units.
        height: the drawing's height in its own units.
        label: what the chart shows, for assistive technology (``aria-label``).
    """
    top = max((b.value for b in bars), default=0) or 1
    gap = 2
    slot = width / max(len(bars), 1)
    plot = height - 20
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">'
    ]
    parts.append(f'<line class="axis" x1="0" y1="{plot}" x2="{width}" y2="{plot}"/>')
    step = max(1, len(bars) // 8)
    for i, bar in enumerate(bars):
        h = 0 if bar.value <= 0 else max(1.0, plot * bar.value / top)
        x = i * slot + gap / 2
        parts.append(
            f'<rect class="bar" x="{x:.1f}" y="{plot - h:.1f}" width="{max(slot - gap, 1):.1f}" '
            f'height="{h:.1f}"><title>{escape(bar.title)}</title></rect>'
        )
        if i % step == 0:
            parts.append(
                f'<text class="tick" x="{x + slot / 2:.1f}" y="{height - 4}" '
                f'text-anchor="middle">{escape(bar.label)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def meter(value: int, limit: int | None, *, label: str) -> str:
    """Return an SVG meter of ``value`` against ``limit`` (a full bar past it; none without)."""
    width, height = 400, 18
    share = 0.0 if not limit else min(value / limit, 1.0)
    over = " over" if limit and value >= limit else ""
    return (
        f'<svg class="meter" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">'
        f'<rect class="meter-track" x="0" y="0" width="{width}" height="{height}" rx="4"/>'
        f'<rect class="meter-fill{over}" x="0" y="0" width="{width * share:.1f}" '
        f'height="{height}" rx="4"/></svg>'
    )
