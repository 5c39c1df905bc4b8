"""The demo's default load: stressed, yet one reviewer sees draft mode come and go."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from simulation.cli import main
from simulation.demo_load import DemoLoad, judge

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dev() -> ModuleType:
    """``dev.py`` loaded as a module, for its demo defaults and its wave timer."""
    spec = importlib.util.spec_from_file_location("dev_script", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dev_py_uses_the_load_the_model_checked(dev: ModuleType) -> None:
    load = DemoLoad()
    assert dev.DEMO_LOAD_DEFAULTS == {
        "DEMO_ROUND_SECONDS": load.round_seconds,
        "DEMO_BUSY_MINUTES": load.busy_minutes,
        "DEMO_QUIET_MINUTES": load.quiet_minutes,
        "DEMO_BATCH": load.batch,
    }


def test_the_default_wave_is_stressed_but_recoverable() -> None:
    verdict = judge(DemoLoad(), seeds=100)
    assert verdict.busy_ratio > 2
    assert verdict.wave_ratio < 1
    assert verdict.draft_share >= 0.8
    assert verdict.recovered_share >= 0.8
    assert verdict.lossless_share >= 0.95
    assert verdict.draft_at_median is not None and verdict.draft_at_median < 10


def test_the_old_steady_load_never_recovers() -> None:
    # A round every 30 s without pause, as the demo used to run: overloaded for good.
    old = dataclasses.replace(DemoLoad(), round_seconds=30, busy_minutes=30, quiet_minutes=0.001)
    verdict = judge(old, seeds=20)
    assert verdict.draft_share == 1.0
    assert verdict.recovered_share == 0.0
    assert verdict.lossless_share == 0.0
    assert verdict.draft_at_median is not None and verdict.draft_at_median < 5


def test_the_cli_reports_the_wave(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo-load", "--seeds", "20", "--review-per-min", "2"]) == 0
    out = capsys.readouterr().out
    assert "draft mode arrives in" in out and "recedes in" in out


def test_the_waves_submit_rounds_only_while_busy(dev: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    started: list[list[str]] = []

    class FakeProcess:
        def __init__(self, command: list[str], **kwargs: Any) -> None:
            started.append(command)

        def poll(self) -> int:
            return 0

    monkeypatch.setattr(dev.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(dev.subprocess, "Popen", FakeProcess)
    load = {"DEMO_ROUND_SECONDS": 40.0, "DEMO_BUSY_MINUTES": 2.0, "DEMO_QUIET_MINUTES": 3.0, "DEMO_BATCH": 1.0}
    waves = dev.Waves(load, [sys.executable, "manage.py"], {})
    for second in range(600):  # two 5-minute waves, one tick a second
        now[0] = float(second)
        waves.tick()
    # Rounds at 0, 40, 80 s of each wave (120 s busy), none in the quiet part.
    assert len(started) == 6
    assert all(cmd[-4:] == ["--repeat", "1", "--batch", "1"] for cmd in started)


@pytest.mark.slow
@pytest.mark.parametrize("draft", [False, True])
def test_the_model_counts_the_cut_offs_the_built_in_suite_really_makes(draft: bool) -> None:
    # The demo's numbers were chosen on these counts: a task added to the
    # suite changes the load, and this keeps the model from drifting from it.
    from loops.agents import make_agent
    from loops.runner import LoopConfig, run_task
    from loops.spec import builtin_suite

    cut_off = sum(
        not run_task(task, make_agent("scripted", task=task), LoopConfig(draft=draft)).converged
        for task in builtin_suite()
    )
    load = DemoLoad()
    assert cut_off == (load.cut_off_draft if draft else load.cut_off_normal)
