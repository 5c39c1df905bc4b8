"""Running work in real threads, each with its own database connection."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import connection, connections


@contextmanager
def row_locked(table: str, pk: int, *, wait: str = "3s") -> Iterator[None]:
    """Hold a row lock on ``table``'s row ``pk`` from a second PostgreSQL
    connection while the block runs; this test's own connection waits at most
    ``wait`` for any lock meanwhile (a wait fails the test rather than hangs it)."""
    db = connection.settings_dict
    with psycopg.connect(
        host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"], dbname=db["NAME"]
    ) as other:
        other.execute(f"SELECT id FROM {table} WHERE id = %s FOR UPDATE", [pk])
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = %s", [wait])
        try:
            yield
        finally:
            other.rollback()
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")


def in_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run work(i) in ``count`` threads at once; each closes its own connection."""
    barrier = threading.Barrier(count)

    def run(i: int) -> Any:
        try:
            barrier.wait()
            return work(i)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(run, range(count)))
