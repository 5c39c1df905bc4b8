"""Twenty producers' requests with one run id at once, through the real view
and service, each thread on its own database connection (PostgreSQL in CI's
main run, the SQLite file on the embedded defaults): exactly one answers
201 created, the rest 200 with the same run, and the loop starts once."""

from __future__ import annotations

import json
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from unittest import mock

import pytest
from django.db import connection, connections
from django.test import Client

from reviewqueue.models import LoopRun
from reviewqueue.tokens import issue_token

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TASK = {"id": "hello", "description": "Say hello", "kind": "open"}
THREADS = 20


def _race(headers: list[dict[str, str]], run_id: str) -> tuple[list[Any], list[dict[str, Any]]]:
    """POST /api/tasks from len(headers) threads released together; returns the
    responses and the run_loop messages that were published."""
    barrier = threading.Barrier(len(headers))
    published: list[dict[str, Any]] = []
    lock = threading.Lock()

    def publish(**kwargs: Any) -> None:
        with lock:
            published.append(kwargs)

    def post(i: int) -> Any:
        client = Client()
        body = json.dumps({"task": TASK, "run_id": run_id})
        try:
            barrier.wait()
            return client.post("/api/tasks", body, content_type="application/json", headers=headers[i])
        finally:
            connections.close_all()

    with (
        mock.patch("reviewqueue.tasks.loops.run_loop.delay", side_effect=publish),
        ThreadPoolExecutor(max_workers=len(headers)) as pool,
    ):
        responses = list(pool.map(post, range(len(headers))))
    return responses, published


def test_one_run_id_sent_twenty_times_at_once_is_created_once(db: None) -> None:
    headers = {"Authorization": f"Bearer {issue_token(name='p', scopes=['tasks'])[1]}"}
    responses, published = _race([headers] * THREADS, "race-1")
    statuses = Counter(r.status_code for r in responses)
    created = [r.json()["created"] for r in responses]
    print(f"\n{connection.vendor}: {dict(statuses)}, {len(published)} published")
    assert statuses == {201: 1, 200: THREADS - 1}
    assert created.count(True) == 1
    assert {r.json()["run_id"] for r in responses} == {"race-1"}
    assert LoopRun.objects.filter(run_id="race-1").count() == 1
    assert len(published) == 1, "the loop was started more than once"


def test_the_same_run_id_from_two_producers_at_once_is_created_once_for_each(db: None) -> None:
    tokens = [{"Authorization": f"Bearer {issue_token(name=n, scopes=['tasks'])[1]}"} for n in ("a", "b")]
    responses, published = _race([tokens[i % 2] for i in range(THREADS)], "race-2")
    assert [r.status_code for r in responses].count(201) == 2
    assert sorted(LoopRun.objects.values_list("producer", flat=True)) == ["a", "b"]
    assert sorted(m["producer"] for m in published) == ["a", "b"]
