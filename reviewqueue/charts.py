"""Server-rendered SVG line charts: the geometry, computed in Python, so the
template (``templates/ops/_chart.html``) only draws and the page needs no
script to show a chart. Pure Python: no Django, no database."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass
class Line:
    """One series: y values at x positions (any unit); ``css`` picks its stroke."""

    label: str
    xs: Sequence[float]
    ys: Sequence[float]
    css: str = "series-a"
    step: bool = False
    points: str = ""
    last: tuple[float, float] | None = None


@dataclass
class HLine:
    """A horizontal mark across the plot (capacity, a watermark, a bound)."""

    label: str
    y: float
    css: str = "mark"
    py: float = 0.0


@dataclass
class Chart:
    """A chart's data and, once ``build_chart`` has run, its pixel geometry."""

    title: str
    lines: list[Line]
    hlines: list[HLine] = field(default_factory=list)
    x_label: str = ""
    width: int = 640
    height: int = 220
    pad_left: int = 44
    pad_bottom: int = 28
    pad_top: int = 10
    pad_right: int = 90
    y_ticks: list[tuple[float, str]] = field(default_factory=list)
    x_ticks: list[tuple[float, str]] = field(default_factory=list)
    empty: bool = False
    x_domain: tuple[float, float] | None = None


def watermark_marks(capacity: float, high_watermark: float, low_watermark: float) -> list[HLine]:
    """Capacity and both watermarks, as the queue's depth charts draw them."""
    return [
        HLine(f"capacity {capacity}", capacity, "mark-capacity"),
        HLine(f"high {high_watermark:.0%}", capacity * high_watermark, "mark-high"),
        HLine(f"low {low_watermark:.0%}", capacity * low_watermark, "mark-low"),
    ]


def y_axis(value: float, max_ticks: int = 5) -> tuple[float, float]:
    """(top, step) of a y axis reaching ``value``: a round step (1, 2, 2.5, 5
    x 10^k) and the first multiple of it at or above the value, so a queue of
    capacity 50 gets an axis to 50, not to 100."""
    if value <= 0:
        return 1.0, 0.25
    raw = value / max_ticks
    exp = 10 ** math.floor(math.log10(raw))
    step = next(m * exp for m in (1, 2, 2.5, 5, 10) if m * exp >= raw * (1 - 1e-9))
    return round(math.ceil(value / step - 1e-9) * step, 10), step


def _polyline(line: Line, px: Callable[[float], float], py: Callable[[float], float]) -> str:
    """A series' SVG points; a step series holds each value until the next x."""
    pts: list[str] = []
    prev_y: float | None = None
    for x, y in zip(line.xs, line.ys, strict=True):
        if line.step and prev_y is not None:
            pts.append(f"{px(x)},{py(prev_y)}")
        pts.append(f"{px(x)},{py(y)}")
        prev_y = y
    return " ".join(pts)


def build_chart(chart: Chart, *, x_tick_format: Callable[[float], str] | None = None) -> Chart:
    """Scale every series and mark into the SVG's pixel box; the template only draws."""
    xs = [x for line in chart.lines for x in line.xs]
    ys = [y for line in chart.lines for y in line.ys] + [h.y for h in chart.hlines]
    if not xs:
        chart.empty = True
        return chart
    x0, x1 = chart.x_domain or (min(xs), max(xs))
    if x1 == x0:
        x1 = x0 + 1
    y_top, y_step = y_axis(max(ys) if ys else 1)
    plot_w = chart.width - chart.pad_left - chart.pad_right
    plot_h = chart.height - chart.pad_top - chart.pad_bottom

    def px(x: float) -> float:
        return round(chart.pad_left + (x - x0) / (x1 - x0) * plot_w, 1)

    def py(y: float) -> float:
        return round(chart.pad_top + plot_h - y / y_top * plot_h, 1)

    for line in chart.lines:
        line.points = _polyline(line, px, py)
        if line.xs:
            line.last = (px(line.xs[-1]), py(line.ys[-1]))
    for mark in chart.hlines:
        mark.py = py(mark.y)
    n_ticks = round(y_top / y_step)
    chart.y_ticks = [(py(y_step * i), f"{y_step * i:g}") for i in range(n_ticks + 1)]
    fmt = x_tick_format or (lambda v: f"{v:g}")
    chart.x_ticks = [(px(x0 + (x1 - x0) * i / 4), fmt(x0 + (x1 - x0) * i / 4)) for i in range(5)]
    return chart


# --- paired bars: one figure per row, before and after a change -------------------------------


@dataclass
class Bar:
    """One bar's geometry and the value it is labelled with."""

    y: float
    width: float
    text: str
    text_x: float


@dataclass
class PairRow:
    """One row of a paired bar chart: a label and a figure before and after."""

    label: str
    before: float | None
    after: float | None
    y: float = 0.0
    bars: list[Bar] = field(default_factory=list)


@dataclass
class PairChart:
    """Horizontal bars in pairs (before, after) for rows such as queues, so a
    change reads at a glance; ``unit`` follows each value label."""

    title: str
    rows: list[PairRow]
    unit: str = ""
    legend: tuple[str, str] = ("before", "after")
    digits: int = 1
    # Narrower than the line charts: two sit side by side, and on a phone
    # the SVG shrinks less, so its labels stay readable.
    width: int = 460
    pad_left: int = 90
    pad_right: int = 80
    pad_top: int = 28
    pad_bottom: int = 24
    bar_height: int = 16
    row_gap: int = 14
    height: int = 0
    x_ticks: list[tuple[float, str]] = field(default_factory=list)
    empty: bool = False


def build_pair_chart(chart: PairChart) -> PairChart:
    """Lay out every row's two bars on one scale from 0; a missing value (a
    queue that reviewed nothing) draws no bar and reads "none"."""
    values = [v for row in chart.rows for v in (row.before, row.after) if v is not None]
    if not chart.rows:
        chart.empty = True
        return chart
    top, step = y_axis(max(values) if values else 0.0)
    plot_w = chart.width - chart.pad_left - chart.pad_right
    row_h = 2 * chart.bar_height + chart.row_gap
    chart.height = chart.pad_top + row_h * len(chart.rows) + chart.pad_bottom

    def px(v: float) -> float:
        return round(v / top * plot_w, 1)

    unit = f" {chart.unit}" if chart.unit else ""
    for i, row in enumerate(chart.rows):
        row.y = chart.pad_top + i * row_h
        row.bars = []
        for j, value in enumerate((row.before, row.after)):
            width = 0.0 if value is None else px(value)
            text = "none" if value is None else f"{value:.{chart.digits}f}{unit}"
            row.bars.append(
                Bar(
                    y=row.y + j * chart.bar_height,
                    width=width,
                    text=text,
                    text_x=round(chart.pad_left + width + 4, 1),
                )
            )
    n_ticks = round(top / step)
    chart.x_ticks = [(round(chart.pad_left + px(step * i), 1), f"{step * i:g}") for i in range(n_ticks + 1)]
    return chart
