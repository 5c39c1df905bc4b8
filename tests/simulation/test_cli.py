"""The ``python -m simulation`` command line: JSON, replications, the table
and the plot."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simulation.cli import main


def test_it_prints_one_json_object(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--preset", "B", "--seed", "4", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["overflow_pct"] == pytest.approx(100 * d["dropped"] / d["arrived"])
    assert d["reviewed"] == 360  # 3 a minute once the queue is never empty


def test_it_adds_the_interval_with_replications(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--preset", "D", "--model", "poisson", "--replications", "20", "--json"]
    assert main(argv) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["replications"] == 20 and d["scenario"]["model"] == "poisson"
    lo, hi = d["overflow_pct_ci95"]
    assert lo <= d["overflow_pct_mean"] <= hi


def test_it_prints_a_table_and_writes_the_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "depth.png"
    assert main(["run", "--preset", "B", "--backpressure", "on", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "overflow %" in out and "backpressure" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_it_runs_as_a_module() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "simulation", "run", "--preset", "A", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(proc.stdout)["dropped"] == 0


def test_it_rejects_an_unknown_preset() -> None:
    with pytest.raises(SystemExit):
        main(["run", "--preset", "Z"])
