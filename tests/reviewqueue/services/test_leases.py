"""claim / release / renew and lease expiry, called directly."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from reviewqueue import services
from reviewqueue.models import Queue, ReviewItem, Verdict
from reviewqueue.tasks import expire_leases as expire_leases_task

pytestmark = pytest.mark.django_db


# --- claim ---------------------------------------------------------------------------------


def test_it_claims_by_priority_then_age(admit_item: Any, reviewer: Any, make_user: Any) -> None:
    now = timezone.now()
    old_low = admit_item(priority=1, now=now - timedelta(minutes=5)).item
    young_high = admit_item(priority=3, now=now).item
    old_high = admit_item(priority=3, now=now - timedelta(minutes=1)).item
    order = []
    for name in ("a", "b", "c"):
        item = services.claim(reviewer=make_user(name, "reviewer"))
        order.append(item.pk)
    assert order == [old_high.pk, young_high.pk, old_low.pk]


def test_it_gives_a_reviewer_back_the_item_they_hold(admit_item: Any, reviewer: Any) -> None:
    admit_item()
    admit_item()
    first = services.claim(reviewer=reviewer)
    assert services.claim(reviewer=reviewer).pk == first.pk
    assert ReviewItem.objects.filter(status=ReviewItem.Status.CLAIMED).count() == 1


def test_it_answers_none_on_an_empty_queue(reviewer: Any) -> None:
    assert services.claim(reviewer=reviewer) is None


# --- lease expiry --------------------------------------------------------------------------


def test_it_lets_another_reviewer_take_an_expired_lease(
    claimed: ReviewItem, lease_over: datetime, make_user: Any
) -> None:
    other = make_user("olga", "reviewer")
    again = services.claim(reviewer=other, now=lease_over)
    assert again.pk == claimed.pk and again.lease_holder_id == other.pk
    assert again.lease_expiries == 1


def test_it_refuses_the_late_holders_verdict_with_a_clear_error(
    claimed: ReviewItem, lease_over: datetime, reviewer: Any, make_user: Any
) -> None:
    services.claim(reviewer=make_user("olga", "reviewer"), now=lease_over)
    with pytest.raises(services.LeaseExpired, match="expired"):
        services.decide(item_id=claimed.pk, reviewer=reviewer, approve=True, now=lease_over)
    assert not Verdict.objects.exists()


def test_it_refuses_a_verdict_after_expiry_even_before_anyone_reclaims(
    claimed: ReviewItem, lease_over: datetime, reviewer: Any
) -> None:
    with pytest.raises(services.LeaseExpired):
        services.decide(item_id=claimed.pk, reviewer=reviewer, approve=True, now=lease_over)


def test_a_late_sweep_changes_nothing_for_claim_decide_or_the_accounting(
    admit_item: Any, reviewer: Any, make_user: Any
) -> None:
    """No sweep runs: the lease is over, another reviewer claims the item
    anyway, the first holder's verdict is refused, and kept depth == waiting."""
    admit_item()
    admit_item()
    mine = services.claim(reviewer=reviewer)
    lease_over = mine.lease_expires_at + timedelta(seconds=1)
    olga = make_user("olga", "reviewer")
    taken = services.claim(reviewer=olga, now=lease_over)
    assert taken.pk == mine.pk and taken.lease_holder_id == olga.pk and taken.lease_expiries == 1
    with pytest.raises(services.LeaseExpired):
        services.decide(item_id=mine.pk, reviewer=reviewer, approve=True, now=lease_over)
    services.decide(item_id=taken.pk, reviewer=olga, approve=True, now=lease_over)
    assert Verdict.objects.get().reviewer_id == olga.pk
    assert services.expire_leases(now=lease_over) == 0  # the late sweep finds nothing left to do
    assert Queue.current().depth == services.queue_depth() == 1


def test_the_sweep_puts_expired_leases_back_and_is_safe_to_repeat(claimed: ReviewItem, lease_over: datetime) -> None:
    assert expire_leases_task.run() == 0  # nothing has run out yet
    assert services.expire_leases(now=lease_over) == 1
    assert services.expire_leases(now=lease_over) == 0
    item = ReviewItem.objects.get(pk=claimed.pk)
    assert item.status == ReviewItem.Status.PENDING and item.lease_expiries == 1


# --- release and renew ---------------------------------------------------------------------


def test_it_releases_an_item_back_to_the_queue(claimed: ReviewItem, reviewer: Any, make_user: Any) -> None:
    services.release(item_id=claimed.pk, reviewer=reviewer)
    assert services.claim(reviewer=make_user("olga", "reviewer")).pk == claimed.pk


def test_it_renews_a_live_lease(claimed: ReviewItem, reviewer: Any) -> None:
    soon = timezone.now() + timedelta(seconds=100)
    renewed = services.renew(item_id=claimed.pk, reviewer=reviewer, now=soon)
    assert renewed.lease_expires_at > claimed.lease_expires_at


def test_it_refuses_release_and_renew_by_someone_else(claimed: ReviewItem, make_user: Any) -> None:
    other = make_user("olga", "reviewer")
    with pytest.raises(services.NotLeaseHolder):
        services.release(item_id=claimed.pk, reviewer=other)
    with pytest.raises(services.NotLeaseHolder):
        services.renew(item_id=claimed.pk, reviewer=other)
