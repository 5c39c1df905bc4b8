"""The benches keep running: a smoke run of every bench at small sizes.

The benches write rows with raw SQL beside the services, so a new not-null
column breaks them without any other test noticing. They need PostgreSQL,
so this runs in the PostgreSQL configuration (the README's test command
with DATABASE_URL set, as CI runs it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.slow,
    # Every bench at small sizes, one after another: longer than the suite's per-test limit.
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        not os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="the benches run on PostgreSQL; this runs in the PostgreSQL configuration",
    ),
]


def test_every_bench_runs_at_small_sizes(tmp_path: Path) -> None:
    # The committed plans and results stay as they are: this run writes its own.
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "BENCH_PLANS_DIR": str(tmp_path),
        "BENCH_RESULTS_DIR": str(tmp_path / "results"),
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run_all.py"), "--quick"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    summary = done.stdout[done.stdout.rfind("=== summary") :]
    assert done.returncode == 0, summary or done.stderr[-3000:]
    assert summary.count(" ok ") == 15, summary
    # The many-queue benches measured their ratios; whether a goal was met is theirs to report.
    admit = json.loads((tmp_path / "results" / "queues_admit.json").read_text())
    assert admit["ratio"] > 0 and admit["two_vs_one_queue"] > 0
    assert set(admit["median_per_s"]) == {"two queues", "one queue", "prepared INSERT"}
    assert admit["one_statement_share"] > 0
    scale = json.loads((tmp_path / "results" / "queues_scale.json").read_text())
    assert scale["queues"] == 100
    assert set(scale["ratios"]) == {"claim", "review_page", "decide", "dashboard"}
    assert all(ratio > 0 for ratio in scale["ratios"].values())
