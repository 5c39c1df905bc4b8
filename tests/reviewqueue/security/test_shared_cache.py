"""The sign-in limit holds across processes: its counter lives in a cache
every process shares (the database on the embedded defaults, Redis at scale),
and counting is atomic."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache, caches
from django.db import connection, connections
from django.test import Client

from ..limits import address_far_from_a_window_edge

ROOT = Path(__file__).resolve().parents[3]
LIMIT = 6

pytestmark = pytest.mark.django_db(transaction=True)

# Signs in with a wrong password from the address in argv[1], in a process of
# its own on the same database, and prints the status codes it got.
CHILD = f"""
import json, sys, django
django.setup()
from django.test import Client
client = Client()
codes = [client.post("/login/", {{"username": "rita", "password": "wrong"}}, REMOTE_ADDR=sys.argv[1]).status_code
         for _ in range({LIMIT // 2})]
print(json.dumps(codes))
"""


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def test_the_embedded_defaults_use_the_database_cache() -> None:
    if os.environ.get("REDIS_URL"):
        assert "redis" in django_settings.CACHES["default"]["BACKEND"].lower()
    else:
        assert django_settings.CACHES["default"]["BACKEND"] == "reviewqueue.cache.DatabaseCache"


def test_two_processes_count_sign_in_attempts_against_one_limit(settings: Any, reviewer: Any) -> None:
    settings.LOGIN_RATE_LIMIT = f"{LIMIT}/h"
    address = address_far_from_a_window_edge("203.0.113")
    cache.clear()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "reviewqueue.settings",
        "DATABASE_URL": _database_url(),
        "LOGIN_RATE_LIMIT": f"{LIMIT}/h",
        "SECURE_SSL_REDIRECT": "0",
        "ALLOWED_HOSTS": "testserver",
        "SECRET_KEY": django_settings.SECRET_KEY,
        "LOG_LEVEL": "ERROR",
    }
    child = subprocess.run(
        [sys.executable, "-c", CHILD, address],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(child.stdout.strip().splitlines()[-1]) == [200] * (LIMIT // 2)
    client = Client()
    mine = [
        client.post("/login/", {"username": "rita", "password": "wrong"}, REMOTE_ADDR=address).status_code
        for _ in range(LIMIT // 2 + 1)
    ]
    # The other process's attempts counted here: this one is refused after LIMIT // 2.
    assert mine == [200] * (LIMIT // 2) + [429]
    cache.clear()


def test_two_cache_clients_counting_at_once_lose_no_count() -> None:
    cache.set("shared-counter", 0, 60)
    threads, each = 8, 25
    barrier = threading.Barrier(threads)

    def count(_: int) -> None:
        client = caches.create_connection("default")  # a client of its own, as another process has
        try:
            barrier.wait()
            for _ in range(each):
                client.incr("shared-counter")
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(count, range(threads)))
    assert cache.get("shared-counter") == threads * each
    cache.delete("shared-counter")
