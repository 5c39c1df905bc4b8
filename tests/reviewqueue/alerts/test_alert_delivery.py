"""Alerts reach people: concurrent producers drive a queue over its
watermark while evaluations run side by side, and exactly one draft-mode
alert per episode arrives, by email (a real SMTP server on loopback), by
Apprise's JSON POST and by the signed webhook (a real HTTP receiver), plus
one recovery when the queue drains."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from reviewqueue import services, webhooks
from reviewqueue.models import Alert, Queue, WebhookDelivery
from reviewqueue.services import alerts
from reviewqueue.tokens import issue_token

from ..services.threads import in_threads

pytestmark = pytest.mark.django_db(transaction=True)

PRODUCERS = 6
EACH = 3  # 18 arrivals against a high watermark of 16 (capacity 20)


def output(i: int, n: int) -> dict[str, Any]:
    return {
        "idempotency_key": f"p{i}-{n}",
        "task_description": "Write is_even(n)",
        "final_output": "def is_even(n):\n    return n % 2 == 0\n",
        "cutoff_reason": "step_limit",
        "producer": f"producer-{i}",
    }


def test_one_draft_alert_per_episode_and_one_recovery(
    mailbox: Any, receiver: Any, announced: list[Any], reviewer: User, settings: Any
) -> None:
    settings.ALERT_HOLD_SECONDS = 300
    issue_token(name="fleet", scopes=["outputs"], webhook_url=receiver.url)
    json_url = f"json://127.0.0.1:{receiver.port}/apprise"
    alerts.channel_create(user=None, name="mail", kind="apprise", url=mailbox.apprise_url, queue=None)
    alerts.channel_create(user=None, name="chat", kind="apprise", url=json_url, queue=Queue.default())
    alerts.channel_create(user=None, name="fleet hook", kind="webhook", producer="fleet", queue=None)
    services.policy_update(user=None, changes={"capacity": 20})  # draft above 16, normal below 6

    def produce(i: int) -> None:
        for n in range(EACH):
            services.admit(**output(i, n))
            alerts.evaluate_alerts(queue=Queue.default())  # what each mode change's task does, concurrently

    in_threads(PRODUCERS, produce)
    alerts.evaluate_alerts()  # the beat's look
    assert Queue.current().mode == "draft"
    fired = Alert.objects.filter(condition="mode")
    assert list(fired.values_list("kind", flat=True)) == ["fired"]

    # Drain below the low watermark; the recovery waits for the hold.
    while Queue.current().depth >= 6:
        item = services.claim(reviewer=reviewer)
        services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    assert Queue.current().mode == "normal"
    now = timezone.now()
    alerts.evaluate_alerts(now=now)
    alerts.evaluate_alerts(now=now + timedelta(seconds=301))
    alerts.evaluate_alerts(now=now + timedelta(seconds=302))
    assert list(fired.order_by("pk").values_list("kind", flat=True)) == ["fired", "recovered"]

    # Email: one alert and one recovery about the mode.
    mode_mail = [m for m in mailbox.messages if "queue left normal flow" in m]
    assert len(mode_mail) == 2 and "recovered" in mode_mail[1]
    # Apprise's JSON POST to the queue's chat channel.
    posted = [r.event for r in receiver.requests if "title" in r.event]
    mode_posts = [p for p in posted if "queue left normal flow" in p.get("title", "")]
    assert len(mode_posts) == 2
    # The signed webhook events, delivered through the outbox.
    WebhookDelivery.objects.update(next_attempt_at=timezone.now())  # written at simulated times ahead
    for pk in WebhookDelivery.objects.order_by("pk").values_list("pk", flat=True):
        assert webhooks.deliver(pk) == "delivered"
    events = [r.event["type"] for r in receiver.requests if "type" in r.event]
    assert events.count("queue.mode_changed") == 1 and events.count("queue.recovered") >= 1
    deliveries = Alert.objects.filter(condition="mode", kind="fired").get().deliveries
    assert {d["channel"] for d in deliveries if d["ok"]} == {"mail", "chat", "fleet hook"}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="needs real concurrent writers")
def test_concurrent_evaluations_write_one_alert(announced: list[Any], admit_item: Any) -> None:
    services.policy_update(user=None, changes={"capacity": 4, "high_watermark": 0.5, "low_watermark": 0.25})
    for _ in range(3):
        admit_item()
    in_threads(6, lambda i: alerts.evaluate_alerts(queue=Queue.default()))
    assert Alert.objects.filter(condition="mode").count() == 1
