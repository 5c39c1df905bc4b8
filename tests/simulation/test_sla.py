"""The SLA and the age watermark in the capacity model: the same policy
rule as the live queue, and the SLA figures the CLI reports."""

from __future__ import annotations

import dataclasses
import json

import pytest

from simulation.cli import main
from simulation.model import simulate
from simulation.scenario import PRESETS, Scenario

# A slow reviewer and a trickle of arrivals: depth never nears the depth watermark (40 of 50).
SLOW = Scenario(model="poisson", production_per_min=0.5, review_per_min=0.45, backpressure=True, duration_min=240)


def test_the_age_watermark_turns_on_draft_with_depth_far_below_the_depth_watermark() -> None:
    aged = dataclasses.replace(SLOW, age_high_minutes=10, age_low_minutes=3)
    run = simulate(aged, seed=3)
    assert run.first_draft_min is not None
    assert run.first_draft_depth is not None
    assert run.first_draft_depth < 0.5 * aged.capacity * aged.high_watermark
    assert run.mode_minutes["draft"] > 0


def test_without_the_age_watermark_the_same_run_stays_normal() -> None:
    run = simulate(SLOW, seed=3)
    assert run.first_draft_min is None
    assert run.mode_minutes["draft"] == 0


def test_the_cli_reports_sla_attainment_and_p95_wait(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--preset", "B", "--sla-minutes", "30", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert 0 <= out["sla_attainment"] <= 1
    assert out["p95_wait_min"] > 0
    assert out["sla_minutes"] == 30


def test_a_tighter_sla_is_met_less_often(capsys: pytest.CaptureFixture[str]) -> None:
    main(["run", "--preset", "D", "--sla-minutes", "60", "--json"])
    loose = json.loads(capsys.readouterr().out)["sla_attainment"]
    main(["run", "--preset", "D", "--sla-minutes", "5", "--json"])
    tight = json.loads(capsys.readouterr().out)["sla_attainment"]
    assert tight < loose


def test_without_sla_minutes_there_is_no_sla_key(capsys: pytest.CaptureFixture[str]) -> None:
    main(["run", "--preset", "A", "--json"])
    assert "sla_attainment" not in json.loads(capsys.readouterr().out)


def test_forecast_check_prints_within_25pct(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["forecast-check", "--replications", "20", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert 0 <= out["within_25pct"] <= 1
    assert out["replications"] == 20


def test_presets_keep_their_answers_without_the_new_fields() -> None:
    assert PRESETS["B"].sla_minutes == 0 and PRESETS["B"].watermarks().age_high is None
