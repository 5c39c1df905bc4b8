"""Producers name a queue, or the routing rules choose one: POST /api/outputs
and POST /api/tasks take ``queue``, answer which queue the work went to, and
refuse an unknown or archived queue with a 400 naming it; GET /api/items
says an item's queue."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import pytest
from django.test import Client

from reviewqueue import services
from reviewqueue.models import LoopRun, Queue, ReviewItem, RoutingRule
from reviewqueue.tokens import issue_token

pytestmark = pytest.mark.django_db

OUTPUT = {"task_description": "Write is_even", "final_output": "def is_even(n): ...", "cutoff_reason": "step_limit"}
TASK = {"id": "docs/intro", "description": "Write the intro", "kind": "open", "priority": 3}


@pytest.fixture
def auth(db: None) -> dict[str, str]:
    _, plain = issue_token(name="fleet-a", scopes=["outputs", "tasks"])
    return {"Authorization": f"Bearer {plain}"}


def _post(client: Client, path: str, body: Any, auth: dict[str, str]) -> Any:
    return client.post(path, data=json.dumps(body), content_type="application/json", headers=auth)


def test_an_output_goes_to_the_queue_it_names(client: Client, auth: dict[str, str]) -> None:
    services.create_queue(user=None, slug="team-b", settings={"capacity": 9})
    response = _post(client, "/api/outputs", {**OUTPUT, "idempotency_key": "k1", "queue": "team-b"}, auth)
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["queue"], body["capacity"], body["depth"]) == ("team-b", 9, 1)
    assert ReviewItem.objects.get(pk=body["item_id"]).queue.slug == "team-b"
    item = client.get(f"/api/items/{body['item_id']}", headers=auth).json()
    assert item["queue"] == "team-b"


def test_without_a_queue_the_rules_choose_and_default_catches_the_rest(client: Client, auth: dict[str, str]) -> None:
    target = services.create_queue(user=None, slug="fleet-a-queue")
    RoutingRule.objects.create(queue=target, producer="fleet-a", min_priority=5)
    high = _post(client, "/api/outputs", {**OUTPUT, "idempotency_key": "hi", "priority": 5}, auth).json()
    low = _post(client, "/api/outputs", {**OUTPUT, "idempotency_key": "lo", "priority": 4}, auth).json()
    assert (high["queue"], low["queue"]) == ("fleet-a-queue", "default")


@pytest.mark.parametrize("path", ["/api/outputs", "/api/tasks"])
@pytest.mark.parametrize("slug", ["no-such-queue", "", "DROP TABLE", "q" * 300])
def test_an_unknown_queue_is_a_400_that_names_it(client: Client, auth: dict[str, str], path: str, slug: str) -> None:
    body = {**OUTPUT, "idempotency_key": "k"} if path.endswith("outputs") else {"task": TASK, "run_id": "r"}
    response = _post(client, path, {**body, "queue": slug}, auth)
    if slug == "":  # an empty name is no name: the rules choose
        assert response.status_code in (200, 201), response.content
        return
    assert response.status_code == 400
    error = response.json()
    assert error["error"] == "invalid"
    assert "unknown queue" in error["fields"]["queue"] and slug[:60] in error["fields"]["queue"]
    assert not ReviewItem.objects.exists() and not LoopRun.objects.exists()  # nothing stored


@pytest.mark.parametrize("path", ["/api/outputs", "/api/tasks"])
def test_an_archived_queue_is_a_400_and_nothing_is_stored(client: Client, auth: dict[str, str], path: str) -> None:
    services.archive_queue(queue=services.create_queue(user=None, slug="retired"), user=None)
    body = {**OUTPUT, "idempotency_key": "k"} if path.endswith("outputs") else {"task": TASK, "run_id": "r"}
    response = _post(client, path, {**body, "queue": "retired"}, auth)
    assert response.status_code == 400
    assert "'retired' is archived" in response.json()["fields"]["queue"]
    assert not ReviewItem.objects.exists() and not LoopRun.objects.exists()


@pytest.mark.parametrize("queue", [7, ["a"], {"slug": "a"}])
def test_a_queue_that_is_not_text_is_a_400(client: Client, auth: dict[str, str], queue: Any) -> None:
    response = _post(client, "/api/outputs", {**OUTPUT, "idempotency_key": "k", "queue": queue}, auth)
    assert response.status_code == 400
    assert "queue" in response.json()["fields"]


def test_a_task_runs_in_its_routed_queue(
    client: Client, auth: dict[str, str], django_capture_on_commit_callbacks: Any
) -> None:
    docs = services.create_queue(user=None, slug="docs", settings={"step_limit": 3})
    RoutingRule.objects.create(queue=docs, task_kind="open", task_id_prefix="docs/")
    with (
        mock.patch("reviewqueue.tasks.loops.run_loop.delay"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        routed = _post(client, "/api/tasks", {"task": TASK, "run_id": "r-docs"}, auth)
        named = _post(client, "/api/tasks", {"task": TASK, "run_id": "r-named", "queue": "default"}, auth)
    assert (routed.status_code, routed.json()["queue"]) == (201, "docs")
    assert named.json()["queue"] == "default"
    assert LoopRun.objects.get(run_id="r-docs").queue == docs
    assert client.get("/api/tasks/r-docs", headers=auth).json()["queue"] == "docs"
    # a repeated call answers the run as first routed, whatever it names now
    again = _post(client, "/api/tasks", {"task": TASK, "run_id": "r-docs", "queue": "default"}, auth)
    assert (again.status_code, again.json()["queue"]) == (200, "docs")
    assert Queue.objects.get(slug="docs").step_limit == 3


def test_stats_are_of_the_queue_asked_for(client: Client, auth: dict[str, str]) -> None:
    services.create_queue(user=None, slug="busy", settings={"capacity": 3})
    for key in ("s1", "s2"):
        _post(client, "/api/outputs", {**OUTPUT, "idempotency_key": key, "queue": "busy"}, auth)
    busy = client.get("/api/stats?queue=busy", headers=auth).json()
    default = client.get("/api/stats", headers=auth).json()
    assert (busy["queue"], busy["depth"], busy["capacity"]) == ("busy", 2, 3)
    assert (default["queue"], default["depth"]) == ("default", 0)
    unknown = client.get("/api/stats?queue=nope", headers=auth)
    assert unknown.status_code == 400 and "unknown queue 'nope'" in unknown.json()["fields"]["queue"]


def test_an_unknown_queue_is_named_as_the_docs_show_it(client: Client, auth: dict[str, str]) -> None:
    response = _post(client, "/api/outputs", {**OUTPUT, "idempotency_key": "k", "queue": "paymnets"}, auth)
    assert response.json() == {"error": "invalid", "fields": {"queue": "unknown queue 'paymnets'"}}


def test_every_refused_field_is_reported_at_once(client: Client, auth: dict[str, str]) -> None:
    body = {**OUTPUT, "idempotency_key": "k", "queue": "paymnets", "previous_item": 999}
    response = _post(client, "/api/outputs", body, auth)
    assert response.status_code == 400
    assert response.json()["fields"] == {
        "previous_item": "no item 999 from this producer",
        "queue": "unknown queue 'paymnets'",
    }
    assert not ReviewItem.objects.exists()
