"""The noise-aware tuner's pure parts: reviewer reliability by EM, the settled
verdict of a double review, and the expected-step rule against the plain one."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reviewqueue.policy import (
    GoldAnswer,
    PolicyError,
    Reliability,
    ReliabilityPrior,
    ReviewerVerdict,
    TunerConfig,
    applied_step_limit,
    approve_probability,
    count_distribution,
    estimate_reliability,
    gold_copy_placed,
    gold_share_seen,
    step_change_odds,
    tune_step_limit,
    tune_step_limit_weighted,
)

TRUE_ERRORS = {"ann": 0.05, "bob": 0.2, "cy": 0.3}


def _synthetic(seed: int, items: int, gold: int, double_share: float, approve: float = 0.7):
    """Reviewers flipping verdicts at TRUE_ERRORS, on items approvable with ``approve``."""
    rng = random.Random(seed)
    people = sorted(TRUE_ERRORS)

    def say(person: str, truth: bool) -> ReviewerVerdict:
        return ReviewerVerdict(person, truth != (rng.random() < TRUE_ERRORS[person]))

    queue_items = []
    for _ in range(items):
        truth = rng.random() < approve
        who = rng.sample(people, 2)
        n = 2 if rng.random() < double_share else 1
        queue_items.append(tuple(say(p, truth) for p in who[:n]))
    gold_answers = []
    for _ in range(gold):
        truth = rng.random() < 0.5
        person = rng.choice(people)
        gold_answers.append(GoldAnswer(person, say(person, truth).approved, truth))
    return gold_answers, queue_items


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_it_recovers_known_error_rates_from_gold_and_double_review(seed: int) -> None:
    gold, items = _synthetic(seed, items=3000, gold=600, double_share=0.3)
    est = estimate_reliability(gold, items)
    for person, error in TRUE_ERRORS.items():
        # ~500 answers each: the binomial sd of an error rate near 0.2 is under 0.02.
        assert est.error(person) == pytest.approx(error, abs=0.05)
    assert est.approve_share == pytest.approx(0.7, abs=0.04)


def test_it_recovers_error_rates_from_disagreement_alone() -> None:
    _, items = _synthetic(4, items=6000, gold=0, double_share=0.5)
    est = estimate_reliability((), items)
    ordered = sorted(TRUE_ERRORS, key=est.error)
    assert ordered == ["ann", "bob", "cy"]
    for person, error in TRUE_ERRORS.items():
        assert est.error(person) == pytest.approx(error, abs=0.06)


def test_counts_give_the_same_estimate_as_the_items_they_count() -> None:
    gold, items = _synthetic(5, items=400, gold=50, double_share=0.3)
    counts: dict[tuple[ReviewerVerdict, ...], float] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    a = estimate_reliability(gold, items)
    b = estimate_reliability(gold, counts)
    assert a.errors == pytest.approx(b.errors) and a.approve_share == pytest.approx(b.approve_share)


def test_few_answers_stay_near_the_team() -> None:
    prior = ReliabilityPrior(error=0.1)
    # A team measured at 10 % error over 200 gold answers ...
    team = [GoldAnswer(p, i % 10 != 0, True) for p in ("ann", "cy") for i in range(100)]
    # ... and a newcomer's three answers, all wrong: not a reviewer who is always wrong.
    est = estimate_reliability([*team, *[GoldAnswer("bob", False, True)] * 3], (), prior)
    assert est.error("ann") == pytest.approx(0.1, abs=0.01)
    assert 0.1 < est.error("bob") < 0.4
    # All right: not infallible either.
    est = estimate_reliability([*team, *[GoldAnswer("bob", True, True)] * 3], (), prior)
    assert 0.05 < est.error("bob") < 0.1
    assert est.error("nobody yet") == est.default_error == pytest.approx(0.1, abs=0.01)


def test_a_reviewer_worse_than_chance_counts_for_nothing_not_against() -> None:
    gold = [GoldAnswer("contrarian", not t, t) for t in [True, False] * 200]
    est = estimate_reliability(gold)
    assert est.error("contrarian") < 0.5
    p = approve_probability([ReviewerVerdict("contrarian", True)], est)
    assert p >= est.approve_share  # an approval still points (barely) towards approval


def test_a_settled_double_review_weighs_the_more_reliable_reviewer() -> None:
    rel = Reliability(errors={"good": 0.05, "poor": 0.3}, approve_share=0.5)
    split = [ReviewerVerdict("good", True), ReviewerVerdict("poor", False)]
    assert approve_probability(split, rel) > 0.8
    swapped = [ReviewerVerdict("good", False), ReviewerVerdict("poor", True)]
    assert approve_probability(swapped, rel) < 0.2
    # Two equally reliable reviewers who disagree leave the item at the approve share.
    even = Reliability(errors={"a": 0.2, "b": 0.2}, approve_share=0.7)
    assert approve_probability([ReviewerVerdict("a", True), ReviewerVerdict("b", False)], even) == pytest.approx(0.7)
    # Agreement is more certain than one verdict.
    one = approve_probability([ReviewerVerdict("a", True)], even)
    both = approve_probability([ReviewerVerdict("a", True), ReviewerVerdict("b", True)], even)
    assert one < both < 1


def test_the_posterior_is_bayes_rule() -> None:
    rel = Reliability(errors={"r": 0.2}, approve_share=0.735)
    expected = 0.735 * 0.8 / (0.735 * 0.8 + 0.265 * 0.2)
    assert approve_probability([ReviewerVerdict("r", True)], rel) == pytest.approx(expected)


@given(st.lists(st.floats(0, 1), max_size=12))
def test_the_count_distribution_is_a_distribution_with_the_right_mean(ps: list[float]) -> None:
    dist = count_distribution(ps)
    assert len(dist) == len(ps) + 1
    assert math.fsum(dist) == pytest.approx(1)
    assert math.fsum(k * m for k, m in enumerate(dist)) == pytest.approx(math.fsum(ps), abs=1e-9)


@given(
    st.integers(3, 15),
    st.lists(st.booleans(), max_size=25),
    st.sampled_from([TunerConfig(), TunerConfig(window=4, approve_high=0.75, approve_low=0.5)]),
)
def test_with_error_free_reviewers_it_is_the_plain_tuner(current: int, verdicts: list[bool], cfg: TunerConfig) -> None:
    rel = Reliability(errors={"r": 0.0}, approve_share=0.6)
    probs = [approve_probability([ReviewerVerdict("r", v)], rel) for v in verdicts]
    assert probs == [float(v) for v in verdicts]
    expected = tune_step_limit_weighted(float(current), probs, cfg)
    assert expected == tune_step_limit(current, verdicts, cfg)
    assert applied_step_limit(expected, cfg) == tune_step_limit(current, verdicts, cfg)


def test_it_moves_by_the_chance_a_noise_free_tuner_would_move() -> None:
    cfg = TunerConfig()  # raise above 8 of 10, lower below 4 of 10
    up, down = step_change_odds([0.9] * 10, cfg)
    assert up == pytest.approx(0.9**10 + 10 * 0.9**9 * 0.1)
    assert down == pytest.approx(sum(math.comb(10, k) * 0.9**k * 0.1 ** (10 - k) for k in range(4)))
    assert tune_step_limit_weighted(5.0, [0.9] * 10, cfg) == pytest.approx(5 + up - down)
    assert step_change_odds([0.9] * 9, cfg) == (0.0, 0.0)  # a partial window moves nothing


def test_the_expected_limit_stays_in_bounds_and_rounds_half_up() -> None:
    cfg = TunerConfig(min_steps=3, max_steps=15)
    assert tune_step_limit_weighted(14.9, [1.0] * 10, cfg) == 15.0
    assert tune_step_limit_weighted(3.1, [0.0] * 10, cfg) == 3.0
    assert applied_step_limit(5.5, cfg) == 6 and applied_step_limit(5.49, cfg) == 5
    assert applied_step_limit(40.0, cfg) == 15


def test_a_prior_out_of_range_is_refused() -> None:
    with pytest.raises(PolicyError):
        ReliabilityPrior(error=0.5)
    with pytest.raises(PolicyError):
        ReliabilityPrior(team_strength=-1)


# --- gold copies --------------------------------------------------------------------------


@given(st.floats(0, 1), st.floats(0, 1, exclude_max=True))
def test_a_gold_copy_is_placed_when_the_draw_is_below_the_rate(rate: float, draw: float) -> None:
    assert gold_copy_placed(draw, rate) == (draw < rate)


def test_copies_are_rate_over_one_plus_rate_of_what_reviewers_see() -> None:
    rng = random.Random(3)
    for rate in (0.02, 0.1, 0.5, 1.0):
        copies = sum(gold_copy_placed(rng.random(), rate) for _ in range(50_000))
        assert math.isclose(copies / (50_000 + copies), gold_share_seen(rate), abs_tol=0.006), rate
    assert gold_share_seen(0.0) == 0.0 and gold_share_seen(1.0) == 0.5
    with pytest.raises(PolicyError):
        gold_copy_placed(0.5, 1.5)
