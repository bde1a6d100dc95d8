"""Server-rendered SVG charts: pure functions from series to an SVG string. No JavaScript, no
chart library, no Django: the dashboard page and the evolution dashboard in admin both inline
what these return.

Every label and title that reaches the SVG is escaped here (task goals are user text), every bar
and point carries a <title> (a tooltip, and what a screen reader announces), and a chart without
data says so instead of drawing empty axes. Colours are attributes, so a chart looks the same on
any page, whatever stylesheet that page loads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

WIDTH = 720
HEIGHT = 260
# Room for the y tick labels (left), the x labels (bottom) and the legend (top).
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 34, 46
MAX_X_LABELS = 12
EMPTY = "No tasks yet."

Format = Callable[[float], str]


@dataclass(frozen=True)
class Series:
    """One named row of values, one value per category (None: no value there)."""

    name: str
    values: Sequence[float | None]
    color: str


def integer(value: float) -> str:
    return f"{value:,.0f}"


def percent(value: float) -> str:
    return f"{value * 100:.0f}%"


def dollars(value: float) -> str:
    if value == 0:
        return "$0"
    return f"${value:.4f}" if value < 0.01 else f"${value:,.2f}"


def _attr(value: object) -> str:
    return escape(str(value), quote=True)


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def nice_ceiling(value: float, *, whole: bool = False) -> tuple[float, float]:
    """The axis top and tick step for data up to `value`: a 1-2-5 step, at most five ticks
    (`whole`: counts, so no step below 1)."""
    if value <= 0:
        return (1.0, 1.0) if whole else (1.0, 0.25)
    raw = value / 4
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    if whole:
        step = max(1.0, float(math.ceil(step)))
    return step * math.ceil(value / step - 1e-9), step


def _open(chart_id: str, title: str, description: str) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{_attr(chart_id)}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-labelledby="{_attr(chart_id)}-title {_attr(chart_id)}-desc" '
        'font-family="system-ui, sans-serif" font-size="11">',
        f'<title id="{_attr(chart_id)}-title">{escape(title)}</title>',
        f'<desc id="{_attr(chart_id)}-desc">{escape(description)}</desc>',
    ]


def empty_chart(chart_id: str, title: str, message: str = EMPTY) -> str:
    parts = _open(chart_id, title, message)
    parts.append(
        f'<text class="empty" x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" '
        f'fill="#5f6b76" font-size="14">{escape(message)}</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def _frame(
    parts: list[str],
    *,
    categories: Sequence[str],
    top: float,
    step: float,
    y_label: str,
    x_label: str,
    fmt: Format,
    slot: float,
) -> None:
    """Grid lines with y ticks, the x labels (thinned to MAX_X_LABELS) and both axis titles."""
    plot_h = HEIGHT - TOP - BOTTOM
    parts.append('<g class="y-axis" fill="#5f6b76" text-anchor="end">')
    ticks = round(top / step)
    for i in range(ticks + 1):
        value = step * i
        y = TOP + plot_h - plot_h * value / top
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{_num(y)}" y2="{_num(y)}" '
            f'stroke="#dde3e9" stroke-width="1"/>'
            f'<text x="{LEFT - 6}" y="{_num(y + 4)}">{escape(fmt(value))}</text>'
        )
    parts.append("</g>")
    every = max(1, math.ceil(len(categories) / MAX_X_LABELS))
    last = len(categories) - 1
    parts.append('<g class="x-axis" fill="#5f6b76" text-anchor="middle">')
    for i, category in enumerate(categories):
        if (last - i) % every == 0:  # counted from the end: the newest is always labelled
            x = LEFT + slot * (i + 0.5)
            parts.append(
                f'<text x="{_num(x)}" y="{HEIGHT - BOTTOM + 16}">{escape(category)}</text>'
            )
    parts.append("</g>")
    parts.append(
        f'<text class="axis-label" x="{LEFT + (WIDTH - LEFT - RIGHT) / 2}" y="{HEIGHT - 8}" '
        f'text-anchor="middle" fill="#1d232a">{escape(x_label)}</text>'
        f'<text class="axis-label" transform="translate(14 {TOP + plot_h / 2}) rotate(-90)" '
        f'text-anchor="middle" fill="#1d232a">{escape(y_label)}</text>'
    )


def _plot(
    chart_id: str,
    title: str,
    description: str,
    categories: Sequence[str],
    axis: tuple[float, float],
    y_label: str,
    x_label: str,
    fmt: Format,
) -> tuple[list[str], float]:
    """The opening of a chart with data: the <svg> with its title and description, then the
    frame for `categories` on the y `axis` (top, step). Returns the parts and one category's
    width."""
    slot = (WIDTH - LEFT - RIGHT) / len(categories)
    parts = _open(chart_id, title, description)
    top, step = axis
    _frame(
        parts,
        categories=categories,
        top=top,
        step=step,
        y_label=y_label,
        x_label=x_label,
        fmt=fmt,
        slot=slot,
    )
    return parts, slot


def _legend(parts: list[str], series: Sequence[Series]) -> None:
    parts.append('<g class="legend" fill="#1d232a">')
    x = LEFT
    for s in series:
        parts.append(
            f'<rect x="{x}" y="10" width="10" height="10" fill="{_attr(s.color)}"/>'
            f'<text x="{x + 14}" y="19">{escape(s.name)}</text>'
        )
        x += 24 + 7 * len(s.name)
    parts.append("</g>")


def stacked_bars(
    *,
    chart_id: str,
    title: str,
    categories: Sequence[str],
    series: Sequence[Series],
    y_label: str,
    x_label: str,
    fmt: Format = integer,
    hover: Sequence[str] | None = None,
    empty: str = EMPTY,
) -> str:
    """One bar per category, its series stacked bottom-up in the given order. `hover` adds a line
    per category to each bar's <title> (e.g. the task's goal)."""
    totals = [sum(s.values[i] or 0 for s in series) for i in range(len(categories))]
    if not categories or not any(totals):
        return empty_chart(chart_id, title, empty)
    axis = nice_ceiling(max(totals), whole=fmt is integer)
    description = (
        f"{title}: {len(categories)} bars, stacked by {', '.join(s.name for s in series)}."
    )
    parts, slot = _plot(chart_id, title, description, categories, axis, y_label, x_label, fmt)
    plot_h, top = HEIGHT - TOP - BOTTOM, axis[0]
    bar_w = max(1.0, slot * 0.72)
    parts.append('<g class="bars">')
    for i, category in enumerate(categories):
        base = 0.0
        x = LEFT + slot * i + (slot - bar_w) / 2
        extra = f" — {hover[i]}" if hover else ""
        for s in series:
            value = s.values[i] or 0
            if value <= 0:
                continue
            y_top = TOP + plot_h - plot_h * (base + value) / top
            height = plot_h * value / top
            base += value
            label = f"{category}{extra} · {s.name}: {fmt(value)}"
            parts.append(
                f'<rect class="bar" x="{_num(x)}" y="{_num(y_top)}" width="{_num(bar_w)}" '
                f'height="{_num(max(height, 0.5))}" fill="{_attr(s.color)}" '
                f'data-series="{_attr(s.name)}" data-category="{_attr(category)}" '
                f'data-value="{_attr(value)}"><title>{escape(label)}</title></rect>'
            )
    parts.append("</g>")
    _legend(parts, series)
    parts.append("</svg>")
    return "".join(parts)


def line_chart(
    *,
    chart_id: str,
    title: str,
    categories: Sequence[str],
    series: Sequence[Series],
    y_label: str,
    x_label: str,
    fmt: Format = integer,
    y_max: float | None = None,
    empty: str = EMPTY,
) -> str:
    """One line per series with a point per value; a None leaves a gap in the line."""
    values = [v for s in series for v in s.values if v is not None]
    if not categories or not values:
        return empty_chart(chart_id, title, empty)
    axis = nice_ceiling(y_max if y_max is not None else max(values), whole=fmt is integer)
    description = f"{title}: {len(values)} points over {len(categories)} {x_label.lower()}."
    parts, slot = _plot(chart_id, title, description, categories, axis, y_label, x_label, fmt)
    plot_h, top = HEIGHT - TOP - BOTTOM, axis[0]
    for s in series:
        parts.append(f'<g class="line" data-series="{_attr(s.name)}">')
        runs: list[list[str]] = [[]]
        points: list[str] = []
        for i, value in enumerate(s.values):
            if value is None:
                runs.append([])
                continue
            x = LEFT + slot * (i + 0.5)
            y = TOP + plot_h - plot_h * min(value, top) / top
            runs[-1].append(f"{_num(x)},{_num(y)}")
            label = f"{categories[i]} · {s.name}: {fmt(value)}"
            points.append(
                f'<circle class="point" cx="{_num(x)}" cy="{_num(y)}" r="3.5" '
                f'fill="{_attr(s.color)}" data-category="{_attr(categories[i])}" '
                f'data-value="{_attr(value)}"><title>{escape(label)}</title></circle>'
            )
        for run in runs:
            if len(run) > 1:
                parts.append(
                    f'<polyline points="{" ".join(run)}" fill="none" '
                    f'stroke="{_attr(s.color)}" stroke-width="2"/>'
                )
        parts.extend(points)
        parts.append("</g>")
    _legend(parts, series)
    parts.append("</svg>")
    return "".join(parts)
