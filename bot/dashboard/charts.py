"""Charts drawn on the server as SVG: no script, no inline style (the CSP allows neither).

Each chart is shown beside a table of the same figures (the table is what a screen reader and
a copy-paste read); the SVG carries a ``<title>`` per bar. Geometry only: presentation comes
from ``static/dashboard.css`` classes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Final


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


@dataclass(frozen=True, slots=True)
class Stack:
    """One stacked bar: its label (under it), its value per kind, and its title's lead."""

    label: str
    values: Mapping[str, int]
    title: str


PATTERNS: Final = {
    "video": '<rect class="fill" width="6" height="6"/>',
    "image": (
        '<rect class="ground" width="6" height="6"/>'
        '<path class="stroke" d="M-1,1 l2,-2 M0,6 l6,-6 M5,7 l2,-2" stroke-width="1.5"/>'
    ),
    "text": (
        '<rect class="ground" width="6" height="6"/><circle class="fill" cx="3" cy="3" r="1.4"/>'
    ),
}
"""Each kind's fill: solid, hatched, dotted (a 6-unit tile), so that the kinds differ in
shape as well as colour (WCAG 1.4.1, "Use of Color"); colours come from the CSS."""

LEGEND_HEIGHT: Final = 22
"""The legend's row above the bars, in the drawing's units."""


def _pattern(kind: str) -> str:
    tile = PATTERNS.get(kind, PATTERNS["video"])
    return (
        f'<pattern id="kind-{escape(kind)}" class="kind-{escape(kind)}" width="6" height="6" '
        f'patternUnits="userSpaceOnUse">{tile}</pattern>'
    )


def stacked_chart(
    stacks: Sequence[Stack],
    *,
    kinds: Sequence[str],
    label: str,
    value_text: Callable[[int], str],
    names: Mapping[str, str] | None = None,
    width: int = 720,
    height: int = 200,
) -> str:
    """Return an SVG bar chart of stacks, one segment per kind, with a legend.

    Each kind has its own pattern (:data:`PATTERNS`) and the legend names it beside a swatch
    of that pattern, so kinds are told apart without colour; each segment's ``<title>`` says
    the stack, the kind and its value (``value_text``). The figures are in the table beside.

    Args:
        stacks: the bars, left to right.
        kinds: the kinds in stacking order (the first at the bottom) and legend order.
        label: what the chart shows, for assistive technology (``aria-label``).
        value_text: a value as the titles show it (``$0.35``).
        names: each kind as the legend and the titles name it (the kind itself without one).
        width: the drawing's width in its own units.
        height: the drawing's height in its own units (the legend included).
    """
    top = max((sum(s.values.values()) for s in stacks), default=0) or 1
    gap = 2
    slot = width / max(len(stacks), 1)
    plot = height - 20
    usable = plot - LEGEND_HEIGHT
    parts = [
        f'<svg class="chart stacked" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">',
        "<defs>",
        *(_pattern(kind) for kind in kinds),
        "</defs>",
    ]
    named = {kind: (names or {}).get(kind, kind) for kind in kinds}
    x = 0
    for kind in kinds:
        k = escape(kind)
        parts.append(
            f'<rect class="legend-swatch kind-{k}" x="{x}" y="2" width="14" height="14" '
            f'fill="url(#kind-{k})"/>'
            f'<text class="legend" x="{x + 18}" y="14">{escape(named[kind])}</text>'
        )
        x += 30 + 8 * len(named[kind])
    parts.append(f'<line class="axis" x1="0" y1="{plot}" x2="{width}" y2="{plot}"/>')
    step = max(1, len(stacks) // 8)
    for i, stack in enumerate(stacks):
        left = i * slot + gap / 2
        base = float(plot)
        for kind in kinds:
            value = stack.values.get(kind, 0)
            if value <= 0:
                continue
            h = max(1.0, usable * value / top)
            base -= h
            k = escape(kind)
            parts.append(
                f'<rect class="segment kind-{k}" fill="url(#kind-{k})" x="{left:.1f}" '
                f'y="{base:.1f}" width="{max(slot - gap, 1):.1f}" height="{h:.1f}">'
                f"<title>{escape(stack.title)} · {escape(named[kind])}: "
                f"{escape(value_text(value))}</title></rect>"
            )
        if i % step == 0:
            parts.append(
                f'<text class="tick" x="{left + slot / 2:.1f}" y="{height - 4}" '
                f'text-anchor="middle">{escape(stack.label)}</text>'
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
