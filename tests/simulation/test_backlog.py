"""A what-if from live data starts from the queue's backlog: items already
waiting, with their ages, at minute 0; with several queues, each live
queue from its own, and an added queue from empty."""

from __future__ import annotations

import dataclasses

import pytest

from simulation import Scenario
from simulation.model import simulate
from simulation.multi import MultiScenario, QueueSpec, run_multi_replications, simulate_multi, what_if_added
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


# --- several queues: the add-a-queue what-if starts from each live queue's backlog -------------


@pytest.mark.parametrize("model", ["article", "poisson"])
def test_one_queue_with_a_backlog_is_the_single_queue_model_draw_for_draw(model: str) -> None:
    ages = tuple(float(age) for age in range(30, 0, -2))
    ms = MultiScenario((QueueSpec("only", 2.0, capacity=20, initial_ages_min=ages),), review_per_min=2.5, model=model)
    for seed in (0, 5):
        got = simulate_multi(ms, seed).queues["only"]
        assert dataclasses.asdict(got) == dataclasses.asdict(simulate(ms.scenario_for(ms.queues[0]), seed))
        assert got.depth_series[0] == len(ages)


def _support_and_docs(backlog: tuple[float, ...]) -> MultiScenario:
    """Two queues the pool keeps up with (1.5 outputs/min against 2.5
    decisions/min), so what draft mode there is comes from the backlog."""
    return MultiScenario(
        (QueueSpec("support", 1.0, capacity=20, initial_ages_min=backlog), QueueSpec("docs", 0.5, capacity=30)),
        review_per_min=2.5,
        reviewers=2,
        duration_min=120,
        base=Scenario(burst_prob=0.0),
    )


def test_a_backlog_past_the_high_watermark_reaches_draft_mode_at_once_and_waits_longer() -> None:
    full = (20.0,) * 17  # 17 of 20: past the high watermark (16), 20 minutes old
    empty, loaded = (simulate_multi(_support_and_docs(b), seed=4).queues["support"] for b in ((), full))
    assert loaded.first_draft_min == 0.0
    assert empty.first_draft_min is None or empty.first_draft_min > 0
    assert loaded.mode_minutes["draft"] > empty.mode_minutes["draft"]
    assert loaded.mean_wait_min > empty.mean_wait_min
    assert loaded.depth_series[0] == 17 and empty.depth_series[0] == 0


def test_adding_a_queue_starts_the_live_queues_from_their_backlog_and_the_new_one_empty() -> None:
    full = (20.0,) * 17
    added = QueueSpec("billing", 0.6, capacity=25)
    result = what_if_added(_support_and_docs(full), added, replications=6, seed=2)
    plain = what_if_added(_support_and_docs(()), added, replications=6, seed=2)
    for side in ("without", "with"):
        runs = (
            run_multi_replications(
                _support_and_docs(full).with_queue(added) if side == "with" else _support_and_docs(full), 1, seed=2
            )
            .runs[0]
            .queues
        )
        assert runs["support"].depth_series[0] == 17 and runs["docs"].depth_series[0] == 0
        if side == "with":
            assert runs["billing"].depth_series[0] == 0
        # the backlog is kept in the stored scenario of both sides
        assert result[side]["scenario"]["queues"][0]["initial_ages_min"] == list(full)
    draft_with_backlog = result["changes"]["support"]["time_in_draft_min"]
    draft_without = plain["changes"]["support"]["time_in_draft_min"]
    assert draft_with_backlog[0] > draft_without[0] and draft_with_backlog[1] > draft_without[1]
