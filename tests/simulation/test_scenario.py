"""Scenarios: JSON round trip, the published presets, and input validation."""

import dataclasses
import json

import pytest

from simulation import PRESETS, Scenario


def test_it_round_trips_through_json() -> None:
    sc = dataclasses.replace(PRESETS["B"], backpressure=True, priority_mix=(0.5, 0.25, 0.25))
    again = Scenario.from_dict(json.loads(json.dumps(sc.to_dict())))
    assert again == sc


def test_it_has_the_four_published_presets() -> None:
    rates = {k: (s.production_per_min, s.review_per_min, s.capacity, s.burst_prob) for k, s in PRESETS.items()}
    assert rates == {
        "A": (2, 3, 50, 0.015),
        "B": (5, 3, 50, 0.015),
        "C": (2, 3, 50, 0.045),
        "D": (2, 1, 50, 0.015),
    }
    assert all(s.duration_min == 120 and s.burst_mult == 3 and s.model == "article" for s in PRESETS.values())


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"model": "fluid"}, "model"),
        ({"production_per_min": -1}, "production_per_min"),
        ({"production_per_min": "lots"}, "production_per_min"),
        ({"reviewers": 0}, "reviewers"),
        ({"reviewers": 1.5}, "reviewers"),
        ({"burst_prob": 2}, "burst_prob"),
        ({"high_watermark": 0.2, "low_watermark": 0.3}, "low_watermark"),
        ({"capacity": 0}, "capacity"),
        ({"priority_mix": [0, 0]}, "priority_mix"),
        ({"step_limit_start": 40}, "step_limit_start"),
        ({"no_such_knob": 1}, "no_such_knob"),
    ],
)
def test_it_rejects_bad_input_naming_the_field(data: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        Scenario.from_dict(data)


def test_it_accepts_on_off_strings_for_backpressure() -> None:
    assert Scenario.from_dict({"backpressure": "on"}).backpressure is True
    assert Scenario.from_dict({"backpressure": "off"}).backpressure is False
