"""Idempotency keys and run ids belong to one producer: two producers may use
the same key or run id without meeting, and each sees only its own runs and
items (another's answer 404, so their existence does not leak)."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import pytest
from django.test import Client

from reviewqueue import services
from reviewqueue.models import LoopRun, Queue, ReviewItem
from reviewqueue.tasks.loops import run_loop
from reviewqueue.tokens import issue_token

pytestmark = pytest.mark.django_db

TASK = {"id": "hello", "description": "Say hello", "kind": "open"}


@pytest.fixture
def producers(db: None) -> dict[str, dict[str, str]]:
    """Three producers' headers: a and b may do everything, c only reads stats."""
    headers = {}
    for name, scopes in (("a", ["outputs", "tasks"]), ("b", ["outputs", "tasks"]), ("c", ["outputs", "tasks"])):
        headers[name] = {"Authorization": f"Bearer {issue_token(name=name, scopes=scopes)[1]}"}
    return headers


def _push(client: Client, headers: dict[str, str], key: str) -> Any:
    body = {"idempotency_key": key, "task_description": "t", "final_output": "o"}
    return client.post("/api/outputs", json.dumps(body), content_type="application/json", headers=headers)


def _submit(client: Client, headers: dict[str, str], run_id: str) -> Any:
    body = json.dumps({"task": TASK, "run_id": run_id})
    return client.post("/api/tasks", body, content_type="application/json", headers=headers)


def test_two_producers_may_use_the_same_idempotency_key(client: Client, producers: dict[str, Any]) -> None:
    first, second = _push(client, producers["a"], "k-1"), _push(client, producers["b"], "k-1")
    assert (first.status_code, second.status_code) == (201, 201)
    assert first.json()["item_id"] != second.json()["item_id"]
    assert sorted(ReviewItem.objects.values_list("producer", flat=True)) == ["a", "b"]
    assert Queue.current().depth == 2


def test_a_key_repeated_by_its_producer_is_still_a_duplicate(client: Client, producers: dict[str, Any]) -> None:
    first = _push(client, producers["a"], "k-1").json()
    again = _push(client, producers["a"], "k-1")
    assert again.status_code == 200
    assert again.json()["outcome"] == "duplicate"
    assert again.json()["item_id"] == first["item_id"]
    assert ReviewItem.objects.count() == 1


def test_admit_keeps_keys_apart_per_producer(db: None) -> None:
    fields = {"idempotency_key": "same", "task_description": "t", "final_output": "o", "cutoff_reason": "external"}
    one = services.admit(producer="one", **fields)
    two = services.admit(producer="two", **fields)
    again = services.admit(producer="one", **fields)
    assert (one.outcome, two.outcome, again.outcome) == ("enqueued", "enqueued", "duplicate")
    assert again.item.pk == one.item.pk != two.item.pk
    assert Queue.current().depth == services.queue_depth() == 2


def test_two_producers_may_use_the_same_run_id(
    client: Client, producers: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    with (
        mock.patch("reviewqueue.tasks.loops.run_loop.delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        first, second = _submit(client, producers["a"], "nightly-1"), _submit(client, producers["b"], "nightly-1")
    assert (first.status_code, second.status_code) == (201, 201)
    assert first.json()["created"] is second.json()["created"] is True
    assert sorted(LoopRun.objects.values_list("producer", "run_id")) == [("a", "nightly-1"), ("b", "nightly-1")]
    assert [call.kwargs["producer"] for call in delay.call_args_list] == ["a", "b"]


def test_a_run_answers_only_the_producer_that_submitted_it(client: Client, producers: dict[str, Any]) -> None:
    with mock.patch("reviewqueue.tasks.loops.run_loop.delay"):
        _submit(client, producers["a"], "mine")
    assert client.get("/api/tasks/mine", headers=producers["a"]).status_code == 200
    other = client.get("/api/tasks/mine", headers=producers["c"])
    missing = client.get("/api/tasks/never-submitted", headers=producers["c"])
    assert other.status_code == missing.status_code == 404
    # the same answer, whether the run exists under another producer or not at all
    assert other.json()["error"] == missing.json()["error"] == "not_found"


def test_an_item_answers_only_its_producer(client: Client, producers: dict[str, Any]) -> None:
    item_id = _push(client, producers["a"], "k").json()["item_id"]
    assert client.get(f"/api/items/{item_id}", headers=producers["a"]).status_code == 200
    assert client.get(f"/api/items/{item_id}", headers=producers["b"]).status_code == 404
    assert client.get(f"/api/items/{item_id + 1000}", headers=producers["b"]).status_code == 404


def test_a_submitted_runs_item_belongs_to_its_producer(client: Client, producers: dict[str, Any]) -> None:
    # Both producers' runs with one run id end in the queue as two items,
    # and each producer reads its own item's status.
    task = {"id": "essay", "description": "Write an essay", "kind": "open"}
    for name in ("a", "b"):
        run_loop(task=task, run_id="same", producer=name)
    items = {item.producer: item for item in ReviewItem.objects.all()}
    assert set(items) == {"a", "b"}
    assert items["a"].idempotency_key == items["b"].idempotency_key == "run:same"
    for name in ("a", "b"):
        run = client.get("/api/tasks/same", headers=producers[name])
        assert run.status_code == 200
        assert run.json()["item_id"] == items[name].pk
        assert client.get(f"/api/items/{items[name].pk}", headers=producers[name]).status_code == 200
    assert client.get(f"/api/items/{items['a'].pk}", headers=producers["b"]).status_code == 404


def test_operators_runs_keep_their_own_namespace(db: None) -> None:
    task = {"id": "essay", "description": "Write an essay", "kind": "open"}
    run_loop(task=task, run_id="same")
    run_loop(task=task, run_id="same", producer="a")
    assert sorted(ReviewItem.objects.values_list("producer", flat=True)) == ["a", "loop:scripted"]
    assert sorted(LoopRun.objects.values_list("producer", flat=True)) == ["", "a"]


def test_a_stale_submitted_run_is_resent_under_its_producer(db: None, settings: Any) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from reviewqueue.tasks.loops import resubmit_stale_runs

    for producer in ("a", ""):
        LoopRun.objects.create(producer=producer, run_id="lost", task_id="hello", task=TASK)
    LoopRun.objects.update(updated_at=timezone.now() - timedelta(seconds=settings.REVIEWQUEUE_STALE_RUN_SECONDS + 1))
    with mock.patch("reviewqueue.tasks.loops.run_loop.delay") as delay:
        assert resubmit_stale_runs() == 2
    sent = sorted(call.kwargs.get("producer", "") for call in delay.call_args_list)
    assert sent == ["", "a"]  # the operators' run is sent as before, without a producer
