"""A run resumed after a send-back, as its producer can read it: the run
(``GET /api/tasks/{run_id}``) and its start are held until the send-back is
final, an undone send-back's run is never shown, and a producer cannot take
a resumed run's id (``~v<n>``) for a run of its own."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.test import Client

from reviewqueue import services
from reviewqueue.models import LoopRun, ReviewItem
from reviewqueue.services.runs import execute_run, submit_run
from reviewqueue.tokens import issue_token

pytestmark = pytest.mark.django_db

AGENT = Path(__file__).resolve().parents[1] / "agents" / "follows_note.py"
ESSAY = {"id": "essay", "description": "Write a two-line release note.", "kind": "open"}


@pytest.fixture
def headers(db: None) -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(name='producer-a', scopes=['outputs', 'tasks'])[1]}"}


def _loop_item(tmp_path: Path, reviewer: Any) -> ReviewItem:
    """producer-a's run build-7, cut off: its item claimed by ``reviewer``."""
    agent = {"command": f"{sys.executable} {AGENT} {tmp_path / 'prompts'}"}
    submit_run(task=ESSAY, run_id="build-7", agent="command", agent_options=agent, producer="producer-a")
    assert (
        execute_run(task=ESSAY, run_id="build-7", agent="command", agent_options=agent, producer="producer-a")
        == "enqueued"
    )
    item = services.claim(reviewer=reviewer)
    assert item is not None
    return item


def _deliver(run: LoopRun) -> str:
    """One delivery of run_loop for ``run``, as its message says."""
    return execute_run(
        task=run.task, run_id=run.run_id, agent=run.agent, agent_options=run.agent_options, producer=run.producer
    )


def test_a_resumed_run_neither_shows_nor_starts_before_the_send_back_is_final(
    client: Client, headers: dict[str, str], tmp_path: Path, reviewer: Any, settings: Any
) -> None:
    settings.REVIEWQUEUE_UNDO_SECONDS = 3600
    item = _loop_item(tmp_path, reviewer)
    services.send_back(item_id=item.pk, reviewer=reviewer, note="shorter")
    resumed = LoopRun.objects.get(run_id="build-7~v2")
    assert client.get("/api/tasks/build-7~v2", headers=headers).status_code == 404
    assert _deliver(resumed) == "running"  # its message came early: nothing starts
    resumed.refresh_from_db()
    assert resumed.deliveries == 0 and ReviewItem.objects.count() == 1
    settings.REVIEWQUEUE_UNDO_SECONDS = 0  # the window has closed
    body = client.get("/api/tasks/build-7~v2", headers=headers).json()
    assert (body["outcome"], body["resumed_from"]) == ("running", "build-7")
    assert _deliver(resumed) == "enqueued"


def test_the_resumed_run_is_published_due_when_the_send_back_is_final(
    tmp_path: Path, reviewer: Any, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.REVIEWQUEUE_UNDO_SECONDS = 600
    item = _loop_item(tmp_path, reviewer)
    with (
        mock.patch("reviewqueue.tasks.loops.run_loop.apply_async") as later,
        mock.patch("reviewqueue.tasks.loops.run_loop.delay") as now,
        django_capture_on_commit_callbacks(execute=True),
    ):
        services.send_back(item_id=item.pk, reviewer=reviewer, note="shorter")
    assert not now.called
    assert later.call_args.kwargs["kwargs"]["run_id"] == "build-7~v2"
    assert 590 < later.call_args.kwargs["countdown"] <= 600


def test_an_undone_send_backs_run_is_never_shown(
    client: Client, headers: dict[str, str], tmp_path: Path, reviewer: Any, settings: Any
) -> None:
    settings.REVIEWQUEUE_UNDO_SECONDS = 3600
    item = _loop_item(tmp_path, reviewer)
    services.send_back(item_id=item.pk, reviewer=reviewer, note="shorter")
    services.undo(reviewer=reviewer)
    services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    settings.REVIEWQUEUE_UNDO_SECONDS = 0  # the approval is final; the cancelled run stays unseen
    assert client.get("/api/tasks/build-7~v2", headers=headers).status_code == 404
    assert client.get(f"/api/items/{item.pk}", headers=headers).json()["status"] == "approved"


@pytest.mark.parametrize("run_id", ["build-7~v2", "build-7~v13", "build-7~v2.41"])
def test_a_producer_cannot_take_a_resumed_runs_id(client: Client, headers: dict[str, str], run_id: str) -> None:
    body = {"task": ESSAY, "run_id": run_id}
    with mock.patch("reviewqueue.tasks.loops.run_loop.delay") as delay:
        response = client.post("/api/tasks", json.dumps(body), content_type="application/json", headers=headers)
    assert response.status_code == 400
    assert "~v<number>" in response.json()["fields"]["run_id"]
    assert not delay.called and not LoopRun.objects.exists()


def test_a_run_id_that_only_looks_alike_is_a_producers_own(client: Client, headers: dict[str, str]) -> None:
    for run_id in ("build~v", "build~vx2", "v2", "build~v2-retry"):
        body = {"task": ESSAY, "run_id": run_id}
        with mock.patch("reviewqueue.tasks.loops.run_loop.delay"):
            response = client.post("/api/tasks", json.dumps(body), content_type="application/json", headers=headers)
        assert response.status_code == 201, run_id
