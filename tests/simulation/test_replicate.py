"""Replications: seeds, parallel runs, progress, the JSON summary and the
capacity recommendation."""

import dataclasses
import json
import multiprocessing

import pytest

from simulation import PRESETS, recommend_max_production, run_replications

CONTRACT = {
    "arrived",
    "dropped",
    "overflow_pct",
    "reviewed",
    "mean_wait_min",
    "max_depth",
    "step_limit_final",
    "overflow_pct_mean",
    "overflow_pct_ci95",
    "p95_wait_min",
    "time_in_draft_min",
    "shed_by_priority",
    "step_limit_trajectory",
    "depth_series",
    "mode_minutes",
    "mean_wait_min_ci95",
    "ratio",
    "replications",
    "seed",
    "scenario",
}


def test_it_reproduces_a_run_from_its_seed() -> None:
    first = run_replications(PRESETS["B"], 5, seed=42).to_dict()
    again = run_replications(PRESETS["B"], 5, seed=42).to_dict()
    other = run_replications(PRESETS["B"], 5, seed=43).to_dict()
    assert first == again
    assert first["overflow_pct"] != other["overflow_pct"]


def test_it_gives_the_same_answer_in_parallel() -> None:
    sc = dataclasses.replace(PRESETS["D"], model="poisson")
    serial = run_replications(sc, 24, seed=1, workers=1)
    parallel = run_replications(sc, 24, seed=1, workers=2)
    assert [r.dropped for r in serial.runs] == [r.dropped for r in parallel.runs]
    assert serial.to_dict() == parallel.to_dict()


def test_it_reports_progress_up_to_the_total() -> None:
    seen: list[tuple[int, int]] = []
    run_replications(PRESETS["A"], 30, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (30, 30)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_it_summarises_with_the_contract_keys_as_json() -> None:
    d = json.loads(json.dumps(run_replications(PRESETS["B"], 10, seed=0).to_dict()))
    assert CONTRACT <= d.keys()
    assert len(d["depth_series"]) == len(d["step_limit_trajectory"]) == 121
    lo, hi = d["overflow_pct_ci95"]
    assert lo < d["overflow_pct_mean"] < hi
    assert d["ratio"] == pytest.approx(5 / 3)
    assert set(d["mode_minutes"]) == {"normal", "draft", "shedding"}


def test_it_leaves_the_interval_empty_for_one_run() -> None:
    d = run_replications(PRESETS["B"], 1).to_dict()
    assert d["overflow_pct_ci95"] is None
    assert d["overflow_pct_mean"] == d["overflow_pct"]


def test_it_recommends_the_largest_production_within_the_target() -> None:
    sc = dataclasses.replace(PRESETS["D"], model="poisson", duration_min=60)
    best = recommend_max_production(sc, target_overflow_pct=5.0, replications=20, seed=3)

    def overflow(rate: float) -> float:
        return run_replications(dataclasses.replace(sc, production_per_min=rate), 20, seed=3).mean("overflow_pct")

    assert overflow(best) <= 5.0 < overflow(best * 1.05)


def test_it_rejects_zero_replications() -> None:
    with pytest.raises(ValueError, match="replications"):
        run_replications(PRESETS["A"], 0)


def _overflow_in_daemon(queue: "multiprocessing.Queue[object]") -> None:
    try:
        queue.put(run_replications(PRESETS["B"], 200, seed=7).mean("overflow_pct"))
    except Exception as exc:  # noqa: BLE001 - the parent asserts on whatever happened
        queue.put(repr(exc))


def test_it_runs_a_large_batch_inside_a_daemonic_process() -> None:
    # A Celery prefork child is daemonic: a pool of its own there used to fail
    # with "daemonic processes are not allowed to have children".
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_overflow_in_daemon, args=(queue,), daemon=True)
    child.start()
    answer = queue.get(timeout=120)
    child.join(timeout=10)
    assert answer == pytest.approx(run_replications(PRESETS["B"], 200, seed=7, workers=1).mean("overflow_pct"))
