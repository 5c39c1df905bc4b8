"""Alert episodes in the live queue: once per episode, a recovery after the
hold, no storm from a flapping depth; the queue's events through the outbox."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from reviewqueue import policy, services
from reviewqueue.models import Alert, AlertChannel, ModeChange, Queue, ReviewerStanding, ReviewItem, WebhookDelivery
from reviewqueue.services import alerts, depth
from reviewqueue.services.depth import announce_mode_change  # the real one: tests/conftest.py stubs it
from reviewqueue.tokens import issue_token

pytestmark = pytest.mark.django_db


def mode_alerts() -> list[str]:
    return list(Alert.objects.filter(condition="mode").order_by("created_at", "pk").values_list("kind", flat=True))


def test_a_depth_flapping_around_the_watermark_for_ten_minutes_sends_at_most_two_alerts(
    settings: Any, announced: list[Any]
) -> None:
    settings.ALERT_HOLD_SECONDS = 300
    queue = Queue.default()
    start = timezone.now()
    depths = [38, 42, 12, 45, 10, 41, 14, 44, 9, 43]  # across the high (40) and low (15) watermarks
    for step in range(60):  # every 10 simulated seconds for ten minutes
        now = start + timedelta(seconds=10 * step)
        locked = Queue.locked(queue)
        depth.after_depth_change(locked, depths[step % len(depths)], now)
        alerts.evaluate_alerts(now=now, queue=queue)
    assert ModeChange.objects.count() > 10  # the mode did flap
    assert 1 <= len(mode_alerts()) <= 2
    assert mode_alerts()[0] == "fired"


def test_an_sla_breach_fires_once_and_recovers_once(admit_item: Any, reviewer: User, announced: list[Any]) -> None:
    services.policy_update(user=None, changes={"sla_minutes": 30})
    item = admit_item().item
    ReviewItem.objects.filter(pk=item.pk).update(created_at=timezone.now() - timedelta(minutes=31))
    now = timezone.now()
    for seconds in (0, 30, 60):
        alerts.evaluate_alerts(now=now + timedelta(seconds=seconds))
    breached = Alert.objects.filter(condition="sla_breached")
    assert list(breached.values_list("kind", flat=True)) == ["fired"]
    services.claim(reviewer=reviewer)
    services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    later = timezone.now()
    alerts.evaluate_alerts(now=later)  # clear, but not for long enough yet
    assert breached.count() == 1
    alerts.evaluate_alerts(now=later + timedelta(seconds=301))
    alerts.evaluate_alerts(now=later + timedelta(seconds=400))
    assert list(breached.order_by("pk").values_list("kind", flat=True)) == ["fired", "recovered"]


def test_the_queue_events_go_through_the_outbox_to_webhook_channels(
    admit_item: Any, receiver: Any, announced: list[Any]
) -> None:
    token, _ = issue_token(name="fleet", scopes=["outputs"], webhook_url=receiver.url)
    alerts.channel_create(user=None, name="fleet hook", kind="webhook", producer="fleet", queue=None)
    services.policy_update(user=None, changes={"capacity": 4, "high_watermark": 0.5, "low_watermark": 0.25})
    for _ in range(3):
        admit_item()
    assert Queue.current().mode == "draft"
    now = timezone.now()
    alerts.evaluate_alerts(now=now)
    ReviewItem.objects.update(status="approved", decided_at=now)
    depth.reconcile_depth(now=now)
    alerts.evaluate_alerts(now=now + timedelta(seconds=1))
    alerts.evaluate_alerts(now=now + timedelta(seconds=302))
    rows = WebhookDelivery.objects.order_by("pk")
    kinds = [json.loads(r.body)["type"] for r in rows]
    assert kinds == ["queue.mode_changed", "queue.recovered"]
    first = json.loads(rows[0].body)
    assert first["data"]["queue"] == "default" and first["data"]["mode"] == "draft"
    assert {r.url for r in rows} == {receiver.url} and {r.producer for r in rows} == {"fleet"}
    assert {r.ordering_key for r in rows} == {f"queue-events:{token.pk}"}


def test_a_reviewer_paused_by_gold_is_a_team_alert(reviewer: User, announced: list[Any]) -> None:
    ReviewerStanding.objects.create(reviewer=reviewer, flagged_at=timezone.now(), paused_at=timezone.now())
    alerts.evaluate_alerts()
    alerts.evaluate_alerts()
    paused = Alert.objects.get(condition="reviewer_paused")
    assert paused.queue is None and paused.subject == "rita" and "rita" in paused.body


def test_an_old_item_alert_needs_its_limit(admit_item: Any, announced: list[Any]) -> None:
    admit_item()
    ReviewItem.objects.update(created_at=timezone.now() - timedelta(minutes=20))
    alerts.evaluate_alerts()
    assert not Alert.objects.filter(condition="oldest_age").exists()
    services.policy_update(user=None, changes={"alert_age_minutes": 15})
    alerts.evaluate_alerts()
    assert Alert.objects.filter(condition="oldest_age", kind="fired").count() == 1


def test_a_channel_is_checked_and_its_change_audited_with_the_secret_masked(operator: User) -> None:
    with pytest.raises(services.InvalidInput) as caught:
        alerts.channel_create(user=operator, name="x", kind="apprise", url="nonsense://", queue=None)
    assert caught.value.field == "url"
    with pytest.raises(services.InvalidInput) as caught:
        alerts.channel_create(user=operator, name="x", kind="webhook", producer="nobody", queue=None)
    assert caught.value.field == "producer"
    channel = alerts.channel_create(
        user=operator, name="ops", kind="apprise", url="json://bot:hunter2secret@127.0.0.1:9/hook", queue=None
    )
    from reviewqueue.models import PolicyAudit

    audit = PolicyAudit.objects.get()
    assert audit.user == operator
    assert "hunter2secret" not in json.dumps(audit.changes)
    assert "hunter2secret" not in alerts.describe(channel)
    alerts.channel_delete(user=operator, channel_id=channel.pk)
    alerts.channel_delete(user=operator, channel_id=channel.pk)  # safe to repeat
    assert not AlertChannel.objects.exists() and PolicyAudit.objects.count() == 2


def test_the_pure_and_live_rules_agree_on_the_hold() -> None:
    state, message = policy.step_alert(policy.AlertState(), True, 0, hold_seconds=300)
    assert message == "fired" and state.firing


def test_escalating_to_shedding_is_its_own_alert(admit_item: Any, announced: list[Any]) -> None:
    services.policy_update(user=None, changes={"capacity": 4, "high_watermark": 0.5, "low_watermark": 0.25})
    for _ in range(3):
        admit_item()
    alerts.evaluate_alerts()
    admit_item()
    assert Queue.current().mode == "shedding"
    alerts.evaluate_alerts()
    alerts.evaluate_alerts()
    assert list(Alert.objects.filter(condition="mode").values_list("kind", flat=True)) == ["fired"]
    assert list(Alert.objects.filter(condition="shedding").values_list("kind", flat=True)) == ["fired"]


def test_a_mode_change_asks_for_an_evaluation_after_the_commit(
    admit_item: Any, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    asked: list[int] = []
    monkeypatch.setattr("reviewqueue.services.depth.announce_mode_change", asked.append)
    services.policy_update(user=None, changes={"capacity": 4, "high_watermark": 0.5, "low_watermark": 0.25})
    with django_capture_on_commit_callbacks(execute=True):
        admit_item()
        admit_item()  # depth 2: still normal
    assert asked == []
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        admit_item()  # depth 3: draft
        assert asked == []  # not before the commit
    assert asked == [Queue.default().pk] and callbacks


def test_a_stale_mode_change_evaluation_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[dict[str, Any]] = []

    class App:
        def send_task(self, name: str, **options: Any) -> None:
            sent.append({"name": name, **options})

    monkeypatch.setattr("celery.current_app", App())
    announce_mode_change(7)
    assert sent == [
        {
            "name": "reviewqueue.tasks.evaluate_alerts",
            "kwargs": {"queue_id": 7},
            "ignore_result": True,
            "retry": False,
            "expires": depth.ALERTS_TASK_EXPIRES_SECONDS,
        }
    ]


def test_the_failing_deliveries_reading_counts_in_words(admit_item: Any) -> None:
    now = timezone.now()
    item = admit_item().item

    def failing(n: int) -> str:
        WebhookDelivery.objects.all().delete()
        for i in range(n):
            WebhookDelivery.objects.create(
                event_id=f"evt_{i}",
                event_type="item.decided",
                item=item,
                url="http://hooks.test/",
                body="{}",
                ordering_key=f"item:{item.pk}",
                attempts=2,
                last_attempt_at=now,
                next_attempt_at=now,
            )
        reading = next(r for r in alerts.team_readings(now, []) if r.condition == "webhooks_failing")
        return reading.detail

    assert failing(1) == "1 webhook delivery failing"
    assert failing(3) == "3 webhook deliveries failing"
