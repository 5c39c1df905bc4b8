"""A what-if from live data starts from the queue's backlog: items already
waiting, with their ages, at minute 0."""

from __future__ import annotations

import pytest

from simulation import Scenario
from simulation.model import simulate
from simulation.replicate import run_replications


def test_a_run_started_with_a_backlog_reports_depth_starting_at_it() -> None:
    sc = Scenario(production_per_min=0.0, review_per_min=1.0, capacity=50, initial_ages_min=(30.0,) * 12)
    result = simulate(sc, seed=1)
    assert result.depth_series[0] == 12
    assert result.depth_series[1] == 11  # one review a minute works it off
    assert result.reviewed == 12 and result.arrived == 0 and result.enqueued == 0
    assert result.mean_wait_min > 30  # their age before the run counts in their wait


@pytest.mark.parametrize("model", ["article", "poisson"])
def test_the_replicated_result_starts_at_the_backlog_too(model: str) -> None:
    sc = Scenario(model=model, production_per_min=1.0, review_per_min=1.0, initial_ages_min=(5.0,) * 7)
    assert run_replications(sc, replications=3, seed=0).to_dict()["depth_series"][0] == 7


def test_a_backlog_above_the_high_watermark_starts_in_draft_with_backpressure() -> None:
    sc = Scenario(capacity=10, backpressure=True, production_per_min=0.0, initial_ages_min=(1.0,) * 9)
    result = simulate(sc, seed=0)
    assert result.first_draft_min == 0.0


def test_without_a_backlog_the_run_is_unchanged() -> None:
    assert simulate(Scenario(), seed=3) == simulate(Scenario(initial_ages_min=()), seed=3)


def test_a_backlog_of_negative_ages_is_refused() -> None:
    with pytest.raises(ValueError, match="initial_ages_min"):
        Scenario(initial_ages_min=(-1.0,))
    assert Scenario.from_dict({"initial_ages_min": [1, 2.5]}).initial_ages_min == (1.0, 2.5)
