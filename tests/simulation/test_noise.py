"""Noisy reviewers in the simulation: mistakes, double review and gold, and the
noise-aware tuner against a noise-free tuner in the same run."""

import dataclasses
import json
import random

import pytest
from scipy.stats import binomtest

from reviewqueue.policy import gold_share_seen
from simulation import PRESETS, Scenario, run_replications
from simulation.cli import NOISE_AWARE_DOUBLE_REVIEW_RATE, NOISE_AWARE_GOLD_RATE, main
from simulation.model import SimQueue
from tests.simulation.helpers import spread


def _noisy(preset: str, error: float, tuner: str, double: float = 0.0, gold: float = 0.0) -> Scenario:
    return dataclasses.replace(
        PRESETS[preset], reviewer_error=error, tuner_rule=tuner, double_review_rate=double, gold_rate=gold
    )


def test_the_cli_adds_the_noise_keys(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--preset", "B", "--reviewer-error", "0.2", "--tuner", "noise_aware", "--replications", "4"]
    assert main([*argv, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["step_limit_abs_error_mean"] > 0
    assert d["extra_review_load_pct"] > 0
    sc = d["scenario"]
    assert sc["reviewer_error"] == 0.2 and sc["tuner_rule"] == "noise_aware"
    # The noise-aware tuner brings double review and gold unless told otherwise.
    assert sc["double_review_rate"] == NOISE_AWARE_DOUBLE_REVIEW_RATE
    assert sc["gold_rate"] == NOISE_AWARE_GOLD_RATE


def test_the_cli_takes_explicit_rates_and_plain_brings_none(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "run",
        "--preset",
        "A",
        "--tuner",
        "noise_aware",
        "--double-review-rate",
        "0.2",
        "--gold-rate",
        "0",
        "--json",
    ]
    assert main(argv) == 0
    sc = json.loads(capsys.readouterr().out)["scenario"]
    assert sc["double_review_rate"] == 0.2 and sc["gold_rate"] == 0
    assert main(["run", "--preset", "A", "--reviewer-error", "0.1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["scenario"]["double_review_rate"] == 0 and d["extra_review_load_pct"] == 0


def test_the_cli_refuses_an_error_rate_of_one_half(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--preset", "A", "--reviewer-error", "0.5"]) == 2
    assert "reviewer_error" in capsys.readouterr().err


def test_mistakes_change_nothing_the_queue_draws() -> None:
    # The article verdict model ignores the step limit, so only the reviewers differ.
    clean = run_replications(PRESETS["B"], 5, seed=3, workers=1).runs
    noisy = run_replications(_noisy("B", 0.2, "plain"), 5, seed=3, workers=1).runs
    for a, b in zip(clean, noisy, strict=True):
        assert (a.arrived, a.dropped, a.reviewed, a.depth_series) == (b.arrived, b.dropped, b.reviewed, b.depth_series)
        assert a.step_limit_abs_error == 0
    assert sum(r.approved for r in noisy) != sum(r.approved for r in clean)
    assert sum(r.step_limit_abs_error for r in noisy) > 0


def test_error_free_reviewers_leave_the_plain_tuner_on_the_reference() -> None:
    runs = run_replications(_noisy("A", 0.0, "plain", double=0.1, gold=0.1), 10, seed=1, workers=1).runs
    assert all(r.step_limit_abs_error == 0 for r in runs)
    assert all(r.extra_reviews > 0 for r in runs)


def test_double_review_and_gold_cost_their_share_of_reviews() -> None:
    # A second review for 10 % of items; a copy beside 5 % of them, itself
    # reviewed twice one time in ten: 10 + 5 x 1.1 = 15.5 reviews in 100.
    summary = run_replications(_noisy("A", 0.1, "noise_aware", double=0.1, gold=0.05), 40, seed=2, workers=1)
    lo, hi = spread(summary.values("extra_review_load_pct"))
    assert lo <= 15.5 <= hi


def test_the_model_places_gold_copies_by_the_live_queues_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    sc = _noisy("A", 0.0, "noise_aware", gold=0.3)
    runs = run_replications(sc, 20, seed=4, workers=1).runs
    copies, admitted = sum(r.gold_copies for r in runs), sum(r.enqueued for r in runs)
    interval = binomtest(copies, admitted).proportion_ci(0.95, method="wilson")
    assert interval.low <= 0.3 <= interval.high  # a copy beside each admitted item with chance gold_rate
    # Each copy is reviewed, and only as extra load: copies are about rate / (1 + rate) of the reviews.
    reviews = sum(r.reviewed + r.extra_reviews for r in runs)
    assert abs(sum(r.extra_reviews for r in runs) / reviews - gold_share_seen(0.3)) < 0.01
    # The rule is policy's: placed when it says so, for every item admitted, never otherwise.
    asked: list[tuple[float, float]] = []

    def always(draw: float, rate: float) -> bool:
        asked.append((draw, rate))
        return True

    monkeypatch.setattr("simulation.reviewers.gold_copy_placed", always)
    run = run_replications(sc, 1, seed=4, workers=1).runs[0]
    assert run.gold_copies == run.enqueued == len(asked) and {rate for _, rate in asked} == {0.3}
    monkeypatch.setattr("simulation.reviewers.gold_copy_placed", lambda draw, rate: False)
    assert run_replications(sc, 1, seed=4, workers=1).runs[0].gold_copies == 0


def test_a_gold_copy_waits_in_the_queue_but_never_in_its_depth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("simulation.reviewers.gold_copy_placed", lambda draw, rate: True)
    queue = SimQueue(_noisy("A", 0.0, "noise_aware", gold=0.5), random.Random(1))
    item = queue.produce(0.0)
    queue.offer(0.0, item)
    assert (queue.depth, queue.result.arrived, queue.result.enqueued, len(queue.fifo)) == (1, 1, 1, 2)
    assert queue.take() is item
    copy = queue.take()
    assert copy is not None and copy.gold and (copy.arrived, copy.priority) == (item.arrived, item.priority)
    queue.finish(1.0, item)
    queue.finish(1.0, copy)
    assert (queue.depth, queue.result.reviewed, queue.panel.extra_reviews, len(queue.panel.gold)) == (0, 1, 1, 1)


def test_extra_reviews_take_review_time_from_an_overloaded_queue() -> None:
    for model in ("article", "poisson"):
        base = dataclasses.replace(PRESETS["B"], model=model)
        plain = run_replications(base, 20, seed=5, workers=1)
        costly = run_replications(dataclasses.replace(base, double_review_rate=0.3), 20, seed=5, workers=1)
        assert costly.mean("reviewed") < 0.85 * plain.mean("reviewed")


def test_the_noise_aware_tuner_errs_less_than_the_plain_one_at_error_0_2() -> None:
    n = 60
    plain = run_replications(_noisy("A", 0.2, "plain"), n, seed=11, workers=1).values("step_limit_abs_error")
    aware = run_replications(
        _noisy("A", 0.2, "noise_aware", double=NOISE_AWARE_DOUBLE_REVIEW_RATE, gold=NOISE_AWARE_GOLD_RATE),
        n,
        seed=11,
        workers=1,
    ).values("step_limit_abs_error")
    # Same seeds, same items: the paired difference's 95 % interval lies below zero.
    _, hi = spread([a - p for a, p in zip(aware, plain, strict=True)])
    assert hi < 0


def test_a_scenario_refuses_an_unknown_tuner_and_a_team_of_one() -> None:
    with pytest.raises(ValueError, match="tuner_rule"):
        dataclasses.replace(PRESETS["A"], tuner_rule="clever")
    with pytest.raises(ValueError, match="review_team"):
        dataclasses.replace(PRESETS["A"], review_team=1)
