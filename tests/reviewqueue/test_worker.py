"""A real Celery worker process: loops run through the broker, and a worker
killed with SIGKILL mid-loop loses nothing and duplicates nothing.

Runs against Redis when REDIS_URL is set, else the embedded SQLite broker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from django.db import connection

from loops.tasks import builtin_suite
from reviewqueue.models import LoopRun, ReviewItem

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SUITE = {task.id: task for task in builtin_suite()}
# An external "agent" that takes a second per attempt and never satisfies the
# hidden check, so a loop lasts several seconds: long enough to kill mid-loop.
SLOW_AGENT = f"{sys.executable} -c \"import sys, time; sys.stdin.read(); time.sleep(1); print('def to_bin(n): return bin(n)[2:]')\""


def database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{db['USER']}@{host}:{port}/{db['NAME']}"


@pytest.fixture
def broker_url(tmp_path: Path) -> Iterator[str]:
    redis_url = os.environ.get("REDIS_URL")
    if redis_url:
        import redis

        # A database of its own (TEST_REDIS_DB, default 14), flushed before and after.
        url = redis_url.rsplit("/", 1)[0] + "/" + os.environ.get("TEST_REDIS_DB", "14")
        redis.Redis.from_url(url).flushdb()
        yield url
        redis.Redis.from_url(url).flushdb()
    else:
        yield f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"


@pytest.fixture
def start_worker(broker_url: str, tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen]]:
    workers: list[subprocess.Popen] = []

    def start(concurrency: int = 1) -> subprocess.Popen:
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "CELERY_BROKER_URL": broker_url,
            "CELERY_VISIBILITY_TIMEOUT": "30",
            "CELERY_TASK_SOFT_TIME_LIMIT": "20",
            "CELERY_TASK_TIME_LIMIT": "25",
            "LOG_LEVEL": "WARNING",
        }
        log = open(tmp_path / f"worker{len(workers)}.log", "w")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "reviewqueue.celery",
                "worker",
                "--pool=prefork",
                f"--concurrency={concurrency}",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-n",
                f"test{len(workers)}@%h",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        workers.append(proc)
        return proc

    yield start
    for proc in workers:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def sender(broker_url: str) -> Celery:
    return Celery("sender", broker=broker_url)


def send(app: Celery, task_id: str, run_id: str, **kwargs: Any) -> None:
    app.send_task("reviewqueue.tasks.run_loop", kwargs={"task": SUITE[task_id].to_dict(), "run_id": run_id, **kwargs})


def wait_for(predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError("timed out waiting for the worker")


def children(pid: int) -> list[int]:
    ps = ["ps", "-o", "pid=", "--ppid", str(pid)]
    out = subprocess.run(ps, check=False, capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def finished(*run_ids: str) -> bool:
    return LoopRun.objects.filter(run_id__in=run_ids).exclude(outcome="running").count() == len(run_ids)


def test_a_real_worker_runs_the_suite_through_the_broker(start_worker: Any, broker_url: str) -> None:
    start_worker(concurrency=2)
    app = sender(broker_url)
    ids = ["is_even", "to_bin", "release_note"]
    for task_id in ids:
        send(app, task_id, run_id=f"suite-{task_id}")
    wait_for(lambda: finished(*(f"suite-{t}" for t in ids)))
    outcomes = dict(LoopRun.objects.values_list("task_id", "outcome"))
    assert outcomes == {"is_even": "auto_passed", "to_bin": "enqueued", "release_note": "enqueued"}
    assert ReviewItem.objects.count() == 2


def test_a_worker_child_killed_mid_loop_is_redelivered_without_loss_or_duplicate(
    start_worker: Any, broker_url: str
) -> None:
    worker = start_worker(concurrency=1)
    send(sender(broker_url), "to_bin", run_id="kill-1", agent="command", agent_options={"command": SLOW_AGENT})
    wait_for(lambda: LoopRun.objects.filter(run_id="kill-1", deliveries=1).exists())
    time.sleep(1.5)  # into the second attempt
    assert LoopRun.objects.get(run_id="kill-1").outcome == "running"
    killed = children(worker.pid)
    assert killed, "the prefork pool has a child process"
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: finished("kill-1"), timeout=90)
    run = LoopRun.objects.get(run_id="kill-1")
    print(f"\nkilled pool child {killed}: deliveries={run.deliveries}, outcome={run.outcome}")
    assert run.deliveries >= 2
    assert run.outcome == "enqueued"
    assert ReviewItem.objects.filter(source_run_id="kill-1").count() == 1
