"""Several queues sharing one reviewer pool (simulation/multi.py)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from reviewqueue import policy
from simulation.cli import main
from simulation.model import simulate
from simulation.multi import (
    MultiScenario,
    QueueSpec,
    run_multi_replications,
    simulate_multi,
    what_if_added,
)
from simulation.replicate import replication_seeds
from simulation.scenario import Scenario
from tests.simulation.helpers import spread

STEADY = Scenario(burst_prob=0.0)


def two(a: QueueSpec, b: QueueSpec, **kw) -> MultiScenario:
    return MultiScenario((a, b), base=kw.pop("base", STEADY), **kw)


@pytest.mark.parametrize("model", ["poisson", "article"])
@pytest.mark.parametrize("backpressure", [True, False])
def test_one_queue_is_the_single_queue_model_draw_for_draw(model, backpressure):
    ms = MultiScenario(
        (QueueSpec("only", 3.5, capacity=15, backpressure=backpressure),),
        review_per_min=3.0,
        reviewers=2,
        model=model,
    )
    for seed in (0, 1, 17):
        got = simulate_multi(ms, seed).queues["only"]
        want = simulate(ms.scenario_for(ms.queues[0]), seed)
        assert dataclasses.asdict(got) == dataclasses.asdict(want)
        assert want.dropped > 0 or model == "article"  # the comparison covers losses, not only an idle queue


def test_two_identical_queues_share_the_reviewers_fairly():
    ms = two(QueueSpec("a", 2.0, capacity=30), QueueSpec("b", 2.0, capacity=30), review_per_min=3.0, reviewers=3)
    summary = run_multi_replications(ms, 40, seed=3)
    a = [r.queues["a"] for r in summary.runs]
    b = [r.queues["b"] for r in summary.runs]
    reviewed_a = np.array([r.reviewed for r in a], dtype=float)
    reviewed_b = np.array([r.reviewed for r in b], dtype=float)
    # Overloaded (ratio 4/3): the pool is the bottleneck, and each queue gets about half of it.
    assert np.mean(reviewed_a + reviewed_b) > 0.9 * 3.0 * 120
    low, high = spread(list(reviewed_a - reviewed_b))
    assert low < 0 < high
    assert abs(np.mean(reviewed_a) / np.mean(reviewed_b) - 1) < 0.05
    wait_low, wait_high = spread([x.mean_wait_min - y.mean_wait_min for x, y in zip(a, b, strict=True)])
    assert wait_low < 0 < wait_high


def test_higher_priority_items_are_served_first():
    # The low-priority queue sorts first by slug, so only priority can put "b-high" ahead.
    low = QueueSpec("a-low", 2.0, capacity=40, priority_mix=(1.0, 0.0, 0.0))
    high = QueueSpec("b-high", 2.0, capacity=40, priority_mix=(0.0, 0.0, 1.0))
    summary = run_multi_replications(two(low, high, review_per_min=3.0, reviewers=2), 20, seed=5).to_dict()
    q = summary["queues"]
    assert q["b-high"]["mean_wait_min_ci95"][1] < q["a-low"]["mean_wait_min_ci95"][0]
    assert q["b-high"]["mean_wait_min"] < 0.5 * q["a-low"]["mean_wait_min"]
    assert q["b-high"]["overflow_pct"] < q["a-low"]["overflow_pct"]


def test_adding_a_heavy_queue_raises_the_others_waits():
    ms = two(QueueSpec("a", 1.0, capacity=40), QueueSpec("b", 1.0, capacity=40), review_per_min=3.0, reviewers=2)
    d = what_if_added(ms, QueueSpec("heavy", 2.5, capacity=40), replications=20, seed=2)
    assert set(d["changes"]) == {"a", "b"}
    for slug in ("a", "b"):
        before, after = d["changes"][slug]["mean_wait_min"]
        assert after > 2 * before
        assert (
            d["without"]["queues"][slug]["mean_wait_min_ci95"][1] < d["with"]["queues"][slug]["mean_wait_min_ci95"][0]
        )
        p95_before, p95_after = d["changes"][slug]["p95_wait_min"]
        assert p95_after > p95_before
    assert d["utilisation"][1] > d["utilisation"][0]
    assert "heavy" not in d["without"]["queues"]
    assert "heavy" in d["with"]["queues"]


def test_without_and_with_share_their_seeds():
    # Adding a queue that never produces changes nothing for the others.
    ms = two(QueueSpec("a", 1.5, capacity=20), QueueSpec("b", 1.5, capacity=20), review_per_min=3.0, reviewers=2)
    d = what_if_added(ms, QueueSpec("silent", 0.0, capacity=20), replications=5, seed=9)
    for slug in ("a", "b"):
        for before, after in d["changes"][slug].values():
            assert before == after


def test_each_queue_keeps_its_own_backpressure():
    # Same load on both; only "tight" has watermarks the load reaches.
    tight = QueueSpec("tight", 1.75, capacity=12, high_watermark=0.5, low_watermark=0.25)
    roomy = QueueSpec("roomy", 1.75, capacity=400)
    off = QueueSpec("off", 1.75, capacity=12, high_watermark=0.5, low_watermark=0.25, backpressure=False)
    ms = MultiScenario((tight, roomy, off), review_per_min=5.0, reviewers=2, base=STEADY)
    for seed in replication_seeds(4, 10):
        r = simulate_multi(ms, seed).queues
        assert r["tight"].max_depth <= 12
        assert r["off"].max_depth <= 12
        assert r["roomy"].max_depth < 0.8 * 400
        assert r["roomy"].mode_minutes["draft"] == 0 and r["roomy"].drafts == 0
        assert r["off"].mode_minutes["draft"] == 0 and r["off"].drafts == 0
    summary = run_multi_replications(ms, 10, seed=4).to_dict()["queues"]
    assert summary["tight"]["time_in_draft_min"] > 5
    assert sum(r.queues["tight"].drafts for r in run_multi_replications(ms, 10, seed=4).runs) > 0


def test_the_pool_serves_the_queue_policy_next_queue_picks(monkeypatch):
    ms = two(QueueSpec("a", 2.0, capacity=40), QueueSpec("b", 2.0, capacity=40), review_per_min=3.0, reviewers=2)
    calls = []
    real = policy.next_queue

    def spy(heads):
        heads = list(heads)
        calls.append([h.slug for h in heads])
        return real(heads)

    monkeypatch.setattr(policy, "next_queue", spy)
    fair = run_multi_replications(ms, 10, seed=1).to_dict()["queues"]
    assert calls and all(slugs == ["a", "b"] for slugs in calls)

    def b_first(heads):
        waiting = [h.slug for h in heads if h.waiting]
        return "b" if "b" in waiting else (waiting[0] if waiting else None)

    monkeypatch.setattr(policy, "next_queue", b_first)
    biased = run_multi_replications(ms, 10, seed=1).to_dict()["queues"]
    assert biased["b"]["mean_wait_min"] < 0.5 * fair["b"]["mean_wait_min"]
    assert biased["a"]["mean_wait_min"] > fair["a"]["mean_wait_min"]


def test_a_serving_rule_naming_an_empty_queue_is_an_error(monkeypatch):
    ms = two(QueueSpec("a", 1.0), QueueSpec("b", 0.0), review_per_min=3.0)
    monkeypatch.setattr(policy, "next_queue", lambda heads: "b" if any(h.waiting for h in heads) else None)
    with pytest.raises(RuntimeError, match="'b'"):
        simulate_multi(ms, 0)


def test_utilisation_is_the_load_when_review_keeps_up():
    ms = two(QueueSpec("a", 0.5), QueueSpec("b", 0.5), review_per_min=3.0, reviewers=2)
    d = run_multi_replications(ms, 30, seed=6).to_dict()
    low, high = d["utilisation_ci95"]
    assert low < 1 / 3 < high
    assert all(q["overflow_pct"] == 0 for q in d["queues"].values())


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"queues": ()}, "queues"),
        ({"queues": (QueueSpec("a", 1.0), QueueSpec("a", 2.0))}, "queues"),
        ({"queues": (QueueSpec("a", 1.0),), "reviewers": 0}, "reviewers"),
        ({"queues": (QueueSpec("a", 1.0),), "model": "fluid"}, "model"),
        ({"queues": (QueueSpec("a", 1.0),), "base": Scenario(reviewer_error=0.1)}, "base"),
        ({"queues": (QueueSpec("a", 1.0, capacity=0),)}, "capacity"),
        ({"queues": (QueueSpec("a", -1.0),)}, "production_per_min"),
    ],
)
def test_bad_scenarios_are_refused(kwargs, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        MultiScenario(**kwargs)


def test_queue_spec_checks_its_slug():
    with pytest.raises(policy.PolicyError):
        QueueSpec("Support Team", 1.0)


# --- command line ---------------------------------------------------------------


def test_cli_queues_json(capsys):
    code = main(
        [
            "queues",
            "--queue",
            "support:1.5:20",
            "--queue",
            "billing:1:30",
            "--review-per-min",
            "3",
            "--reviewers",
            "2",
            "--replications",
            "3",
            "--json",
        ]
    )
    assert code == 0
    d = json.loads(capsys.readouterr().out)
    assert list(d["queues"]) == ["support", "billing"]
    assert d["scenario"]["queues"][1] == {
        "slug": "billing",
        "production_per_min": 1.0,
        "capacity": 30,
        "high_watermark": 0.8,
        "low_watermark": 0.3,
        "priority_mix": [0.3, 0.5, 0.2],
        "backpressure": True,
        "initial_ages_min": [],  # no backlog: the queue starts empty
    }
    for q in d["queues"].values():
        for key in ("arrived", "lost", "overflow_pct", "mean_wait_min", "p95_wait_min", "time_in_draft_min"):
            assert key in q
    assert 0 < d["utilisation"] <= 1


def test_cli_queues_add_compares_side_by_side(capsys):
    argv = ["queues", "--queue", "support:1.5:20", "--review-per-min", "3", "--replications", "3"]
    assert main([*argv, "--add", "batch:2:20"]) == 0
    text = capsys.readouterr().out
    assert "without -> with queue 'batch'" in text
    assert "support" in text and "->" in text
    assert main([*argv, "--add", "batch:2:20", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["changes"]) == {"support"}
    assert d["changes"]["support"]["mean_wait_min"][1] > d["changes"]["support"]["mean_wait_min"][0]


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("support", "NAME:RATE:CAPACITY"),
        ("support:1:2:3", "NAME:RATE:CAPACITY"),
        ("support:fast:20", "'fast' is not a number"),
        ("support:-1:20", "rate must be"),
        ("support:nan:20", "rate must be"),
        ("support:1:big", "'big' is not a whole number"),
        ("support:1:0", "capacity must be at least 1"),
        ("Support:1:20", "lowercase"),
        (":1:20", "lowercase"),
    ],
)
def test_cli_malformed_queue_names_the_value(capsys, value, says):
    with pytest.raises(SystemExit) as exc:
        main(["queues", "--queue", value, "--review-per-min", "3"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --queue" in err
    assert repr(value) in err
    assert says in err


def test_cli_refuses_a_queue_twice_and_an_added_queue_already_there(capsys):
    with pytest.raises(SystemExit):
        main(["queues", "--queue", "a:1:5", "--queue", "a:2:5", "--review-per-min", "3"])
    assert "'a' is given more than once" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["queues", "--queue", "a:1:5", "--add", "a:2:5", "--review-per-min", "3"])
    assert "'a' is already one of the queues" in capsys.readouterr().err


def test_cli_value_errors_are_reported_not_raised(capsys):
    assert main(["queues", "--queue", "a:1:5", "--review-per-min", "3", "--reviewers", "0"]) == 2
    assert "reviewers" in capsys.readouterr().err
