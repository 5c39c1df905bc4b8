"""An item's events carry the producer's metadata, so a receiver routes a
verdict back to whatever asked for it without parsing ids: pushed with the
output, written into the signed body, read back by the client's
``verify_signature`` as ``Event.metadata``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reviewqueue import services, webhooks
from reviewqueue.client import verify_signature
from reviewqueue.models import WebhookDelivery

from .receiver import Receiver

pytestmark = pytest.mark.django_db

ROUTING = {"langgraph": {"thread_id": "thread-42", "checkpoint_ns": "review:abc"}, "trace": "t-1"}


def test_item_decided_carries_the_metadata_to_the_receiver_and_the_client_reads_it(
    decided: Any, receiver: Receiver, producer_token: Any, announced: list[int]
) -> None:
    decided(approve=False, metadata=ROUTING)
    row = WebhookDelivery.objects.get()
    assert json.loads(row.body)["data"]["metadata"] == ROUTING
    assert webhooks.deliver(row.pk) == "delivered"
    (request,) = receiver.requests
    event = verify_signature(producer_token[0].webhook_secret, request.headers, request.body)
    assert (event.type, event.data["decision"], event.metadata) == ("item.decided", "reject", ROUTING)


def test_an_item_without_metadata_sends_an_empty_object(decided: Any, announced: list[int]) -> None:
    decided()
    assert json.loads(WebhookDelivery.objects.get().body)["data"]["metadata"] == {}


def test_a_send_back_carries_the_metadata_too(
    admit_item: Any, reviewer: Any, receiver: Receiver, producer_token: Any, announced: list[int]
) -> None:
    item = admit_item(producer="acme", callback_url=receiver.url, metadata=ROUTING).item
    assert services.claim(reviewer=reviewer).pk == item.pk
    services.send_back(item_id=item.pk, reviewer=reviewer, note="try n = 0")
    body = json.loads(WebhookDelivery.objects.get(event_type="item.sent_back").body)
    assert (body["data"]["note"], body["data"]["metadata"]) == ("try n = 0", ROUTING)


def test_a_shed_item_carries_its_metadata(
    admit_item: Any, receiver: Receiver, producer_token: Any, announced: list[int]
) -> None:
    from reviewqueue.models import Queue

    Queue.objects.filter(pk=Queue.default().pk).update(capacity=1)
    admit_item(producer="acme", callback_url=receiver.url, priority=5)
    shed = admit_item(producer="acme", callback_url=receiver.url, priority=0, metadata={"who": "the lowest"})
    assert shed.outcome == "shed"
    body = json.loads(WebhookDelivery.objects.get(event_type="item.shed").body)
    assert body["data"]["metadata"] == {"who": "the lowest"}
