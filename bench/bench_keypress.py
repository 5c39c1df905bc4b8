"""Keypress -> next card in Chromium, on PostgreSQL and on SQLite, side by side.

    .venv/bin/python bench/bench_keypress.py [--decisions 40] [--only postgresql|sqlite] [--history N]

Runs the browser test that measures it (tests/browser/test_review_latency.py:
headless Chromium through Playwright against Django's live server; in the page,
the time from the Enter keydown to htmx swapping in the next card) twice:
with DATABASE_URL pointing at a scratch PostgreSQL server database (the test
database pytest-django makes from it is dropped afterwards), then on the
embedded SQLite default. Both runs use a private var dir and no Redis, so the
database is the only difference. Prints p50 and p95 for one reviewer and for
four reviewers deciding at once, per database; the goal is p95 < 100 ms.

``--history N`` also runs bench/keypress_history.py on PostgreSQL: one
reviewer whose own history holds N answers (seeded set-based), the same
keypress flow, p50 and p95 with the load average at the end of the run.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

import psycopg
from benchlib import ROOT, database_url, server_url
from psycopg import sql

TEST = "tests/browser/test_review_latency.py"
HISTORY_TEST = "bench/keypress_history.py"
HISTORY_LINE = re.compile(
    r"with history, 1 reviewer with (\d+) answers[^:]*: p50 (\d+) ms, p95 (\d+) ms, load ([\d.]+)"
)
LINE = re.compile(r"keypress -> next card, (\d+ reviewers?(?: at once)?)[^:]*: p50 (\d+) ms, p95 (\d+) ms")
DATABASE = "rq_bench_keypress"


def drop_test_database(name: str) -> None:
    """The test database pytest-django created, in case a failed run left it."""
    with psycopg.connect(server_url(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def measure(database: str, decisions: int) -> dict[str, tuple[int, int]]:
    """Run the latency test on one database; {who: (p50 ms, p95 ms)}."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DB_CONN_MAX_AGE")}
    env.update(
        {
            # The project first; whatever the caller's environment adds stays behind it.
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "REVIEWQUEUE_VAR_DIR": tempfile.mkdtemp(prefix="rq-bench-keypress-"),
            "REVIEWQUEUE_LATENCY_DECISIONS": str(decisions),
        }
    )
    if database == "postgresql":
        env["DATABASE_URL"] = database_url(DATABASE)
    argv = [sys.executable, "-m", "pytest", TEST, "-s", "-q", "-p", "no:cacheprovider", "-n", "0"]
    try:
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    finally:
        if database == "postgresql":
            drop_test_database(f"test_{DATABASE}")
    found = {m.group(1): (int(m.group(2)), int(m.group(3))) for m in LINE.finditer(done.stdout)}
    if done.returncode != 0 or len(found) != 2:
        raise RuntimeError(f"{TEST} on {database} failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    return found


def measure_history(history: int, decisions: int) -> tuple[int, int, float]:
    """bench/keypress_history.py on a scratch PostgreSQL database; (p50 ms, p95 ms, load average)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DB_CONN_MAX_AGE")}
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), str(ROOT / "bench"), os.environ.get("PYTHONPATH")])),
            "REVIEWQUEUE_VAR_DIR": tempfile.mkdtemp(prefix="rq-bench-keypress-"),
            "REVIEWQUEUE_LATENCY_DECISIONS": str(decisions),
            "REVIEWQUEUE_KEYPRESS_HISTORY": str(history),
            "DATABASE_URL": database_url(DATABASE),
        }
    )
    plugins = ["-p", "tests.conftest", "-p", "tests.browser.conftest"]
    argv = [sys.executable, "-m", "pytest", HISTORY_TEST, *plugins, "-s", "-q", "-p", "no:cacheprovider", "-n", "0"]
    try:
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False)
    finally:
        drop_test_database(f"test_{DATABASE}")
    found = HISTORY_LINE.search(done.stdout)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"{HISTORY_TEST} failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    return int(found.group(2)), int(found.group(3)), float(found.group(4))


def main() -> None:
    """Both databases in turn, then the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=40, help="decisions by the single reviewer")
    parser.add_argument("--only", choices=("postgresql", "sqlite"))
    parser.add_argument("--history", type=int, default=0, help="also: one reviewer with this many own answers (PG)")
    args = parser.parse_args()
    databases = [args.only] if args.only else ["postgresql", "sqlite"]
    results = {database: measure(database, args.decisions) for database in databases}
    print(
        f"keypress -> next card, headless Chromium, Django's live server, {args.decisions} decisions (goal p95 < 100 ms)"
    )
    print(f"  {'':24s}" + "".join(f"{database:>26s}" for database in databases))
    for who in next(iter(results.values())):
        cells = "".join(f"{results[d][who][0]:>7d} / {results[d][who][1]:>4d} ms p50/p95" for d in databases)
        print(f"  {who:24s}{cells}")
    if args.history:
        p50, p95, load = measure_history(args.history, args.decisions)
        print(
            f"  1 reviewer, {args.history:,} own answers (PostgreSQL): {p50} / {p95} ms p50/p95"
            f"   (load average {load:.1f})"
        )


if __name__ == "__main__":
    main()
