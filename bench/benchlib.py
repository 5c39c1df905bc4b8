"""Shared plumbing for the PostgreSQL benches: scratch databases, Django set-up,
percentiles and ratios.

The benches run as scripts (``.venv/bin/python bench/bench_admit.py``), so this
module is imported by its bare name from the script's own directory.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
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
    }


def setup_django(url: str) -> None:
    """Point this process's Django at ``url`` and migrate it (quietly)."""
    os.environ.update(server_env(url))
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


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
