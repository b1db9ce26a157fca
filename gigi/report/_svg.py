"""One plot as inline SVG: a resource's series over time in panels that share the time axis,
with the culprits' holds marked across them. Pure Python, so the same data gives the same bytes.

>>> svg = plot(
...     "a.pool",
...     [0, 500, 1000],
...     [Series("outstanding", "outstanding", [1.0, 3.0])],
...     [Mark(7, "job <7>", 250, 750, 0)],
... )
>>> svg.count('class="series"'), 'job &lt;7&gt;' in svg, '<7>' in svg
(1, True, False)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

WIDTH = 960
LEFT = 104  # room for a panel's name and its top value
RIGHT = 16
TOP = 8
PANEL_HEIGHT = 76
PANEL_GAP = 14
AXIS_HEIGHT = 26
SERIES_COLORS = ("#1f6fb4", "#e0701b", "#2a9d3a")
MARK_COLORS = ("#d62728", "#8e44ad", "#8c564b")


@dataclass(frozen=True)
class Series:
    name: str  # key, as the timeline's column (data-series in the page)
    label: str  # what the panel is called in the page
    values: list[float]  # one per window


@dataclass(frozen=True)
class Mark:
    task: int
    label: str  # tooltip text: the culprit's name and the interval
    start_ns: int
    end_ns: int
    color: int  # index into MARK_COLORS: one colour per culprit


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 5 x 10^k at or above ``value``.

    >>> nice_ceiling(0.0), nice_ceiling(3.2), nice_ceiling(41), nice_ceiling(0.07)
    (1.0, 5.0, 50.0, 0.1)
    """
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value * (1 - 1e-12):
            return float(f"{step * power:.12g}")
    return 10 * power


def number(value: float) -> str:
    """A short label for an axis value.

    >>> number(0), number(2.5), number(12000), number(3_400_000), number(0.004)
    ('0', '2.5', '12k', '3.4M', '0.004')
    """
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def _f(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def plot(
    resource: str,
    edges: list[int],
    series: list[Series],
    marks: list[Mark],
    *,
    capacity: float | None = None,
) -> str:
    """``edges`` are the windows' bounds in ns (one more than the values of each series);
    ``capacity``, when known, is drawn as a dashed line on the first panel."""
    start, end = edges[0], edges[-1]
    span = max(end - start, 1)
    x_left, x_right = LEFT, WIDTH - RIGHT

    def x(t: float) -> float:
        return x_left + (min(max(t, start), end) - start) / span * (x_right - x_left)

    plots_bottom = TOP + len(series) * (PANEL_HEIGHT + PANEL_GAP) - PANEL_GAP
    height = plots_bottom + AXIS_HEIGHT
    out = [
        f'<svg class="plot" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'data-resource="{escape(resource)}" data-start-ns="{start}" data-end-ns="{end}" '
        f'data-x-left="{x_left}" data-x-right="{x_right}">',
        f"<title>{escape(resource)}: {', '.join(escape(s.label) for s in series)}</title>",
    ]
    for m in marks:  # behind the series, across every panel
        x0, x1 = x(m.start_ns), x(m.end_ns)
        out.append(
            f'<rect class="culprit-mark" data-task="{m.task}" data-start-ns="{m.start_ns}" '
            f'data-end-ns="{m.end_ns}" x="{_f(x0)}" y="{TOP}" width="{_f(max(x1 - x0, 1.5))}" '
            f'height="{plots_bottom - TOP}" fill="{MARK_COLORS[m.color % len(MARK_COLORS)]}" '
            f'fill-opacity="0.18"><title>{escape(m.label)}</title></rect>'
        )
    for i, s in enumerate(series):
        top = TOP + i * (PANEL_HEIGHT + PANEL_GAP)
        base = top + PANEL_HEIGHT
        peak = max(s.values, default=0.0)
        limit = peak
        if i == 0 and capacity and 0 < capacity <= 2 * max(peak, 1e-9):
            limit = max(peak, capacity)
        y_max = nice_ceiling(limit)

        def y(v: float, base=base, y_max=y_max) -> float:
            return base - max(v, 0.0) / y_max * PANEL_HEIGHT

        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        path = [f"M{_f(x_left)} {_f(base)}"]
        for k, v in enumerate(s.values):
            path.append(f"V{_f(y(v))}H{_f(x(edges[k + 1]))}")
        path.append(f"V{_f(base)}Z")
        out += [
            f'<g class="series" data-series="{escape(s.name)}" data-peak="{peak:.6g}">',
            f'<rect x="{x_left}" y="{top}" width="{x_right - x_left}" height="{PANEL_HEIGHT}" '
            'fill="none" stroke="#ddd"/>',
            f'<text x="{x_left - 8}" y="{top + 12}" text-anchor="end" class="panel-name">'
            f"{escape(s.label)}</text>",
            f'<text x="{x_left - 8}" y="{top + 27}" text-anchor="end" class="tick">'
            f"{number(y_max)}</text>",
            f'<text x="{x_left - 8}" y="{base}" text-anchor="end" class="tick">0</text>',
            f'<path d="{"".join(path)}" fill="{color}" fill-opacity="0.15" stroke="{color}" '
            'stroke-width="1.2"/>',
        ]
        if i == 0 and capacity and capacity <= y_max:
            out.append(
                f'<line class="capacity" x1="{x_left}" x2="{x_right}" y1="{_f(y(capacity))}" '
                f'y2="{_f(y(capacity))}" stroke="#555" stroke-dasharray="4 3">'
                f"<title>capacity {number(capacity)}</title></line>"
            )
        out.append("</g>")
    out.append(_time_axis(x, start, span, plots_bottom))
    out.append("</svg>")
    return "\n".join(out)


def _time_axis(x, start: int, span: int, y: float) -> str:
    step = nice_ceiling(span / 1e9 / 8)  # at most about eight labelled ticks
    parts = [
        f'<g class="axis"><line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y}" y2="{y}" stroke="#999"/>'
    ]
    k = 0
    while (t := k * step) <= span / 1e9 + 1e-12:
        px = x(start + t * 1e9)
        parts.append(
            f'<line x1="{_f(px)}" x2="{_f(px)}" y1="{y}" y2="{y + 4}" stroke="#999"/>'
            f'<text x="{_f(px)}" y="{y + 16}" text-anchor="middle" class="tick">'
            f"{t:.4g} s</text>"
        )
        k += 1
    parts.append("</g>")
    return "".join(parts)
