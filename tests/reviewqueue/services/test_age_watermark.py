"""The age watermark in the live queue: an item waiting too long turns on
draft mode with the depth far below the depth watermark, on both admission
paths, on a verdict and on the depth sampler's look; normal flow comes back
only when age and depth are both low."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.utils import timezone

from reviewqueue import services
from reviewqueue.models import ModeChange, Queue, ReviewItem
from reviewqueue.services import admission_pg, depth

AGE = {"age_high_minutes": 20.0, "age_low_minutes": 5.0}


def age_back(minutes: float) -> None:
    """Make every waiting item have waited ``minutes``."""
    ReviewItem.objects.filter(status__in=ReviewItem.WAITING).update(
        created_at=timezone.now() - timedelta(minutes=minutes)
    )


@pytest.mark.django_db
def test_an_old_item_turns_on_draft_at_the_next_admission(admit_item: Callable[..., Any]) -> None:
    services.policy_update(user=None, changes=AGE)
    admit_item()
    age_back(25)
    with transaction.atomic():  # the general path
        result = admit_item()
    assert (result.mode, result.depth) == ("draft", 2)  # depth 2 of 50, far below the depth watermark (40)
    change = ModeChange.objects.get()
    assert (change.previous, change.mode, change.depth) == ("normal", "draft", 2)


@pytest.mark.django_db
def test_without_an_age_watermark_the_same_old_item_changes_nothing(admit_item: Callable[..., Any]) -> None:
    admit_item()
    age_back(25)
    with transaction.atomic():
        assert admit_item().mode == "normal"


@pytest.mark.django_db
def test_the_depth_sampler_turns_on_draft_when_time_alone_passes(admit_item: Callable[..., Any]) -> None:
    services.policy_update(user=None, changes=AGE)
    admit_item()
    age_back(21)
    depth.record_depth_sample(now=timezone.now())
    assert Queue.current().mode == "draft"


@pytest.mark.django_db
def test_draft_ends_only_when_the_oldest_is_young_and_the_depth_low(
    admit_item: Callable[..., Any], reviewer: User
) -> None:
    services.policy_update(user=None, changes=AGE)
    first = admit_item()
    admit_item()
    age_back(25)
    depth.record_depth_sample(now=timezone.now())
    assert Queue.current().mode == "draft"
    # The old item is decided; the other is still 25 minutes old: draft holds.
    services.claim(reviewer=reviewer)
    services.decide(item_id=first.item.pk, reviewer=reviewer, approve=True)
    assert Queue.current().mode == "draft"
    age_back(1)
    depth.record_depth_sample(now=timezone.now())
    assert Queue.current().mode == "normal"


@pytest.mark.django_db
def test_the_policy_page_edits_and_audits_the_age_watermark_and_sla(client: Any, operator: User) -> None:
    from django.urls import reverse

    from reviewqueue.models import PolicyAudit

    client.force_login(operator)
    data = {k: v for k, v in Queue.current().snapshot().items() if v is not None}
    data.update(sla_minutes=30, age_high_minutes=20, age_low_minutes=5)
    assert client.post(reverse("ops:policy"), data).status_code == 302
    queue = Queue.current()
    assert (queue.sla_minutes, queue.age_high_minutes, queue.age_low_minutes) == (30, 20.0, 5.0)
    assert PolicyAudit.objects.get().changes == {
        "sla_minutes": [60, 30],
        "age_high_minutes": [None, 20.0],
        "age_low_minutes": [None, 5.0],
    }
    data.update(age_low_minutes=25)
    response = client.post(reverse("ops:policy"), data)
    assert response.status_code == 400
    assert "age_low_minutes" in response.context["form"].errors
    data.pop("age_low_minutes")
    response = client.post(reverse("ops:policy"), data)
    assert response.status_code == 400 and "age_low_minutes" in response.context["form"].errors


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement path is PostgreSQL's")
def test_the_one_statement_path_hands_an_old_queue_to_the_policy(
    admit_item: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[str] = []
    inner = admission_pg.admit_one_statement

    def spy(*args: Any, **kwargs: Any) -> Any:
        result = inner(*args, **kwargs)
        taken.append("one statement" if result is not None else "general")
        return result

    monkeypatch.setattr(admission_pg, "admit_one_statement", spy)
    services.policy_update(user=None, changes=AGE)
    admit_item()
    assert admit_item().mode == "normal"
    assert taken[-1] == "one statement"  # young items: the statement admits
    age_back(25)
    result = admit_item()
    assert taken[-1] == "general" and result.mode == "draft" and result.depth == 3
    assert Queue.current().depth == services.queue_depth()
