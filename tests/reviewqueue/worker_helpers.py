"""Shared by the worker and fault tests: real Celery worker subprocesses
against the test database, a private redis-server that a test may stop and
start, and small polling helpers.

Nothing here touches the shared services: every Redis a test stops is its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import kombu.pools
from celery import Celery
from django.db import connection

from loops.spec import builtin_suite
from reviewqueue.models import LoopRun

ROOT = Path(__file__).resolve().parents[2]
SUITE = {task.id: task for task in builtin_suite()}
# An external "agent" that takes a while per attempt and never satisfies the
# hidden check, so a loop lasts several seconds: long enough to kill mid-loop.
SLOW_AGENT = f"{sys.executable} -c \"import sys, time; sys.stdin.read(); time.sleep(1); print('def to_bin(n): return bin(n)[2:]')\""


def slow_agent(seconds: float) -> str:
    """The slow command agent with its per-attempt delay set."""
    return SLOW_AGENT.replace("time.sleep(1)", f"time.sleep({seconds})")


def database_url() -> str:
    """The test database as a DATABASE_URL a worker subprocess can use."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{db['USER']}@{host}:{port}/{db['NAME']}"


def free_port() -> int:
    """A TCP port nobody listens on right now (the kernel picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """A private, throwaway redis-server on its own port. Stopping and starting
    it again keeps the port, so clients reconnect. With ``persist`` it keeps an
    append-only file, as a production broker should, so queued messages
    survive the restart; without, a restart empties it."""

    def __init__(self, log_dir: Path, *, persist: bool = False) -> None:
        self.port = free_port()
        self.log_dir = log_dir
        self.persist = persist
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        log = open(self.log_dir / f"redis-{self.port}.log", "a")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
            + (["--appendonly", "yes", "--appendfsync", "always"] if self.persist else ["--appendonly", "no"])
            + ["--daemonize", "no", "--dir", str(self.log_dir)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        wait_for(self.ping, timeout=10, what="the private redis-server to answer")

    def ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_connect_timeout=0.5).ping())
        except redis.exceptions.ConnectionError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None


@contextlib.contextmanager
def private_redis(log_dir: Path, *, persist: bool = False) -> Iterator[RedisServer]:
    """A running private redis-server, always stopped afterwards."""
    server = RedisServer(log_dir, persist=persist)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# A worker started with extra broker transport options layered over the
# settings' (how often a worker sweeps for unacknowledged messages whose
# worker died is not an environment knob in settings.py).
WORKER_WITH_TRANSPORT_OPTIONS = (
    "import json, os, sys\n"
    "from reviewqueue.celery import app\n"
    "extra = json.loads(os.environ['TEST_BROKER_TRANSPORT_OPTIONS'])\n"
    "app.conf.broker_transport_options = {**app.conf.broker_transport_options, **extra}\n"
    "app.worker_main(['worker', *sys.argv[1:]])\n"
)


class Workers:
    """Celery worker subprocesses against the test database and one broker.
    Each worker is its own process group, so a test can kill the main process
    alone, a pool child alone, or everything at the end."""

    def __init__(
        self, broker_url: str, log_dir: Path, *, transport_options: dict[str, Any] | None = None, **env: str
    ) -> None:
        self.broker_url = broker_url
        self.log_dir = log_dir
        self.transport_options = transport_options
        self.env = {
            "CELERY_VISIBILITY_TIMEOUT": "30",
            "CELERY_TASK_SOFT_TIME_LIMIT": "20",
            "CELERY_TASK_TIME_LIMIT": "25",
            "LOG_LEVEL": "WARNING",
            **env,
        }
        self.procs: list[subprocess.Popen] = []

    def start(self, concurrency: int = 1) -> subprocess.Popen:
        number = len(self.procs)
        env = {**os.environ, "DATABASE_URL": database_url(), "CELERY_BROKER_URL": self.broker_url, **self.env}
        log: IO[str] = open(self.log_dir / f"worker{number}.log", "w")  # noqa: SIM115 - closed with the process
        command = [sys.executable, "-m", "celery", "-A", "reviewqueue.celery", "worker"]
        if self.transport_options:
            env["TEST_BROKER_TRANSPORT_OPTIONS"] = json.dumps(self.transport_options)
            command = [sys.executable, "-c", WORKER_WITH_TRANSPORT_OPTIONS]
        proc = subprocess.Popen(
            [*command, "--pool=prefork"]
            + [f"--concurrency={concurrency}", "--without-gossip", "--without-mingle", "--without-heartbeat"]
            + ["-n", f"test{number}@%h"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.procs.append(proc)
        return proc

    def kill_all(self) -> None:
        """SIGKILL every process group started here, orphaned pool children included."""
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)


def sender(broker_url: str) -> Celery:
    """A bare Celery app that only publishes, as a separate producer would.
    Not the current app: shared tasks published later in this process (by
    views under test) must keep going through the project's own app."""
    return Celery("sender", broker=broker_url, set_as_current=False)


def send(app: Celery, task_id: str, run_id: str, **kwargs: Any) -> None:
    """Publish run_loop for one built-in task, bypassing submit_loop."""
    app.send_task("reviewqueue.tasks.run_loop", kwargs={"task": SUITE[task_id].to_dict(), "run_id": run_id, **kwargs})


def wait_for(predicate: Callable[[], bool], timeout: float = 60.0, what: str = "the worker") -> None:
    """Poll until ``predicate`` holds; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def children(pid: int) -> list[int]:
    """The direct child processes of ``pid`` (a worker's pool)."""
    ps = ["ps", "-o", "pid=", "--ppid", str(pid)]
    out = subprocess.run(ps, check=False, capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def finished(*run_ids: str) -> bool:
    """Every named run has an outcome."""
    return LoopRun.objects.filter(run_id__in=run_ids).exclude(outcome="running").count() == len(run_ids)


def resubmit_stale(broker_url: str, stale_seconds: int = 0) -> int:
    """Run resubmit_stale_runs as the periodic task would: in its own process,
    against the test database and this broker, with a short stale threshold."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": broker_url,
        "DJANGO_SETTINGS_MODULE": "reviewqueue.settings",
        "REVIEWQUEUE_STALE_RUN_SECONDS": str(stale_seconds),
        "LOG_LEVEL": "WARNING",
    }
    code = "import django; django.setup(); from reviewqueue.tasks.loops import resubmit_stale_runs; print(resubmit_stale_runs())"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    return int(out.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def publishing_to(broker_url: str) -> Iterator[Celery]:
    """Point this process's Celery app (what submit_loop publishes with) at
    ``broker_url`` for the duration, then back; pooled connections are dropped
    both ways so no message goes to the wrong broker."""
    from reviewqueue.celery import app

    saved = (app.conf.broker_url, app.conf.broker_transport_options)

    def drop_pools() -> None:
        if app._pool is not None:
            app._pool.force_close_all()
        app._pool = None
        app.amqp._producer_pool = None
        # kombu also keeps producer and connection pools per broker URL in a
        # process-wide registry; a pool closed by an earlier test for the same
        # URL would otherwise answer "Acquire on closed pool".
        kombu.pools.reset()

    app.conf.broker_url = broker_url
    app.conf.broker_transport_options = {}
    drop_pools()
    try:
        yield app
    finally:
        drop_pools()
        app.conf.broker_url, app.conf.broker_transport_options = saved
