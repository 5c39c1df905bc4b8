"""The operator pages' charts from the data: the dashboard's depth and step
limit over time, the "add a queue" result's pairs. The geometry is charts.py
(pure Python); this module reads what to draw."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from . import services, stats
from .charts import Chart, HLine, Line, PairChart, PairRow, build_chart, build_pair_chart, watermark_marks
from .models import Queue


def depth_chart(queue: Queue, now: datetime) -> Chart:
    """Sampled depth over the last hour, with the live depth as the newest point so
    the chart moves between samples; capacity and both watermarks drawn."""
    samples = stats.depth_samples(now=now, queue=queue)
    xs = [(s.created_at - now).total_seconds() / 60 for s in samples] + [0.0]
    ys = [float(s.depth) for s in samples] + [float(services.queue_depth(queue))]
    chart = Chart(
        title="Queue depth, last hour",
        lines=[Line("depth", xs, ys, "series-a")],
        hlines=watermark_marks(queue.capacity, queue.high_watermark, queue.low_watermark),
        x_label="minutes ago",
        x_domain=(-stats.DEPTH_WINDOW.total_seconds() / 60, 0.0),
    )
    return build_chart(chart, x_tick_format=lambda v: f"{v:.0f}")


def step_limit_chart(queue: Queue, now: datetime) -> Chart:
    history = stats.step_limit_history(queue=queue)
    if not history:
        return Chart(title="Step limit", lines=[], empty=True)
    start = history[0].created_at
    xs = [0.0] + [(h.created_at - start).total_seconds() / 60 for h in history]
    ys = [float(history[0].previous)] + [float(h.step_limit) for h in history]
    xs.append(max((now - start).total_seconds() / 60, xs[-1]))
    ys.append(float(queue.step_limit))
    chart = Chart(
        title="Step limit over time",
        lines=[Line("step limit", xs, ys, "series-b", step=True)],
        hlines=[
            HLine(f"max {queue.max_step_limit}", queue.max_step_limit, "mark-capacity"),
            HLine(f"min {queue.min_step_limit}", queue.min_step_limit, "mark-low"),
        ],
        x_label="minutes since the first change",
    )
    # Changes minutes apart would all read "0" at whole minutes.
    digits = 1 if xs[-1] < 4 else 0
    return build_chart(chart, x_tick_format=lambda v: f"{v:.{digits}f}")


def _added_charts(result: dict[str, Any], slug: str) -> list[Any]:
    """p95 wait and lost share of each existing queue, without and with ``slug``."""
    return [
        build_pair_chart(
            PairChart(
                title=f"{title} by queue, without and with {slug}",
                rows=[PairRow(queue, *result["changes"][queue][key]) for queue in result["changes"]],
                unit=unit,
                legend=("without", f"with {slug}"),
            )
        )
        for title, key, unit in (("p95 wait", "p95_wait_min", "min"), ("Lost share", "overflow_pct", "%"))
    ]
