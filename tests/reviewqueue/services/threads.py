"""Running work in real threads, each with its own database connection."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import connections


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
