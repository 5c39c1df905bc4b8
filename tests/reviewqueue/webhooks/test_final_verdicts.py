"""A verdict reaches the producer only once it can no longer change
(``reviewqueue.finality``): its ``item.decided`` event is due, and the item API
shows it, only when the undo window has closed; an undo inside the window
leaves no trace toward the producer. End to end: items pushed through
POST /api/outputs with a callback to a real loopback receiver, a real Celery
worker and beat delivering the outbox.

Runs against Redis when REDIS_URL is set, else the embedded SQLite broker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from reviewqueue import services
from reviewqueue.models import Verdict, WebhookDelivery

from ..worker_helpers import publishing_to, wait_for
from .deployment import Deployment
from .receiver import Receiver, receiving
from .test_quality_events import about, answer, push, signed, wait_until_sent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

WINDOW = 8  # long enough for a loaded machine to read the item inside it


@pytest.fixture
def receiver(broker_url: str, tmp_path: Path, settings: Any, roles: Any) -> Iterator[Receiver]:
    """A loopback receiver, and a worker and beat delivering to it; verdicts
    given here can be undone for WINDOW seconds."""
    settings.REVIEWQUEUE_UNDO_SECONDS = WINDOW
    with receiving() as server, publishing_to(broker_url):
        settings.WEBHOOK_ALLOWED_HOSTS = [server.host]
        deployment = Deployment(broker_url, tmp_path, None, [server])
        deployment.start(concurrency=2)
        try:
            yield server
        finally:
            deployment.stop()


@pytest.fixture
def token(receiver: Receiver) -> str:
    from reviewqueue.tokens import issue_token

    return issue_token(name="acme", scopes=["outputs"], webhook_url=receiver.url)[1]


@pytest.fixture
def team(make_user: Callable[..., Any]) -> list[Any]:
    return [make_user(name, "reviewer") for name in ("ann", "ben", "cat")]


def read_item(client: Client, token: str, item_id: int) -> dict[str, Any]:
    response = client.get(f"/api/items/{item_id}", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.content
    return response.json()


def test_an_undone_approval_is_never_told_and_the_final_rejection_is_told_once(
    client: Client, receiver: Receiver, token: str, team: list[Any]
) -> None:
    ann = team[0]
    item_id = push(client, token, receiver, "undo-1")
    answer(ann, item_id, approve=True, note="looks right")
    told = read_item(client, token, item_id)
    assert (told["status"], told["decision"], told["verdict"]) == ("claimed", None, None)
    assert told["awaiting"] == "review"

    services.undo(reviewer=ann)
    assert not WebhookDelivery.objects.filter(item_id=item_id).exists()  # no trace left
    services.decide(item_id=item_id, reviewer=ann, approve=False, reason_label="logic_error", note="no: odd numbers")
    verdict = Verdict.objects.get(item_id=item_id)
    assert read_item(client, token, item_id)["decision"] is None  # still inside the window

    wait_until_sent(item_id)
    (request,) = about(receiver, item_id)
    assert signed(request)
    assert (request.event["type"], request.event["data"]["decision"]) == ("item.decided", "reject")
    delivery = WebhookDelivery.objects.get(item_id=item_id)
    assert delivery.delivered_at >= verdict.created_at + timedelta(seconds=WINDOW)
    final = read_item(client, token, item_id)
    assert (final["status"], final["decision"], final["verdict"]["reason_label"]) == (
        "rejected",
        "reject",
        "logic_error",
    )


@pytest.mark.double_review
def test_an_undone_settling_answer_of_a_double_review_is_never_told(
    client: Client, receiver: Receiver, token: str, team: list[Any]
) -> None:
    services.policy_update(user=None, changes={"double_review_rate": 1.0, "gold_rate": 0})
    ann, ben, cat = team
    item_id = push(client, token, receiver, "undo-double")
    answer(ann, item_id, approve=True, note="ann approves")
    answer(ben, item_id, approve=False, label="hallucination", note="ben rejects")
    answer(cat, item_id, approve=False, label="code_error", note="cat settles: reject")
    assert Verdict.objects.filter(item_id=item_id).exists()
    told = read_item(client, token, item_id)
    assert (told["status"], told["decision"], told["awaiting"]) == ("claimed", None, "tiebreak")

    services.undo(reviewer=cat)
    assert not WebhookDelivery.objects.filter(item_id=item_id).exists()
    services.decide(item_id=item_id, reviewer=cat, approve=True, note="cat settles: approve")

    wait_until_sent(item_id)
    wait_for(lambda: len(about(receiver, item_id)) >= 1, timeout=30, what="the event")
    (request,) = about(receiver, item_id)
    assert request.event["data"]["decision"] == "approve"
    assert request.event["data"]["note"] == "cat settles: approve"
    assert b"cat settles: reject" not in request.body
    assert read_item(client, token, item_id)["status"] == "approved"
