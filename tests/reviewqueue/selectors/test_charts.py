"""The SVG chart engine: axes a reader can take in at a glance."""

from __future__ import annotations

import pytest

from reviewqueue.charts import y_axis


@pytest.mark.parametrize(
    ("value", "top"),
    [(50, 50), (15, 15), (6, 6), (100, 100), (52, 60), (7, 8), (0.3, 0.3), (0, 1)],
)
def test_the_y_axis_stops_at_the_first_round_value_reaching_the_data(value: float, top: float) -> None:
    assert y_axis(value)[0] == pytest.approx(top)
