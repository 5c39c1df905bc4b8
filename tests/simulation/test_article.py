"""The published one-minute-step model: arithmetic, exact chain, spread over seeds."""

import dataclasses

import numpy as np
import pytest

from simulation import PRESETS, run_replications, simulate
from simulation.analytic import article_fluid_dropped, article_loss
from simulation.plain import run_article_plain
from tests.simulation.helpers import spread

PUBLISHED_OVERFLOW_PCT = {"A": 0.0, "B": 34.0, "C": 0.0, "D": 30.0}


@pytest.mark.parametrize("preset", ["B", "D"])
def test_it_matches_the_closed_form_without_bursts(preset: str) -> None:
    sc = dataclasses.replace(PRESETS[preset], burst_prob=0.0)
    run = simulate(sc, seed=1)
    p, r = int(sc.production_per_min), int(sc.review_per_min)
    assert run.arrived == p * sc.duration_min
    assert run.dropped == article_fluid_dropped(p, r, sc.capacity, sc.duration_min)
    assert run.reviewed == r * sc.duration_min  # reviewers never idle once the queue builds
    assert run.max_depth == sc.capacity


def test_it_never_overflows_in_a_and_c_across_seeds() -> None:
    for preset in ("A", "C"):
        summary = run_replications(PRESETS[preset], replications=300, seed=7, workers=1)
        assert max(r.dropped for r in summary.runs) == 0
        assert summary.to_dict()["overflow_pct"] == 0.0


@pytest.mark.parametrize("preset", ["B", "D"])
def test_it_agrees_with_the_exact_chain_within_the_replication_ci(preset: str) -> None:
    sc = PRESETS[preset]
    overflow = [r.overflow_pct for r in run_replications(sc, 600, seed=11, workers=1).runs]
    lo, hi = spread(overflow)
    assert lo <= article_loss(sc).overflow_pct <= hi


@pytest.mark.parametrize("preset", ["B", "D"])
def test_it_puts_the_published_figure_inside_the_spread_over_seeds(preset: str) -> None:
    overflow = [r.overflow_pct for r in run_replications(PRESETS[preset], 600, seed=3, workers=1).runs]
    lo, hi = np.percentile(overflow, [2.5, 97.5])
    assert lo <= PUBLISHED_OVERFLOW_PCT[preset] <= hi


def test_it_ratchets_the_step_limit_to_the_top_when_approval_ignores_it() -> None:
    summary = run_replications(PRESETS["A"], 200, seed=5, workers=1)
    trajectories = np.array([r.step_limit_trajectory for r in summary.runs])
    assert trajectories[:, 0].tolist() == [5] * 200
    # Approval (0.7*0.95 + 0.2*0.3 + 0.1*0.1 = 0.735) gives a window of 10 about a 21 %
    # chance of 9+ approvals (a raise) and about 0.2 % of 3 or fewer (a cut). Cuts stay
    # rare even though raises stop at the cap and a bad window is re-read each minute.
    moves = np.diff(trajectories, axis=1)
    assert (moves < 0).sum() < 0.1 * (moves > 0).sum()
    assert np.median(trajectories[:, -1]) == 15


@pytest.mark.parametrize("preset", ["A", "B", "C", "D"])
def test_it_draws_the_same_numbers_as_the_plain_loop(preset: str) -> None:
    for seed in range(5):
        simpy_run = simulate(PRESETS[preset], seed)
        plain = run_article_plain(PRESETS[preset], seed)
        assert (simpy_run.arrived, simpy_run.dropped, simpy_run.reviewed, simpy_run.approved) == (
            plain.arrived,
            plain.dropped,
            plain.reviewed,
            plain.approved,
        )
        assert simpy_run.mean_wait_min == pytest.approx(plain.mean_wait_min)
        assert simpy_run.step_limit_final == plain.step_limit_final
