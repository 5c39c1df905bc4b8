"""POST /api/tasks and the read endpoints: a producer submits a loop run,
reads it back and reads the queue's stats, and its token records when it was
last used."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import pytest
from django.test import Client

from reviewqueue.models import ApiToken, LoopRun
from reviewqueue.tokens import issue_token

pytestmark = pytest.mark.django_db

TASK = {
    "id": "is-even",
    "description": "Write is_even(n)",
    "kind": "verifiable",
    "checks": [{"id": "c1", "code": "assert is_even(2)"}],
}


@pytest.fixture
def auth(db: None) -> dict[str, str]:
    _, plain = issue_token(name="producer-b", scopes=["tasks"])
    return {"Authorization": f"Bearer {plain}"}


def _post(client: Client, body: Any, headers: dict[str, str]) -> Any:
    return client.post("/api/tasks", data=json.dumps(body), content_type="application/json", headers=headers)


def test_it_records_a_run_and_enqueues_it_after_commit(
    client: Client, auth: dict[str, str], django_capture_on_commit_callbacks: Any
) -> None:
    with (
        mock.patch("reviewqueue.tasks.loops.run_loop.delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = _post(client, {"task": TASK, "run_id": "r-1"}, auth)
    assert response.status_code == 201
    assert response.json()["run_id"] == "r-1"
    run = LoopRun.objects.get(run_id="r-1")
    assert run.outcome == LoopRun.Outcome.RUNNING
    assert delay.call_count == 1
    assert delay.call_args.kwargs["run_id"] == "r-1"


def test_it_starts_nothing_when_the_run_id_repeats(
    client: Client, auth: dict[str, str], django_capture_on_commit_callbacks: Any
) -> None:
    with (
        mock.patch("reviewqueue.tasks.loops.run_loop.delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        _post(client, {"task": TASK, "run_id": "r-2"}, auth)
        again = _post(client, {"task": TASK, "run_id": "r-2"}, auth)
    assert again.status_code == 200
    assert again.json()["created"] is False
    assert delay.call_count == 1
    assert LoopRun.objects.count() == 1


def test_it_generates_a_run_id_when_none_is_given(client: Client, auth: dict[str, str]) -> None:
    response = _post(client, {"task": TASK}, auth)
    assert response.status_code == 201
    assert response.json()["run_id"].startswith("api-")


def test_it_names_the_task_field_of_an_invalid_task(client: Client, auth: dict[str, str]) -> None:
    response = _post(client, {"task": {"id": "x", "description": "", "kind": "open"}}, auth)
    assert response.status_code == 400
    assert "task" in response.json()["fields"]
    assert not LoopRun.objects.exists()


def test_it_refuses_an_unknown_agent(client: Client, auth: dict[str, str]) -> None:
    response = _post(client, {"task": TASK, "agent": "rm -rf"}, auth)
    assert response.status_code == 400
    assert "agent" in response.json()["fields"]


def test_it_reports_a_run_by_id(client: Client, auth: dict[str, str]) -> None:
    _post(client, {"task": TASK, "run_id": "r-3"}, auth)
    response = client.get("/api/tasks/r-3", headers=auth)
    assert response.status_code == 200
    assert response.json()["outcome"] == "running"
    assert client.get("/api/tasks/nope", headers=auth).status_code == 404


def test_it_returns_queue_stats(client: Client, auth: dict[str, str], admit_item: Any) -> None:
    admit_item()
    admit_item()
    response = client.get("/api/stats", headers=auth)
    assert response.status_code == 200
    data = response.json()
    assert data["depth"] == 2
    assert data["mode"] == "normal"
    assert data["rates"]["arrivals"] == 2
    assert data["rates"]["ratio_infinite"] is True


def test_it_refuses_stats_without_a_token(client: Client, db: None) -> None:
    assert client.get("/api/stats").status_code == 401


def test_it_records_when_a_token_was_last_used(client: Client, auth: dict[str, str]) -> None:
    assert ApiToken.objects.get().last_used_at is None
    client.get("/api/stats", headers=auth)
    assert ApiToken.objects.get().last_used_at is not None
