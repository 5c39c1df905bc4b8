"""One delivery attempt at a time, in this process, against a real receiver on
loopback: what is sent, how the answer is recorded, retries and giving up,
leases, ordering within an item, the per-receiver cap, and redelivery."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import standardwebhooks
from django.db import transaction
from django.utils import timezone

from reviewqueue import services, webhooks
from reviewqueue.models import ApiToken, ReviewItem, Verdict, WebhookDelivery

from .receiver import Receiver

pytestmark = pytest.mark.django_db


def only_delivery() -> WebhookDelivery:
    return WebhookDelivery.objects.get()


def make_due(row: WebhookDelivery) -> None:
    WebhookDelivery.objects.filter(pk=row.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))


def test_a_verdict_reaches_the_receiver_signed_with_the_producers_secret(
    decided: Any, receiver: Receiver, producer_token: Any, announced: list[int]
) -> None:
    verdict = decided(approve=False)
    row = only_delivery()
    assert webhooks.deliver(row.pk) == "delivered"

    (request,) = receiver.requests
    token = producer_token[0]
    assert webhooks.verify(token.webhook_secret, request.headers, request.body)
    assert request.headers["webhook-id"] == row.event_id
    # any Standard Webhooks receiver verifies it unchanged, with the secret as issued
    assert standardwebhooks.Webhook(token.webhook_secret).verify(request.body, request.headers)["id"] == row.event_id
    # the deprecated headers ride along for one release (docs/API.md, "Signatures")
    assert request.headers["Reviewqueue-Event-Id"] == row.event_id
    stamp = int(request.headers["webhook-timestamp"])
    assert request.headers["Reviewqueue-Signature"] == webhooks.legacy_signature(
        token.webhook_secret, stamp, request.body
    )
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["User-Agent"] == "reviewqueue-webhooks/1"
    event = request.event
    assert event["id"] == row.event_id and event["type"] == "item.decided"
    assert event["item_id"] == verdict.item_id and "created" in event
    assert event["data"]["decision"] == "reject" and event["data"]["reason_label"] == "logic_error"
    assert event["data"]["note"] == "n"
    row.refresh_from_db()
    assert (row.status, row.attempts, row.last_status_code) == ("delivered", 1, 200)
    assert row.delivered_at is not None and row.locked_until is None


def test_a_failing_answer_is_retried_later_with_the_same_bytes(decided: Any, receiver: Receiver) -> None:
    receiver.statuses = [500, 503]
    decided()
    row = only_delivery()
    assert webhooks.deliver(row.pk) == "retry"
    row.refresh_from_db()
    assert (row.status, row.attempts, row.last_status_code) == ("pending", 1, 500)
    assert row.last_error.startswith("HTTP 500")
    assert row.next_attempt_at > timezone.now(), "the next attempt waits out the backoff"
    assert webhooks.deliver(row.pk) == "not_due"
    make_due(row)
    assert webhooks.deliver(row.pk) == "retry"
    make_due(row)
    assert webhooks.deliver(row.pk) == "delivered"
    bodies = {r.body for r in receiver.requests}
    ids = {r.headers["webhook-id"] for r in receiver.requests}
    assert len(receiver.requests) == 3 and len(bodies) == 1 and ids == {row.event_id}
    row.refresh_from_db()
    assert (row.status, row.attempts) == ("delivered", 3)


def test_a_redirect_is_not_followed_and_counts_as_a_failure(decided: Any, receiver: Receiver) -> None:
    receiver.statuses = [302]
    decided()
    assert webhooks.deliver(only_delivery().pk) == "retry"
    assert only_delivery().last_status_code == 302 and len(receiver.requests) == 1


def test_an_event_past_the_give_up_age_fails_for_good(decided: Any, receiver: Receiver, settings: Any) -> None:
    receiver.default = 500
    decided()
    row = only_delivery()
    WebhookDelivery.objects.filter(pk=row.pk).update(created_at=timezone.now() - timedelta(seconds=86_400))
    assert webhooks.deliver(row.pk) == "failed"
    row.refresh_from_db()
    assert row.status == "failed" and row.attempts == 1
    assert webhooks.deliver(row.pk) == "done"


def test_a_producer_without_a_secret_is_never_sent_an_unsigned_event(decided: Any, receiver: Receiver) -> None:
    decided()
    ApiToken.objects.update(webhook_secret="")
    row = only_delivery()
    assert webhooks.deliver(row.pk) == "failed"
    row.refresh_from_db()
    assert row.status == "failed" and "no active token with a webhook secret" in row.last_error
    assert receiver.requests == []


def test_a_host_no_longer_allowed_is_not_called(decided: Any, receiver: Receiver, settings: Any) -> None:
    decided()
    settings.WEBHOOK_ALLOWED_HOSTS = ["elsewhere.example.com"]
    assert webhooks.deliver(only_delivery().pk) == "failed"
    assert "not allowed" in only_delivery().last_error and receiver.requests == []


def test_a_revoked_tokens_secret_no_longer_signs(decided: Any, receiver: Receiver) -> None:
    decided()
    ApiToken.objects.update(revoked_at=timezone.now())
    assert webhooks.deliver(only_delivery().pk) == "failed"
    assert receiver.requests == []


def test_a_leased_row_is_not_attempted_twice_and_a_lapsed_lease_is_taken_over(decided: Any) -> None:
    decided()
    row = only_delivery()
    state, leased = webhooks.lease(row.pk, timezone.now())
    assert state == "leased" and leased is not None and leased.attempts == 1
    assert webhooks.lease(row.pk, timezone.now())[0] == "leased_elsewhere"
    # the worker holding it was killed: its lease runs out, the attempt counted
    later = timezone.now() + timedelta(seconds=webhooks.timeout_seconds() * 3 + webhooks.LEASE_MARGIN_SECONDS + 1)
    state, again = webhooks.lease(row.pk, later)
    assert state == "leased" and again is not None and again.attempts == 2


def test_an_items_events_go_out_in_order(
    admit_item: Any, reviewer: Any, receiver: Receiver, producer_token: Any, announced: list[int]
) -> None:
    item = admit_item(producer="acme", callback_url=receiver.url).item
    first = services.outbox.item_shed(item, timezone.now())
    second = services.outbox.item_filtered(item, timezone.now())
    assert first is not None and second is not None
    assert webhooks.deliver(second.pk) == "held_back"
    assert webhooks.due(timezone.now() + timedelta(seconds=60)) == [(first.pk, receiver.url)]
    receiver.statuses = [500]
    assert webhooks.deliver(first.pk) == "retry"
    assert webhooks.deliver(second.pk) == "held_back", "a retrying earlier event still holds the later one"
    make_due(first)
    announced.clear()
    assert webhooks.deliver(first.pk) == "delivered"
    assert announced == [second.pk], "the next event of the item is announced at once"
    assert webhooks.deliver(second.pk) == "delivered"
    assert [e["type"] for e in receiver.events()] == ["item.shed", "item.filtered"]


def test_attempts_in_flight_per_receiver_are_capped(decided: Any, receiver: Receiver, settings: Any) -> None:
    settings.WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT = 2
    for _ in range(3):
        decided()
    rows = list(WebhookDelivery.objects.order_by("pk"))
    now = timezone.now()
    assert webhooks.lease(rows[0].pk, now)[0] == "leased"
    assert webhooks.lease(rows[1].pk, now)[0] == "leased"
    assert webhooks.lease(rows[2].pk, now)[0] == "busy"
    # the sweep announces nothing for a receiver whose slots are all taken
    assert webhooks.sweep(now + timedelta(seconds=webhooks.SWEEP_GRACE_SECONDS + 1)) == 0


def test_the_sweep_announces_due_rows_after_their_grace(decided: Any, announced: list[int]) -> None:
    decided()
    row = only_delivery()
    announced.clear()
    assert webhooks.sweep(timezone.now()) == 0, "a fresh event is left to its own announcement"
    assert webhooks.sweep(timezone.now() + timedelta(seconds=webhooks.SWEEP_GRACE_SECONDS + 1)) == 1
    assert announced == [row.pk]


def test_redeliver_sends_the_same_event_id_and_body_again(decided: Any, receiver: Receiver) -> None:
    decided()
    row = only_delivery()
    assert webhooks.deliver(row.pk) == "delivered"
    assert webhooks.redeliver([row.pk]) == 1
    assert only_delivery().status == "pending"
    assert webhooks.deliver(row.pk) == "delivered"
    first, second = receiver.requests
    assert first.body == second.body
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == row.event_id
    assert webhooks.redeliver([row.pk, row.pk + 999]) == 1


def test_the_outbox_row_rolls_back_with_the_verdict(
    admit_item: Any, reviewer: Any, receiver: Receiver, producer_token: Any, announced: list[int]
) -> None:
    item = admit_item(producer="acme", callback_url=receiver.url).item
    services.claim(reviewer=reviewer)

    class Abort(Exception):
        pass

    with pytest.raises(Abort), transaction.atomic():
        services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
        assert WebhookDelivery.objects.count() == 1
        raise Abort
    assert WebhookDelivery.objects.count() == 0 and Verdict.objects.count() == 0
    assert ReviewItem.objects.get(pk=item.pk).status == "claimed"


def test_no_callback_url_writes_no_event(admit_item: Any, reviewer: Any) -> None:
    item = admit_item().item
    services.claim(reviewer=reviewer)
    services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    assert WebhookDelivery.objects.count() == 0


def test_the_body_is_the_stored_json(decided: Any, receiver: Receiver) -> None:
    decided()
    row = only_delivery()
    webhooks.deliver(row.pk)
    assert receiver.requests[0].body == row.body.encode() and json.loads(row.body)["id"] == row.event_id
