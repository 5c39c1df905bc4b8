"""The benches keep running: a smoke run of every bench at small sizes.

The benches write rows with raw SQL beside the services, so a new not-null
column breaks them without any other test noticing. They need PostgreSQL,
so this runs in the PostgreSQL configuration (the README's test command
with DATABASE_URL set, as CI runs it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="the benches run on PostgreSQL; this runs in the PostgreSQL configuration",
    ),
]


def test_every_bench_runs_at_small_sizes(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BENCH_PLANS_DIR": str(tmp_path)}  # the committed plans stay
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
    assert summary.count(" ok ") == 11, summary
