"""The dashboard's depth chart and live region."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from reviewqueue.chart_series import depth_chart
from reviewqueue.models import Queue

pytestmark = pytest.mark.django_db


def test_the_depth_axis_ends_at_capacity(admit_item: Any) -> None:
    admit_item()
    chart = depth_chart(Queue.current(), timezone.now())
    labels = [label for _, label in chart.y_ticks]
    assert labels[-1] == "50"
    assert labels == ["0", "10", "20", "30", "40", "50"]


def test_the_polled_region_is_not_itself_a_live_region(client: Client, operator: User) -> None:
    client.force_login(operator)
    body = client.get(reverse("ops:dashboard")).content.decode()
    live = body.split('<section id="live"')[1].split(">")[0]
    assert "aria-live" not in live
    assert 'data-announce="Mode: normal.' in live
    assert body.count("aria-live") == 1
    assert "{#" not in body and "{% comment" not in body
    assert 'id="live-announcer"' in body


def test_paired_bars_share_one_scale_from_zero() -> None:
    from reviewqueue.charts import PairChart, PairRow, build_pair_chart

    chart = build_pair_chart(
        PairChart(title="p95 wait", rows=[PairRow("a", 1.0, 4.0), PairRow("b", 2.0, None)], unit="min")
    )
    plot_w = chart.width - chart.pad_left - chart.pad_right
    a_before, a_after = chart.rows[0].bars
    b_before, b_after = chart.rows[1].bars
    # The axis reaches 4 (a round step), so 4.0 fills the plot and 1.0 a quarter of it.
    assert a_after.width == plot_w
    assert a_before.width == plot_w / 4
    assert b_before.width == plot_w / 2
    assert (b_after.width, b_after.text) == (0.0, "none")  # a queue that reviewed nothing draws no bar
    assert a_after.text == "4.0 min"
    assert chart.rows[1].y > chart.rows[0].y and b_before.y == chart.rows[1].y
    assert chart.height > chart.rows[1].y + 2 * chart.bar_height
    assert chart.x_ticks[0] == (chart.pad_left, "0") and chart.x_ticks[-1][1] == "4"


def test_paired_bars_with_no_rows_are_empty() -> None:
    from reviewqueue.charts import PairChart, build_pair_chart

    assert build_pair_chart(PairChart(title="nothing", rows=[])).empty
