"""Fixtures shared by the tests that start real Celery workers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def broker_url(tmp_path: Path) -> Iterator[str]:
    """The broker a test's workers and publisher share: with REDIS_URL set, a
    Redis database of its own (TEST_REDIS_DB, default 14), flushed before and
    after; otherwise the embedded broker in a file of the test's own."""
    redis_url = os.environ.get("REDIS_URL")
    if redis_url:
        import redis

        url = redis_url.rsplit("/", 1)[0] + "/" + os.environ.get("TEST_REDIS_DB", "14")
        redis.Redis.from_url(url).flushdb()
        yield url
        redis.Redis.from_url(url).flushdb()
    else:
        yield f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
