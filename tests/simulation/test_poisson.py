"""The Poisson model against queueing theory: exact transient loss and steady-state blocking."""

import dataclasses

import pytest

from simulation import PRESETS, Scenario, run_replications
from simulation.analytic import mm1k_blocking, mmck_blocking, mmck_transient_loss
from tests.simulation.helpers import spread


@pytest.mark.parametrize("preset", ["B", "D"])
def test_it_agrees_with_the_exact_transient_loss(preset: str) -> None:
    sc = dataclasses.replace(PRESETS[preset], model="poisson")
    runs = run_replications(sc, 400, seed=21, workers=1).runs
    exact = mmck_transient_loss(sc)
    lo, hi = spread([r.dropped for r in runs])
    assert lo <= exact.expected_dropped <= hi
    lo, hi = spread([r.arrived for r in runs])
    assert lo <= exact.expected_arrived <= hi
    lo, hi = spread([r.overflow_pct for r in runs])
    assert lo <= exact.overflow_pct <= hi


def test_it_agrees_with_the_transient_loss_for_several_reviewers_and_heavy_bursts() -> None:
    sc = Scenario(
        model="poisson",
        production_per_min=3.0,
        review_per_min=3.0,
        reviewers=3,
        capacity=12,
        burst_prob=0.2,
        burst_mult=2.5,
        duration_min=60,
    )
    runs = run_replications(sc, 400, seed=4, workers=1).runs
    lo, hi = spread([r.dropped for r in runs])
    assert lo <= mmck_transient_loss(sc).expected_dropped <= hi
    # the exact mean depth curve as well, at the end of the run
    lo, hi = spread([r.depth_series[-1] for r in runs])
    assert lo <= mmck_transient_loss(sc).depth_series[-1] <= hi


@pytest.mark.parametrize(("lam", "mu", "servers", "capacity"), [(0.9, 1.0, 1, 10), (2.4, 1.5, 2, 6)])
def test_it_matches_steady_state_blocking_on_long_runs(lam: float, mu: float, servers: int, capacity: int) -> None:
    sc = Scenario(
        model="poisson",
        production_per_min=lam,
        review_per_min=mu * servers,
        reviewers=servers,
        capacity=capacity,
        burst_prob=0.0,
        duration_min=3000,
    )
    runs = run_replications(sc, 30, seed=8, workers=1).runs
    lo, hi = spread([r.overflow_pct for r in runs])
    assert lo <= 100 * mmck_blocking(lam, mu, servers, capacity) <= hi
    if servers == 1:
        assert lo <= 100 * mm1k_blocking(lam / mu, capacity) <= hi
