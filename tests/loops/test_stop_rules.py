"""Stop rules for scored tasks: building them from a spec, when each one stops,
and their vectorised form."""

from __future__ import annotations

import numpy as np
import pytest

from loops.stop_rules import (
    Confirm,
    FixedBudget,
    Margin,
    Plateau,
    Posterior,
    Smooth,
    StopRule,
    Threshold,
    make_stop_rule,
)

ALL_SPECS = [
    "fixed6",
    "fixed:3",
    "threshold",
    "confirm2",
    "confirm:3",
    "smooth2",
    "smooth:3",
    "margin",
    "margin:0.1",
    "plateau",
    "posterior",
    "posterior:0.9",
]


def test_it_builds_each_named_rule_from_its_spec() -> None:
    assert make_stop_rule("fixed6") == FixedBudget(n=6)
    assert make_stop_rule("fixed:4") == FixedBudget(n=4)
    assert make_stop_rule("threshold") == Threshold()
    assert make_stop_rule("confirm2") == Confirm(k=2)
    assert make_stop_rule("Confirm:3") == Confirm(k=3)
    assert make_stop_rule("smooth2") == Smooth(k=2)
    assert make_stop_rule("margin:0.1") == Margin(delta=0.1)
    assert make_stop_rule("plateau") == Plateau()
    assert make_stop_rule("posterior:0.9") == Posterior(p=0.9)


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_it_satisfies_the_protocol_the_runner_calls(spec: str) -> None:
    rule = make_stop_rule(spec)
    assert isinstance(rule, StopRule)
    assert isinstance(rule.name, str) and rule.name
    assert rule.should_stop([]) is False


@pytest.mark.parametrize("spec", ["nonsense", "confirm:0", "fixed:x", "threshold:2"])
def test_it_rejects_unknown_or_malformed_specs(spec: str) -> None:
    with pytest.raises(ValueError):
        make_stop_rule(spec)


def test_it_stops_threshold_on_one_crossing_and_confirm_on_two() -> None:
    scores = [0.5, 0.82, 0.7, 0.81, 0.85]
    threshold, confirm = Threshold(), Confirm(k=2)
    assert [threshold.should_stop(scores[:t]) for t in range(1, 6)] == [
        False,
        True,
        False,
        True,
        True,
    ]
    assert [confirm.should_stop(scores[:t]) for t in range(1, 6)] == [
        False,
        False,
        False,
        False,
        True,
    ]


def test_it_stops_fixed_budget_at_its_count_whatever_the_scores() -> None:
    rule = FixedBudget(n=3)
    assert not rule.should_stop([1.0, 1.0])
    assert rule.should_stop([0.0, 0.0, 0.0])


def test_it_smooths_over_the_last_k_scores_only_once_it_has_k() -> None:
    rule = Smooth(k=2)
    assert not rule.should_stop([0.95])
    assert rule.should_stop([0.2, 0.85, 0.75])
    assert not rule.should_stop([0.95, 0.85, 0.7])


def test_it_demands_the_margin_over_the_bar() -> None:
    rule = Margin(delta=0.05)
    assert not rule.should_stop([0.84])
    assert rule.should_stop([0.86])


def test_it_stops_plateau_only_over_the_bar_and_without_gains() -> None:
    rule = Plateau(k=2, epsilon=0.02)
    assert not rule.should_stop([0.6, 0.7, 0.85])  # still climbing
    assert rule.should_stop([0.85, 0.84, 0.86])
    assert not rule.should_stop([0.79, 0.78, 0.79])  # flat but under the bar


def test_it_lets_the_posterior_rule_stop_on_a_smooth_climb_over_the_bar() -> None:
    rule = Posterior()
    assert rule.should_stop([0.6, 0.8, 0.9, 0.95])


def test_it_never_lets_the_posterior_rule_stop_on_one_score() -> None:
    rule = Posterior()
    assert not rule.should_stop([1.0])


def test_it_waits_longer_when_the_scores_jitter() -> None:
    # Same last score, same level of evidence from the trend; only the jitter
    # differs, so the learnt noise must make the jittery history less certain.
    rule = Posterior()
    smooth = np.array([[0.55, 0.7, 0.78, 0.84]])
    jittery = np.array([[0.75, 0.45, 0.95, 0.84]])
    assert rule.prob_over_bar(jittery)[0, -1] < rule.prob_over_bar(smooth)[0, -1]


def test_it_makes_the_posterior_more_sure_as_scores_keep_clearing_the_bar() -> None:
    probs = Posterior().prob_over_bar(np.array([[0.7, 0.82, 0.86, 0.9, 0.93]]))[0]
    assert np.all(np.diff(probs[1:]) > 0)


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_it_gives_the_same_answer_vectorised_as_one_history_at_a_time(spec: str) -> None:
    rng = np.random.default_rng(7)
    # Scores bunched around the bar, including exact ties, where the forms could drift apart.
    scores = np.clip(rng.normal(0.8, 0.12, size=(40, 8)).round(2), 0.0, 1.0)
    scores[0] = 0.8
    rule = make_stop_rule(spec)
    matrix = rule.stop_matrix(scores)
    expected = np.array([[rule.should_stop(list(row[: t + 1])) for t in range(8)] for row in scores])
    assert matrix.shape == scores.shape
    assert np.array_equal(matrix, expected)
