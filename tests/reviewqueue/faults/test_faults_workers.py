"""Faults on real workers: 200 loops through a private Redis broker while
pool children and main worker processes are SIGKILLed, and the embedded
broker's recovery path after a lost worker.

Both tests start their own broker, so they run (not skip) in every
configuration: against the test database, PostgreSQL or SQLite.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from django.db.models import Count, Sum

from reviewqueue.models import LoopRun, ReviewItem
from reviewqueue.services.runs import submit_loop

from ..worker_helpers import (
    SUITE,
    Workers,
    children,
    finished,
    private_redis,
    publishing_to,
    resubmit_stale,
    slow_agent,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

RUNS = int(os.environ.get("REVIEWQUEUE_FAULT_RUNS", "200"))
KILLS_OF_EACH = 10
# Redelivery after a main-process kill waits out the visibility timeout, so it
# is short here; the hard time limit stays below it (see docs/FAULTS.md).
VISIBILITY_TIMEOUT = 15
SOFT_TIME_LIMIT = 8
HARD_TIME_LIMIT = 10
WORKER_ENV = {
    "CELERY_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT),
    "CELERY_TASK_SOFT_TIME_LIMIT": str(SOFT_TIME_LIMIT),
    "CELERY_TASK_TIME_LIMIT": str(HARD_TIME_LIMIT),
}
# One run in five uses a command agent that takes 0.4 s an attempt, so a kill
# usually lands in the middle of a loop rather than between two.
SLOW = slow_agent(0.4)
# kombu sweeps for unacknowledged messages of dead workers only every
# interval x throttle seconds (10 x 10 by default): sweep every 5 s instead.
RESTORE_SWEEP = {"unacked_restore_interval": 5, "unacked_restore_throttle": 1}
SETTLED = {LoopRun.Outcome.AUTO_PASSED, LoopRun.Outcome.ENQUEUED, LoopRun.Outcome.SHED}


def submit_mix(count: int, prefix: str) -> list[str]:
    """Submit ``count`` runs cycling through the built-in suite; every fifth is slow."""
    tasks = itertools.cycle(SUITE.values())
    run_ids = []
    for n in range(count):
        run_id = f"{prefix}-{n:03d}"
        if n % 5 == 4:
            submit_loop(task=SUITE["to_bin"].to_dict(), run_id=run_id, agent="command", agent_options={"command": SLOW})
        else:
            submit_loop(task=next(tasks).to_dict(), run_id=run_id)
        run_ids.append(run_id)
    return run_ids


def kill_child(worker: subprocess.Popen, rng: random.Random) -> bool:
    """SIGKILL one pool child of a worker; False if the pool has none right now."""
    pool = children(worker.pid)
    if not pool:
        return False
    os.kill(rng.choice(pool), signal.SIGKILL)
    return True


def test_it_finishes_every_run_exactly_once_while_workers_are_killed(tmp_path: Path) -> None:
    rng = random.Random(8)
    started = time.monotonic()
    with private_redis(tmp_path) as redis, publishing_to(redis.url):
        workers = Workers(redis.url, tmp_path, transport_options=RESTORE_SWEEP, **WORKER_ENV)
        try:
            live = [workers.start(concurrency=2), workers.start(concurrency=2)]
            run_ids = submit_mix(RUNS, "fault")
            wait_for(lambda: LoopRun.objects.filter(deliveries__gt=0).exists(), what="the first loop to start")

            kills: Counter[str] = Counter()
            for n in range(2 * KILLS_OF_EACH):
                time.sleep(1.5)
                slot = n // 2 % 2
                if n % 2 == 0:
                    # A pool child: the main process sees it die and requeues its task.
                    while not kill_child(live[slot], rng):
                        time.sleep(0.2)
                    kills["pool child"] += 1
                else:
                    # The main process: its unacked messages come back after the
                    # visibility timeout. Orphaned children are left to finish.
                    os.kill(live[slot].pid, signal.SIGKILL)
                    live[slot].wait(timeout=10)
                    kills["main process"] += 1
                    live[slot] = workers.start(concurrency=2)
            kills_done = time.monotonic() - started

            try:
                wait_for(lambda: finished(*run_ids), timeout=VISIBILITY_TIMEOUT + 30, what="redelivery")
                resubmitted = 0
            except AssertionError:
                # Anything whose message is gone for good: the periodic task's job.
                resubmitted = resubmit_stale(redis.url, stale_seconds=HARD_TIME_LIMIT)
                wait_for(lambda: finished(*run_ids), timeout=60, what="resubmitted runs")
        finally:
            workers.kill_all()

    runs = LoopRun.objects.filter(run_id__in=run_ids)
    outcomes = Counter(runs.values_list("outcome", flat=True))
    deliveries = runs.aggregate(total=Sum("deliveries"))["total"]
    print(
        f"\n{RUNS} runs, kills {dict(kills)} (done after {kills_done:.0f} s), outcomes {dict(outcomes)}, "
        f"redeliveries {deliveries - RUNS}, resubmitted stale {resubmitted}, "
        f"wall time {time.monotonic() - started:.0f} s"
    )
    assert kills == {"pool child": KILLS_OF_EACH, "main process": KILLS_OF_EACH}
    assert runs.count() == RUNS, "a run was lost"
    assert set(outcomes) <= SETTLED, outcomes
    assert not runs.filter(outcome=LoopRun.Outcome.RUNNING).exists()
    assert not runs.filter(finished_at=None).exists()
    assert deliveries > RUNS, "some kill should have cut a loop short"
    # Exactly once in effect: one item per run, and the books balance.
    per_run = ReviewItem.objects.values("source_run_id").annotate(n=Count("id")).filter(n__gt=1)
    assert not per_run.exists(), list(per_run)
    sampled = runs.filter(outcome=LoopRun.Outcome.AUTO_PASSED, sampled=True).count()  # audited auto-passes
    assert ReviewItem.objects.count() == outcomes["enqueued"] + outcomes["shed"] + sampled
    assert not runs.filter(outcome__in=["enqueued", "shed"], item=None).exists()
    assert runs.count() == outcomes["auto_passed"] + outcomes["enqueued"] + outcomes["shed"]


def test_it_recovers_runs_lost_with_an_embedded_broker_worker_by_resubmitting_them(tmp_path: Path) -> None:
    # kombu's SQLAlchemy transport marks a fetched message invisible and keeps
    # it only in the worker's memory: a worker killed outright takes it along.
    broker = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    workers = Workers(broker, tmp_path, **WORKER_ENV)
    try:
        first = workers.start(concurrency=1)
        with publishing_to(broker):
            submit_loop(
                task=SUITE["to_bin"].to_dict(), run_id="lost-1", agent="command", agent_options={"command": SLOW}
            )
        wait_for(lambda: LoopRun.objects.filter(run_id="lost-1", deliveries=1).exists())
        os.killpg(first.pid, signal.SIGKILL)  # the whole worker, pool included
        first.wait(timeout=10)
        workers.start(concurrency=1)
        time.sleep(3)
        assert LoopRun.objects.get(run_id="lost-1").outcome == LoopRun.Outcome.RUNNING
        assert resubmit_stale(broker, stale_seconds=0) == 1
        wait_for(lambda: finished("lost-1"), timeout=60)
    finally:
        workers.kill_all()
    run = LoopRun.objects.get(run_id="lost-1")
    print(f"\nembedded broker: deliveries={run.deliveries}, outcome={run.outcome}")
    assert run.deliveries == 2
    assert run.outcome == LoopRun.Outcome.ENQUEUED
    assert ReviewItem.objects.filter(source_run_id="lost-1").count() == 1
