"""The synthetic scored agent: a hidden quality curve read through a noisy judge."""

from __future__ import annotations

import random

import numpy as np
import pytest

from loops.scored import ScoredAgent, judge, make_scored_agent, quality_curve


def test_it_follows_the_published_curve_from_s0() -> None:
    assert quality_curve(0.4, 0.5, 1) == pytest.approx(0.4)
    assert quality_curve(0.4, 0.5, 3) == pytest.approx(1 - 0.6 * np.exp(-1.0))


def test_it_clips_the_judges_reading() -> None:
    rng = random.Random(3)
    readings = [judge(0.98, 0.2, rng) for _ in range(500)]
    assert min(readings) >= 0.0 and max(readings) <= 1.0
    assert readings.count(1.0) > 50


def test_it_scores_each_attempt_of_the_scored_agent_along_its_hidden_curve() -> None:
    agent = ScoredAgent(s0=0.5, r=0.6, sigma=0.0, rng=random.Random(1), task_id="t")
    replies = [agent.attempt("go") for _ in range(4)]
    assert [r.score for r in replies] == pytest.approx([quality_curve(0.5, 0.6, t) for t in range(1, 5)])
    assert agent.quality == pytest.approx(quality_curve(0.5, 0.6, 4))
    assert all(r.tokens > 0 for r in replies)


def test_it_replays_the_same_scored_agent_for_the_same_seed() -> None:
    first = make_scored_agent(seed=11, family="hard")
    second = make_scored_agent(seed=11, family="hard")
    assert [first.attempt("x").score for _ in range(5)] == [second.attempt("x").score for _ in range(5)]
    assert 0.25 <= first.s0 <= 0.40 and 0.2 <= first.r <= 0.4
