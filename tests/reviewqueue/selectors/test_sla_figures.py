"""Live SLA figures per queue: time to verdict p50/p95 over the last hour
and day, the share within the SLA, the oldest waiting age and the forecast,
on the dashboard, in /api/stats and on /metrics."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from reviewqueue import services, stats
from reviewqueue.models import Queue, ReviewItem
from reviewqueue.tokens import issue_token

pytestmark = pytest.mark.django_db


def decided_after(admit_item: Any, reviewer: User, minutes: float) -> ReviewItem:
    """An item decided ``minutes`` after its admission, just now."""
    item = admit_item().item
    claimed = services.claim(reviewer=reviewer)
    services.decide(item_id=claimed.pk, reviewer=reviewer, approve=True)
    now = timezone.now()
    ReviewItem.objects.filter(pk=item.pk).update(created_at=now - timedelta(minutes=minutes), decided_at=now)
    return item


def test_time_to_verdict_and_the_share_within_the_sla(admit_item: Any, reviewer: User) -> None:
    services.policy_update(user=None, changes={"sla_minutes": 30})
    for minutes in (10, 20, 40, 50):
        decided_after(admit_item, reviewer, minutes)
    old = decided_after(admit_item, reviewer, 5)
    ReviewItem.objects.filter(pk=old.pk).update(decided_at=timezone.now() - timedelta(hours=3))  # day, not hour
    hour = stats.verdict_times(Queue.current(), "hour", now=timezone.now())
    day = stats.verdict_times(Queue.current(), "day", now=timezone.now())
    assert hour.n == 4 and day.n == 5
    assert hour.within_sla == 0.5 and day.within_sla == 0.6
    assert hour.p50_seconds == pytest.approx(30 * 60, abs=2)
    assert hour.p95_seconds == pytest.approx(48.5 * 60, abs=2)


def test_api_stats_carries_the_sla_and_the_forecast(client: Client, admit_item: Any) -> None:
    services.policy_update(user=None, changes={"sla_minutes": 30})
    admit_item()
    ReviewItem.objects.update(created_at=timezone.now() - timedelta(minutes=45))
    _, token = issue_token(name="fleet-a", scopes=["outputs"])
    body = client.get("/api/stats", headers={"Authorization": f"Bearer {token}"}).json()
    sla = body["sla"]
    assert sla["sla_minutes"] == 30
    assert sla["oldest_waiting_seconds"] == pytest.approx(45 * 60, abs=5)
    assert set(sla["time_to_verdict"]) == {"hour", "day"}
    assert sla["forecast"]["minutes_to_sla_breach"] == 0
    assert "passed its 30-min target" in sla["forecast"]["text"]


def test_the_dashboard_says_the_forecast_in_words(client: Client, operator: User, admit_item: Any) -> None:
    services.policy_update(user=None, changes={"sla_minutes": 30, "capacity": 20})
    for _ in range(6):  # 6 arrivals in 15 min, no decisions: 0.4 / min, draft mode past depth 16
        admit_item()
    client.force_login(operator)
    body = client.get("/ops/").content.decode()
    assert 'id="forecast-line"' in body
    assert "At this pace: draft mode in about" in body
    assert "the oldest item passes its 30-min target in about" in body


def test_a_quiet_queue_is_stable(client: Client, operator: User) -> None:
    client.force_login(operator)
    assert "At this pace: stable." in client.get("/ops/").content.decode()


def _samples(body: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_metrics_carry_the_sla_series_by_queue(client: Client, operator: User, reviewer: User, admit_item: Any) -> None:
    services.policy_update(user=None, changes={"sla_minutes": 30})
    services.create_queue(user=None, slug="empty")
    decided_after(admit_item, reviewer, 10)
    decided_after(admit_item, reviewer, 45)
    admit_item()
    ReviewItem.objects.filter(status="pending").update(created_at=timezone.now() - timedelta(minutes=2))
    client.force_login(operator)
    samples = _samples(client.get("/metrics").content.decode())
    default, empty = (("queue", "default"),), (("queue", "empty"),)
    assert samples[("reviewqueue_oldest_pending_age_seconds", default)] == pytest.approx(120, abs=5)
    assert samples[("reviewqueue_sla_attainment_ratio", default)] == 0.5
    assert math.isnan(samples[("reviewqueue_sla_attainment_ratio", empty)])
    assert samples[("reviewqueue_time_to_verdict_seconds_count", default)] == 2
    assert samples[("reviewqueue_time_to_verdict_seconds_bucket", (("le", "900"), *default))] == 1
    assert samples[("reviewqueue_time_to_verdict_seconds_bucket", (("le", "3600"), *default))] == 2
    assert samples[("reviewqueue_time_to_verdict_seconds_sum", default)] == pytest.approx(55 * 60, abs=5)
