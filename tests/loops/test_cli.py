"""The ``python -m loops`` command line: running a task file, the suite, and
routing to the bench."""

from __future__ import annotations

import io
import json
import sys
import types
from pathlib import Path

import pytest
import yaml

from loops.__main__ import main


def test_it_runs_a_task_file_and_shows_each_step(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump([{"id": "poem", "description": "Write a poem.", "kind": "open"}]))
    out = io.StringIO()

    code = main(["run", str(path), "--agent", "scripted", "--step-limit", "3"], out)

    text = out.getvalue()
    assert code == 0
    assert "step 3/3" in text and "step 4" not in text
    assert "UNVERIFIED, cut off: step_limit" in text


def test_it_runs_the_suite_and_reports_no_false_stops() -> None:
    out = io.StringIO()

    assert main(["suite", "--json"], out) == 0

    groups = {g["group"]: g for g in json.loads(out.getvalue())["groups"]}
    assert groups["repairable"]["false_stops"] == 0
    assert groups["repairable"]["converged"] == groups["repairable"]["tasks"]
    assert set(groups["conceptual"]["guards"]) <= {"stuck", "oscillation"}
    assert set(groups["open"]["guards"]) == {"step_limit"}


def test_it_routes_bench_to_the_bench_module(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    fake = types.ModuleType("loops.bench")
    fake.main = lambda argv: seen.append(argv) or 7  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "loops.bench", fake)

    assert main(["bench", "stop-rules", "--sigma", "0.1", "--json"]) == 7
    assert seen == [["stop-rules", "--sigma", "0.1", "--json"]]


def test_it_reports_a_missing_task_file_as_an_error(tmp_path: Path) -> None:
    assert main(["run", str(tmp_path / "missing.yaml")], io.StringIO()) == 2
