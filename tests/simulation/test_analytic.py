"""The analytic checks: M/M/c/K blocking, transient loss, and the article's
Markov chain against its closed form."""

import dataclasses
import math

import numpy as np
import pytest

from simulation import PRESETS, Scenario
from simulation.analytic import (
    article_fluid_dropped,
    article_loss,
    mm1k_blocking,
    mmck_blocking,
    mmck_generator,
    mmck_transient_loss,
)


def test_it_builds_a_generator_whose_rows_sum_to_zero() -> None:
    q = mmck_generator(2.0, 1.5, 2, 5)
    assert np.allclose(q.sum(axis=1), 0)
    assert q[0, 1] == 2.0 and q[1, 0] == 1.5 and q[3, 2] == 3.0 and q[5, 5] == -3.0


@pytest.mark.parametrize("rho", [0.5, 1.0, 1.7])
def test_it_gives_the_same_mm1k_blocking_both_ways(rho: float) -> None:
    assert mmck_blocking(rho, 1.0, 1, 8) == pytest.approx(mm1k_blocking(rho, 8))


def test_it_stays_finite_for_long_heavily_loaded_queues() -> None:
    assert mmck_blocking(5.0, 3.0, 1, 2000) == pytest.approx(1 - 3 / 5)


def test_it_converges_to_the_steady_state_on_long_runs() -> None:
    sc = Scenario(
        model="poisson", production_per_min=0.9, review_per_min=1.0, capacity=10, burst_prob=0.0, duration_min=20_000
    )
    assert mmck_transient_loss(sc).overflow_pct == pytest.approx(100 * mm1k_blocking(0.9, 10), rel=0.01)


def test_it_loses_less_over_a_short_run_that_starts_empty() -> None:
    long_run = Scenario(model="poisson", production_per_min=5, review_per_min=3, burst_prob=0.0, duration_min=20_000)
    short = dataclasses.replace(long_run, duration_min=120)
    steady = 100 * mm1k_blocking(5 / 3, 50)
    assert mmck_transient_loss(short).overflow_pct < steady
    assert mmck_transient_loss(long_run).overflow_pct == pytest.approx(steady, rel=0.01)


@pytest.mark.parametrize("preset", ["B", "D"])
def test_it_reduces_the_article_chain_to_the_closed_form_without_bursts(preset: str) -> None:
    sc = dataclasses.replace(PRESETS[preset], burst_prob=0.0)
    loss = article_loss(sc)
    p, r = int(sc.production_per_min), int(sc.review_per_min)
    dropped = article_fluid_dropped(p, r, sc.capacity, sc.duration_min)
    assert loss.expected_dropped == pytest.approx(dropped)
    assert loss.overflow_pct == pytest.approx(100 * dropped / (p * sc.duration_min))


def test_it_gives_the_published_arithmetic_for_b_and_d() -> None:
    # 5 in, 3 out: +2 a minute until minute 24, then 2 of every 5 dropped.
    assert article_fluid_dropped(5, 3, 50, 120) == 1 + 2 * 96
    # 2 in, 1 out: +1 a minute until minute 50, then 1 of every 2 dropped.
    assert article_fluid_dropped(2, 1, 50, 120) == 71
    assert article_fluid_dropped(2, 3, 50, 120) == 0


def test_it_rejects_fractional_rates_for_the_exact_article_chain() -> None:
    with pytest.raises(ValueError, match="production_per_min"):
        article_loss(dataclasses.replace(PRESETS["B"], production_per_min=4.5))


def test_it_counts_bursts_in_the_expected_arrivals() -> None:
    sc = PRESETS["C"]
    expected = sc.duration_min * sc.production_per_min * (1 + sc.burst_prob * (sc.burst_mult - 1))
    assert article_loss(sc).expected_arrived == pytest.approx(expected)
    assert math.isclose(mmck_transient_loss(dataclasses.replace(sc, model="poisson")).expected_arrived, expected)
