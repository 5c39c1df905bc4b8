"""Shared plumbing for the PostgreSQL benches: scratch databases, Django set-up,
percentiles and ratios.

The benches run as scripts (``.venv/bin/python bench/bench_admit.py``), so this
module is imported by its bare name from the script's own directory.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
# A script's sys.path starts at bench/; the project's packages live one level up.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The server the scratch databases live on; its own "postgres" database is only
# used to create and drop them.
DEFAULT_SERVER_URL = "postgres://postgres@127.0.0.1:5432/postgres"


def server_url() -> str:
    """The maintenance URL: BENCH_PG_URL if set, else the local trust-auth server."""
    return os.environ.get("BENCH_PG_URL", DEFAULT_SERVER_URL)


def database_url(name: str) -> str:
    """The server URL with its database replaced by ``name``."""
    parts = urlsplit(server_url())
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


@contextmanager
def scratch_database(name: str) -> Iterator[str]:
    """A fresh empty database for one bench, dropped afterwards even on failure.

    WITH (FORCE) ends sessions a crashed server process may have left behind,
    so a failed run never blocks the next one.
    """
    with psycopg.connect(server_url(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield database_url(name)
    finally:
        with psycopg.connect(server_url(), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def server_env(url: str) -> dict[str, str]:
    """Environment for Django (in this process or a gunicorn child) on a plain-HTTP local server."""
    return {
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "reviewqueue.settings",
        # A private var dir: no shared secret-key file, no shared SQLite broker.
        "REVIEWQUEUE_VAR_DIR": os.environ.get("REVIEWQUEUE_VAR_DIR") or tempfile.mkdtemp(prefix="rq-bench-"),
        "SECRET_KEY": os.environ.get("SECRET_KEY", "bench-only-secret-key-not-for-production-0123456789"),
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
        "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "RATELIMIT_ENABLE": "0",
        "LOGIN_RATE_LIMIT": "10000/m",
        "LOG_LEVEL": "ERROR",
        "CELERY_TASK_ALWAYS_EAGER": "1",
        # With REDIS_URL set the servers run as deployed at scale: sessions and
        # cached role checks in Redis. Without it, both are database reads.
        **({"REDIS_URL": os.environ["REDIS_URL"]} if os.environ.get("REDIS_URL") else {}),
    }


def setup_django(url: str) -> None:
    """Point this process's Django at ``url`` and migrate it (quietly)."""
    os.environ.update(server_env(url))
    # This process reports the deployed connection default, as the servers it starts use it.
    os.environ.pop("DB_CONN_MAX_AGE", None)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def write_results(name: str, figures: dict[str, Any]) -> Path:
    """Write a bench's figures as ``<name>.json`` in BENCH_RESULTS_DIR (default
    ``bench/results/``, beside the committed plans); returns the path."""
    folder = Path(os.environ.get("BENCH_RESULTS_DIR", BENCH / "results"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(figures, indent=2, sort_keys=True, default=str) + "\n")
    return path


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile; enough for latency summaries of a few thousand samples."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``repeat`` calls: robust to a neighbour's burst of CPU use."""
    import time

    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def ms(seconds: float) -> str:
    """Seconds as a fixed-width millisecond figure."""
    return f"{seconds * 1000:8.2f} ms"


def issue_producer_token(name: str, scopes: Sequence[str] = ("outputs",)) -> str:
    """A producer's bearer token, issued the way an operator issues one; the plain text.

    The one place the benches name where ``issue_token`` lives.
    """
    from reviewqueue.tokens import issue_token

    _token, plain = issue_token(name=name, scopes=scopes)
    return plain


def free_port() -> int:
    """A port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gunicorn_env(url: str, conn_max_age: int | None, settings_module: str = "reviewqueue.settings") -> dict[str, str]:
    """The server's environment. ``conn_max_age`` None keeps the settings' deployed default."""
    env = {**os.environ, **server_env(url), "DJANGO_SETTINGS_MODULE": settings_module}
    # bench/ on the path too, for the bench-only settings and URLs.
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(BENCH)])
    env.pop("DB_CONN_MAX_AGE", None)
    if conn_max_age is not None:
        env["DB_CONN_MAX_AGE"] = str(conn_max_age)
    return env


def start_server(
    url: str,
    port: int,
    log_path: str,
    *,
    workers: int = 2,
    threads: int = 1,
    conn_max_age: int | None = None,
    settings_module: str = "reviewqueue.settings",
) -> subprocess.Popen[bytes]:
    """gunicorn on the real WSGI app, in its own process group so it stops as one.

    ``threads`` above 1 uses gunicorn's threaded workers (that many requests
    in flight per worker process).
    """
    env = gunicorn_env(url, conn_max_age, settings_module)
    gunicorn = os.path.join(os.path.dirname(sys.executable), "gunicorn")
    argv = [gunicorn, "reviewqueue.wsgi", "-w", str(workers), "-b", f"127.0.0.1:{port}", "--log-level", "warning"]
    if threads > 1:
        argv += ["--threads", str(threads)]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited early; see {log_path}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health/", timeout=1).status_code < 500:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    stop_server(proc)
    raise RuntimeError(f"gunicorn did not answer within 30 s; see {log_path}")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """Graceful stop of the whole group, then a hard one if it lingers."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def conn_max_age_label(conn_max_age: int | None) -> str:
    """How a report names the connection setting in force."""
    redis = " + Redis" if os.environ.get("REDIS_URL") else " (no Redis)"
    if conn_max_age is None:
        from django.conf import settings

        return f"DB_CONN_MAX_AGE={settings.DATABASES['default']['CONN_MAX_AGE']} (settings' default){redis}"
    return f"DB_CONN_MAX_AGE={conn_max_age}{redis}"


def print_rounds(label_a: str, rates_a: Sequence[float], label_b: str, rates_b: Sequence[float], unit: str) -> float:
    """Each interleaved round's rates, their medians and the ratio of medians (a / b)."""
    for n, (a, b) in enumerate(zip(rates_a, rates_b, strict=True), start=1):
        print(f"  round {n:2d}   {label_a} {a:8.1f} {unit}   {label_b} {b:8.1f} {unit}   ratio {a / b:5.2f}")
    med_a, med_b = statistics.median(rates_a), statistics.median(rates_b)
    ratio = med_a / med_b
    print(f"  median     {label_a} {med_a:8.1f} {unit}   {label_b} {med_b:8.1f} {unit}   ratio {ratio:5.2f}")
    return ratio


# One produced output, the same in every bench that writes outputs, so their
# figures compare: a short is_even answer cut off at the step limit.
OUTPUT = "def is_even(n):\n    return n % 2 == 0\n" * 8
DESCRIPTION = "Write is_even(n) that returns True for even integers."


def produced_output(key: str, n: int) -> dict[str, Any]:
    """Output ``n`` as a producer sends it (the fields of POST /api/outputs)."""
    return {
        "idempotency_key": key,
        "task_id": f"task-{n}",
        "task_kind": "code",
        "task_description": DESCRIPTION,
        "final_output": OUTPUT,
        "last_error": "AssertionError:check_2",
        "attempt_count": 5,
        "cutoff_reason": "step_limit",
        "priority": n % 3,
        "source_run_id": f"run-{n}",
    }
