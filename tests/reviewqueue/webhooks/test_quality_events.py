"""What producers hear of double review and gold items, end to end: items
pushed through POST /api/outputs with a callback to a real loopback receiver,
real Celery worker processes and beat delivering the outbox (ARCHITECTURE.md
rule 11: only the settled verdict reaches the producer; a gold answer
reaches nobody).

"Nothing arrived" is shown by the outbox, not by a pause: the item has no
event row, and every row the outbox holds has been delivered, so there is
nothing left for a worker or the sweep to send. The last event of each test
arriving shows the receiver and the workers were working all along.

Runs against Redis when REDIS_URL is set, else the embedded SQLite broker.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from reviewqueue import services, webhooks
from reviewqueue.models import Judgement, Queue, ReviewItem, StepLimitChange, WebhookDelivery
from reviewqueue.tokens import issue_token

from ..worker_helpers import publishing_to, wait_for
from .deployment import Deployment
from .receiver import Received, Receiver, receiving

pytestmark = [pytest.mark.double_review, pytest.mark.django_db(transaction=True), pytest.mark.slow]

OUTVOTED_NOTE = "ann-approved-this-and-was-outvoted"
SECOND_NOTE = "ben-rejected-as-hallucination"
SETTLING_NOTE = "cat-rejected-as-code-error"
GOLD_NOTE = "ben-answered-the-gold-copy"


@pytest.fixture
def receiver(broker_url: str, tmp_path: Path, settings: Any, roles: Any) -> Iterator[Receiver]:
    """A loopback receiver, and a worker and beat delivering to it."""
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
    return issue_token(name="acme", scopes=["outputs"], webhook_url=receiver.url)[1]


@pytest.fixture
def team(make_user: Callable[..., Any]) -> list[Any]:
    return [make_user(name, "reviewer") for name in ("ann", "ben", "cat")]


def push(client: Client, token: str, receiver: Receiver, key: str) -> int:
    """An item pushed by producer acme, its events to the receiver."""
    body = {
        "idempotency_key": key,
        "task_description": f"Write is_even ({key})",
        "final_output": "def is_even(n):\n    return n % 2 == 1\n",
        "cutoff_reason": "step_limit",
        "callback_url": receiver.url,
    }
    response = client.post(
        "/api/outputs", body, content_type="application/json", headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 201, response.content
    return int(response.json()["item_id"])


def answer(reviewer: Any, item_id: int, approve: bool, label: str = "", note: str = "") -> None:
    item = services.claim(reviewer=reviewer)
    assert item is not None and item.pk == item_id
    services.decide(item_id=item_id, reviewer=reviewer, approve=approve, reason_label=label, note=note)


def outbox_drained() -> bool:
    """Every event row written so far has been delivered: nothing is left to send."""
    return not WebhookDelivery.objects.exclude(status="delivered").exists()


def wait_until_sent(*item_ids: int) -> None:
    """Each item's events are written and delivered, and nothing else is pending."""
    wait_for(
        lambda: all(WebhookDelivery.objects.filter(item_id=i).exists() for i in item_ids) and outbox_drained(),
        timeout=90,
        what="the outbox to be delivered",
    )


def about(receiver: Receiver, item_id: int) -> list[Received]:
    with receiver.lock:
        return [r for r in receiver.requests if r.event["item_id"] == item_id]


def signed(request: Received) -> bool:
    return webhooks.verify(webhooks.secret_for("acme"), request.headers, request.body)


def test_a_double_review_sends_one_event_with_the_tiebreaking_answer(
    client: Client, receiver: Receiver, token: str, team: list[Any]
) -> None:
    services.policy_update(user=None, changes={"double_review_rate": 1.0, "gold_rate": 0})
    item_id = push(client, token, receiver, "double-1")
    ann, ben, cat = team
    answer(ann, item_id, approve=True, note=OUTVOTED_NOTE)
    assert not WebhookDelivery.objects.filter(item_id=item_id).exists()
    wait_for(outbox_drained, timeout=30, what="the outbox to hold nothing undelivered")
    assert receiver.requests == []

    answer(ben, item_id, approve=False, label="hallucination", note=SECOND_NOTE)
    assert ReviewItem.objects.get(pk=item_id).review_round == 3
    assert not WebhookDelivery.objects.filter(item_id=item_id).exists()

    answer(cat, item_id, approve=False, label="code_error", note=SETTLING_NOTE)
    wait_until_sent(item_id)
    (request,) = receiver.requests
    assert signed(request)
    event = request.event
    assert (event["type"], event["item_id"]) == ("item.decided", item_id)
    assert event["data"]["decision"] == "reject"
    assert (event["data"]["reason_label"], event["data"]["note"]) == ("code_error", SETTLING_NOTE)
    assert OUTVOTED_NOTE.encode() not in request.body and SECOND_NOTE.encode() not in request.body
    assert b"hallucination" not in request.body
    assert request.headers["webhook-id"] == event["id"]


def test_an_operators_settlement_sends_one_event_with_the_operators_decision(
    client: Client, receiver: Receiver, token: str, team: list[Any], operator: Any
) -> None:
    services.policy_update(user=None, changes={"double_review_rate": 1.0, "gold_rate": 0})
    item_id = push(client, token, receiver, "operator-1")
    ann, ben, cat = team
    answer(ann, item_id, approve=True, note=OUTVOTED_NOTE)
    answer(ben, item_id, approve=False, label="hallucination", note=SECOND_NOTE)
    held = services.claim(reviewer=cat)
    assert held is not None and held.pk == item_id
    services.send_back(item_id=item_id, reviewer=cat, note="shorter, please")
    assert ReviewItem.objects.get(pk=item_id).review_round == 4  # three answers, three categories
    assert not WebhookDelivery.objects.filter(item_id=item_id).exists()

    services.settle(item_id=item_id, operator=operator, decision="reject", reason_label="unclear", note="otto decides")
    wait_until_sent(item_id)
    (request,) = receiver.requests
    assert signed(request)
    assert request.event["type"] == "item.decided" and request.event["item_id"] == item_id
    data = request.event["data"]
    assert (data["decision"], data["reason_label"], data["note"]) == ("reject", "unclear", "otto decides")
    assert b"shorter, please" not in request.body and OUTVOTED_NOTE.encode() not in request.body


def served_copy(page: str) -> int:
    found = re.search(r'data-item="(\d+)"', page)
    assert found is not None, "the review page shows an item"
    return int(found.group(1))


def test_a_gold_answer_reaches_no_producer_and_no_tuner_while_a_real_verdict_does(
    client: Client, receiver: Receiver, token: str, team: list[Any], operator: Any
) -> None:
    ann, ben, _ = team
    services.policy_update(
        user=None,
        changes={"double_review_rate": 0, "gold_rate": 0, "tuner_window": 1, "step_limit": 5, "min_step_limit": 2},
    )
    source = push(client, token, receiver, "gold-source")
    answer(ann, source, approve=True, note="ann approves the source")
    wait_until_sent(source)  # the source's own verdict, heard before it became gold
    services.mark_gold(item_id=source, operator=operator, expected_decision="approve")
    services.policy_update(user=None, changes={"gold_rate": 1.0})
    real = push(client, token, receiver, "gold-real")  # a copy is placed beside it, after it
    before = (Queue.current().step_limit, StepLimitChange.objects.count(), len(receiver.requests))
    assert before == (6, 1, 1), "the source's approval moved the limit: a counted verdict moves it"

    browser = Client()  # ben's own browser
    browser.force_login(ben)
    assert served_copy(browser.post("/review/next/", follow=True).content.decode()) == real  # in queue order
    services.release(item_id=real, reviewer=ben)
    copy = services.claim(reviewer=ben, exclude=[real]).pk  # the copy, next in the queue
    assert copy not in (source, real)
    assert ReviewItem.all_objects.get(pk=copy).gold_id is not None
    page = browser.post(
        f"/review/{copy}/decide/",
        {"decision": "reject", "reason_label": "logic_error", "note": GOLD_NOTE},
        follow=True,
    ).content.decode()
    assert served_copy(page) == real  # the next item is the real one: gold is not served twice
    gold = Judgement.objects.get(item_id=copy, reviewer=ben)
    assert (gold.kind, gold.correct) == ("gold", False)

    assert not WebhookDelivery.objects.filter(item_id=copy).exists()
    assert WebhookDelivery.objects.filter(item_id=source).count() == 1  # its own verdict, from before
    wait_for(outbox_drained, timeout=30, what="the outbox to hold nothing undelivered")
    assert (Queue.current().step_limit, StepLimitChange.objects.count(), len(receiver.requests)) == before
    assert [r.event["item_id"] for r in receiver.requests] == [source]

    services.decide(item_id=real, reviewer=ben, approve=False, reason_label="code_error", note="ben on a real one")
    wait_until_sent(real)
    (request,) = about(receiver, real)
    assert signed(request)
    assert request.event["data"]["decision"] == "reject" and request.event["data"]["note"] == "ben on a real one"
    assert not any(GOLD_NOTE.encode() in r.body for r in receiver.requests)
    assert not any(r.event["item_id"] == copy for r in receiver.requests)
    assert len(about(receiver, source)) == 1
    assert Queue.current().step_limit == 5  # the real rejection counted, the gold one did not
