"""Leases: a reviewer claims an item for a while, renews, or gives it back.

``claim`` locks the chosen item row (``SELECT ... FOR UPDATE SKIP LOCKED``
inside one ``UPDATE`` on PostgreSQL, see ``claim_pg``; a conditional update
elsewhere); ``expire_leases`` (the beat task's sweep) updates expired rows;
``release`` and ``renew`` lock
the held item's row. None of them takes the policy row's lock: a lease moves
no item in or out of the waiting set, so the kept depth does not change.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Q, Subquery
from django.utils import timezone

from ..models import DEFAULT_QUEUE, OPERATOR_ROUND, Judgement, Queue, ReviewerStanding, ReviewItem
from . import claim_pg, quality
from .errors import AlreadyDecided, LeaseExpired, NotLeaseHolder, QueueError


def expire_leases(*, now: datetime | None = None) -> int:
    """Put items whose lease ran out back in the queue; the ``expire_leases``
    beat task runs it. ``claim`` does not wait for it: it takes an item whose
    lease ran out itself. Safe to repeat."""
    now = now or timezone.now()
    quality.expire_gold_copies(now)  # a gold copy never goes back to the queue
    return ReviewItem.objects.filter(status=ReviewItem.Status.CLAIMED, lease_expires_at__lt=now).update(
        status=ReviewItem.Status.PENDING,
        lease_holder=None,
        lease_expires_at=None,
        lease_expiries=F("lease_expiries") + 1,
    )


def current_claim(*, reviewer: AbstractBaseUser, now: datetime | None = None) -> ReviewItem | None:
    """The item the reviewer holds under a live lease, if any (a gold copy
    served to them included). Reads only."""
    now = now or timezone.now()
    return (
        ReviewItem.all_objects.filter(
            status=ReviewItem.Status.CLAIMED, lease_holder=reviewer, lease_expires_at__gte=now
        )
        .order_by("claimed_at")
        .first()
    )


def claim(
    *,
    reviewer: AbstractBaseUser,
    exclude: Collection[int] = (),
    now: datetime | None = None,
    lease_seconds: int | None = None,
) -> ReviewItem | None:
    """The reviewer's next item under a lease: the one they already hold, else
    the next claimable item by priority then age, passing over ``exclude``
    (items the reviewer skipped). None when nothing is left to claim.

    Claimable means pending, or claimed under a lease that ran out: the sweep
    (``expire_leases``, a beat task) may run late, so claim takes such an item
    itself and counts the expiry on it (``lease_expiries``); the late holder's
    verdict is then refused with LeaseExpired. ``lease_seconds`` spares the
    read of the policy's lease length when the caller has it.

    Two reviewers never get the same item: on PostgreSQL one ``UPDATE ...
    WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED)`` skips rows another
    transaction has locked; elsewhere a conditional update decides the race.
    Safe to repeat: a reviewer holding a live lease gets the same item back.
    """
    now = now or timezone.now()
    held = current_claim(reviewer=reviewer, now=now)
    if held is not None:
        return held
    gold = quality.serve_gold(reviewer, now, lease_seconds)
    if gold is not None:
        return gold
    if connection.vendor == "postgresql":
        return claim_pg.claim_one_statement(reviewer.pk, exclude, now, lease_seconds)
    # The lease length and whether the reviewer is paused, in one statement.
    paused = ReviewerStanding.objects.filter(reviewer=reviewer, paused_at__isnull=False)
    row = (
        Queue.objects.filter(slug=DEFAULT_QUEUE)
        .annotate(paused=Exists(paused))
        .values_list("lease_seconds", "paused")
        .first()
    )
    if row is None:
        row = (Queue.current().lease_seconds, quality.is_paused(reviewer))
    if row[1]:
        return None
    return _claim_general(reviewer, exclude, now, timedelta(seconds=lease_seconds or row[0]))


def _claimable(reviewer: AbstractBaseUser, now: datetime, exclude: Collection[int]) -> ReviewItem | None:
    """The next claimable item's ordering fields: the first pending one and the
    first whose lease ran out, each read through its own index, whichever
    comes first by priority then age. Never an item the reviewer already
    answered in a double review."""
    order = ("-priority", "created_at", "pk")
    answered = Judgement.objects.filter(item=OuterRef("pk"), reviewer=reviewer)
    candidates = [
        ReviewItem.objects.filter(status=ReviewItem.Status.PENDING),
        ReviewItem.objects.filter(status=ReviewItem.Status.CLAIMED, lease_expires_at__lt=now),
    ]
    found = []
    for rows in candidates:
        rows = rows.exclude(Q(review_round__gt=1) & Exists(answered)).filter(review_round__lt=OPERATOR_ROUND)
        if exclude:
            rows = rows.exclude(pk__in=list(exclude))
        first = rows.order_by(*order).only("pk", "priority", "created_at", "status").first()
        if first is not None:
            found.append(first)
    return min(found, key=lambda item: (-item.priority, item.created_at, item.pk), default=None)


def _claim_general(
    reviewer: AbstractBaseUser, exclude: Collection[int], now: datetime, lease: timedelta
) -> ReviewItem | None:
    """Claim by a conditional update: it wins only if the row is still as read."""
    for _ in range(50):
        candidate = _claimable(reviewer, now, exclude)
        if candidate is None:
            return None
        still = ReviewItem.objects.filter(pk=candidate.pk, status=candidate.status)
        if candidate.status == ReviewItem.Status.CLAIMED:
            still = still.filter(lease_expires_at__lt=now)
        won = still.update(
            status=ReviewItem.Status.CLAIMED,
            lease_holder=reviewer,
            lease_expires_at=now + lease,
            claimed_at=now,
            updated_at=now,
            lease_expiries=F("lease_expiries") + (1 if candidate.status == ReviewItem.Status.CLAIMED else 0),
        )
        if won == 1:
            return ReviewItem.objects.get(pk=candidate.pk)
    return None


def held_item(
    item_id: int, reviewer: AbstractBaseUser, now: datetime, *, with_double_review_rate: bool = False
) -> ReviewItem:
    """The item under a row lock, checked to be under this reviewer's live
    lease (a gold copy served to them included). ``with_double_review_rate``
    reads the policy's ``double_review_rate`` onto the item in the same
    statement (the policy row is read, not locked)."""
    rows = ReviewItem.all_objects.select_for_update()
    if with_double_review_rate:
        rate = Queue.objects.filter(slug=DEFAULT_QUEUE).values("double_review_rate")[:1]
        rows = rows.annotate(double_review_rate=Subquery(rate))
    try:
        item = rows.get(pk=item_id)
    except ReviewItem.DoesNotExist:
        raise QueueError(f"item {item_id} does not exist") from None
    if item.status in ReviewItem.DECIDED or item.status == ReviewItem.Status.GOLD:
        raise AlreadyDecided(f"item {item_id} was already decided ({item.status})")
    if item.status == ReviewItem.Status.SHED:
        raise QueueError(f"item {item_id} was shed from the queue")
    if item.status != ReviewItem.Status.CLAIMED or item.lease_holder_id != reviewer.pk:
        if Judgement.objects.filter(item=item, reviewer=reviewer).exists():
            # Their answer in a double review is in; the item waits for someone else.
            raise AlreadyDecided(f"you already answered item {item_id}")
        if item.lease_expiries:
            # The late holder of a lease that ran out and was swept back.
            raise LeaseExpired(f"the lease on item {item_id} expired; it went back to the queue")
        raise NotLeaseHolder(f"item {item_id} is not claimed by you")
    if item.lease_expires_at is None or item.lease_expires_at < now:
        raise LeaseExpired(f"your lease on item {item_id} expired")
    return item


def release(*, item_id: int, reviewer: AbstractBaseUser, now: datetime | None = None) -> ReviewItem:
    """Give a claimed item back to the queue (skip). Only the lease holder may."""
    now = now or timezone.now()
    with transaction.atomic():
        item = held_item(item_id, reviewer, now)
        if item.gold_id is not None:  # a copy is one reviewer's: skipped, it is gone
            item.delete()
            item.status = ReviewItem.Status.PENDING
            return item
        item.status = ReviewItem.Status.PENDING
        item.lease_holder = None
        item.lease_expires_at = None
        item.save(update_fields=["status", "lease_holder", "lease_expires_at", "updated_at"])
        return item


def renew(*, item_id: int, reviewer: AbstractBaseUser, now: datetime | None = None) -> ReviewItem:
    """Extend the holder's live lease by the policy's lease length. Safe to repeat."""
    now = now or timezone.now()
    lease = timedelta(seconds=Queue.current().lease_seconds)
    with transaction.atomic():
        item = held_item(item_id, reviewer, now)
        item.lease_expires_at = now + lease
        item.save(update_fields=["lease_expires_at", "updated_at"])
        return item
