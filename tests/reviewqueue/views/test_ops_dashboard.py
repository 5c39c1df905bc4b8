"""The operator's live dashboard: who may open it, the live region htmx polls, the depth chart, the
ratio warning, the mode banner and the circuit-breaker log."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from reviewqueue import services
from reviewqueue.models import ModeChange, Queue
from reviewqueue.tasks.periodic import sample_depth

pytestmark = pytest.mark.django_db


def test_it_shows_the_dashboard_to_an_operator(client: Client, operator: User, admit_item: Any) -> None:
    admit_item()
    admit_item()
    client.force_login(operator)
    response = client.get(reverse("ops:dashboard"))
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="depth-value">2<' in body
    assert "capacity 50" in body
    assert "<svg" in body


def test_it_refuses_a_reviewer(client: Client, reviewer: User) -> None:
    client.force_login(reviewer)
    assert client.get(reverse("ops:dashboard")).status_code == 403


def test_it_sends_anonymous_users_to_login(client: Client, db: None) -> None:
    response = client.get(reverse("ops:dashboard"))
    assert response.status_code == 302
    assert "/login/" in response["Location"]


def test_it_returns_only_the_live_region_to_htmx(client: Client, operator: User, admit_item: Any) -> None:
    client.force_login(operator)
    admit_item()
    response = client.get(reverse("ops:dashboard"), headers={"HX-Request": "true", "HX-Target": "live"})
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="live"')
    assert "<html" not in body
    assert 'id="depth-value">1<' in body


def test_it_moves_when_the_queue_fills(client: Client, operator: User, admit_item: Any) -> None:
    client.force_login(operator)
    headers = {"HX-Request": "true", "HX-Target": "live"}
    before = client.get(reverse("ops:dashboard"), headers=headers).content.decode()
    for _ in range(3):
        admit_item()
    after = client.get(reverse("ops:dashboard"), headers=headers).content.decode()
    assert 'id="depth-value">0<' in before
    assert 'id="depth-value">3<' in after


def test_it_refuses_post_on_the_dashboard(client: Client, operator: User) -> None:
    client.force_login(operator)
    assert client.post(reverse("ops:dashboard")).status_code == 405


def test_it_draws_the_sampled_depth_with_capacity_and_watermarks(
    client: Client, operator: User, admit_item: Any
) -> None:
    admit_item()
    sample_depth()
    admit_item()
    sample_depth()
    client.force_login(operator)
    body = client.get(reverse("ops:dashboard")).content.decode()
    assert body.count('class="series-a"') == 1
    assert "mark-capacity" in body and "mark-high" in body and "mark-low" in body
    assert "high 80%" in body and "low 30%" in body


def test_it_warns_when_production_outruns_review(client: Client, operator: User, admit_item: Any) -> None:
    now = timezone.now()
    for minutes_ago in (1, 6, 11):
        admit_item(now=now - timedelta(minutes=minutes_ago))
    client.force_login(operator)
    body = client.get(reverse("ops:dashboard")).content.decode()
    assert 'id="ratio-warning"' in body


def test_it_does_not_warn_when_the_queue_is_quiet(client: Client, operator: User, admit_item: Any) -> None:
    admit_item()
    client.force_login(operator)
    body = client.get(reverse("ops:dashboard")).content.decode()
    assert 'id="ratio-warning"' not in body


def test_it_shows_the_mode_banner_in_draft_mode(client: Client, operator: User, admit_item: Any) -> None:
    services.policy_update(user=None, changes={"capacity": 5})
    for _ in range(5):
        admit_item()
    assert Queue.current().mode != "normal"
    assert ModeChange.objects.exists()
    client.force_login(operator)
    body = client.get(reverse("ops:dashboard")).content.decode()
    assert 'id="mode-banner"' in body


def test_it_lists_the_circuit_breaker_log(client: Client, operator: User, admit_item: Any) -> None:
    services.policy_update(user=None, changes={"capacity": 2})
    admit_item(priority=5)
    admit_item(priority=5)
    result = admit_item(priority=0, task_id="low-prio")
    assert result.outcome == "shed"
    client.force_login(operator)
    body = client.get(reverse("ops:dashboard")).content.decode()
    assert 'id="breaker-log"' in body
    assert "low-prio" in body
    assert "priority 0: 1" in body
