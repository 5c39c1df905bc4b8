"""Cost of one demand red-line run: the sandboxed, call-by-value red line
against the old single-process harness (kept under tests/ as the baseline),
on the built-in suite's tasks with checks, in interleaved rounds.

    .venv/bin/python bench/bench_redline.py [--rounds 10]

Each round runs every task's replayed attempts through both sides, in
alternating order; the figure is the ratio of medians per run (target <= 1.5).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from loops import sandbox
from loops.agents import load_replay
from loops.redline import extract_code, run_checks
from loops.spec import builtin_suite
from tests.loops.legacy_harness import run_checks as legacy_run_checks


def cases() -> list[tuple[str, str, tuple]]:
    """(task id, candidate, checks) for every replayed attempt of a task with checks."""
    out = []
    for task in builtin_suite():
        if not task.checks:
            continue
        replay = load_replay(ROOT / "loops" / "replays" / f"{task.id}.yaml")
        out.extend((task.id, extract_code(a), task.checks) for a in replay.attempts)
    return out


def timed(run: Callable[..., object], candidate: str, checks: tuple) -> float:
    started = time.perf_counter()
    run(candidate, checks)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    status = sandbox.status()
    if not status.sandboxed:
        sys.exit(f"the red line is not sandboxed here: {status.reason}")
    work = cases()
    new: list[float] = []
    old: list[float] = []
    # Warm-up: the probe and the page cache.
    for _, candidate, checks in work[:2]:
        run_checks(candidate, checks)
        legacy_run_checks(candidate, checks)
    for round_no in range(args.rounds):
        for _, candidate, checks in work:
            if round_no % 2:
                new.append(timed(run_checks, candidate, checks))
                old.append(timed(legacy_run_checks, candidate, checks))
            else:
                old.append(timed(legacy_run_checks, candidate, checks))
                new.append(timed(run_checks, candidate, checks))
    new_ms, old_ms = statistics.median(new) * 1000, statistics.median(old) * 1000
    ratio = new_ms / old_ms
    print(f"red-line runs: {len(work)} attempts over {len({c[0] for c in work})} tasks x {args.rounds} rounds")
    print(f"  sandboxed, call-by-value  median {new_ms:6.1f} ms per run  (p90 {_p90(new) * 1000:6.1f})")
    print(f"  old single process        median {old_ms:6.1f} ms per run  (p90 {_p90(old) * 1000:6.1f})")
    print(f"  ratio sandboxed / old     {ratio:.2f}  (target <= 1.5: {'met' if ratio <= 1.5 else 'NOT met'})")


def _p90(values: list[float]) -> float:
    return sorted(values)[int(0.9 * (len(values) - 1))]


if __name__ == "__main__":
    main()
