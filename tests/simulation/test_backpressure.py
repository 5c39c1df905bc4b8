"""Backpressure on: the queue's own policy functions decide modes and shedding."""

import dataclasses

import pytest

import simulation.model
from reviewqueue import policy
from simulation import PRESETS, Scenario, run_replications, simulate


def _b(model: str, backpressure: bool, **changes: object) -> Scenario:
    """Preset B with the model, backpressure and any other field changed."""
    return dataclasses.replace(PRESETS["B"], model=model, backpressure=backpressure, **changes)


@pytest.mark.parametrize("model", ["article", "poisson"])
def test_it_calls_the_live_policy_functions(model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"plan_admission": 0, "next_mode": 0, "tune_step_limit": 0}

    def spy(name: str):
        real = getattr(policy, name)

        def wrapper(*args: object, **kwargs: object) -> object:
            calls[name] += 1
            return real(*args, **kwargs)

        return wrapper

    for name in calls:
        monkeypatch.setattr(simulation.model, name, spy(name))
    run = simulate(_b(model, True), seed=2)
    assert calls["plan_admission"] == run.arrived
    assert calls["next_mode"] == run.reviewed
    assert calls["tune_step_limit"] > 0


@pytest.mark.parametrize("model", ["article", "poisson"])
def test_it_sheds_the_lowest_priority_first(model: str) -> None:
    on = run_replications(_b(model, True), 40, seed=1, workers=1).to_dict()["shed_by_priority"]
    off = run_replications(_b(model, False), 40, seed=1, workers=1).to_dict()["shed_by_priority"]
    # Off drops whatever arrives at a full queue, roughly in proportion to the mix.
    assert off["2"] > 0 and off["0"] < off["1"]
    # On, the top priority is never lost while lower ones are waiting to be shed.
    assert on["2"] == 0
    assert on["0"] > off["0"]


@pytest.mark.parametrize("model", ["article", "poisson"])
@pytest.mark.parametrize("verdicts", ["article", "step_aware"])
def test_it_accounts_for_every_output(model: str, verdicts: str) -> None:
    sc = _b(model, True, verdict_model=verdicts, production_per_min=12.0)
    for seed in range(5):
        r = simulate(sc, seed)
        in_queue_at_end = r.depth_series[-1]
        assert r.produced == r.auto_passed + r.arrived
        assert r.arrived == r.reviewed + r.dropped + in_queue_at_end
        assert sum(r.lost_by_priority) == r.dropped


def test_it_spends_time_in_draft_only_with_backpressure_on() -> None:
    on = simulate(_b("poisson", True), seed=3)
    off = simulate(_b("poisson", False), seed=3)
    assert on.mode_minutes["draft"] > 0 and on.drafts > 0
    assert off.mode_minutes["draft"] == off.mode_minutes["shedding"] == 0 and off.drafts == 0
    assert sum(on.mode_minutes.values()) == pytest.approx(120)


def test_it_stays_in_draft_until_the_queue_drains_below_the_low_watermark() -> None:
    # One huge burst fills the queue at once; 1 in and 3 out a minute then drains it.
    sc = dataclasses.replace(
        PRESETS["A"],
        production_per_min=1.0,
        burst_mult=60.0,
        burst_prob=0.02,
        backpressure=True,
        duration_min=60,
    )
    one_burst = sc.duration_min + 59
    run = next(r for r in (simulate(sc, seed) for seed in range(300)) if r.arrived == one_burst)
    depth = run.depth_series
    high, low = sc.high_watermark * sc.capacity, sc.low_watermark * sc.capacity
    entered = next(i for i, d in enumerate(depth) if d > high)
    left = next(i for i in range(entered, len(depth)) if depth[i] < low)
    # Between the watermarks the mode holds (hysteresis): draft lasts from the fill
    # until the end-of-minute depth first drops below the low watermark.
    assert any(low <= d <= high for d in depth[entered:left])
    draft_time = run.mode_minutes["draft"] + run.mode_minutes["shedding"]
    assert draft_time == left - entered
