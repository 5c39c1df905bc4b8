"""Leases: a reviewer claims an item for a while, renews, or gives it back.

``claim`` locks the chosen item row (``SELECT ... FOR UPDATE SKIP LOCKED``
inside one ``UPDATE`` on PostgreSQL, see ``claim_pg``; a conditional update
elsewhere); ``expire_leases`` (the beat task's sweep) updates expired rows;
``release`` and ``renew`` lock the held item's row (and write what they did
on the lease's one ``LeaseRecord`` row, under that lock). None
of them takes a queue row's lock: a lease moves no item in or out of the
waiting set, so the kept depth does not change.

A reviewer claims only from the queues they review
(``Queue.objects.reviewable_by``); every other lease operation needs the
lease claim gave and reads the membership again, so no reviewer acts on an
item outside their queues, even one they claimed before they left it. Every
way of losing the right to review a queue releases the leases held on it
(``release_lost_leases``), so the item waits again for the others.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from .. import access, policy
from ..models import OPERATOR_ROUND, Judgement, LeaseRecord, Queue, ReviewerStanding, ReviewItem
from . import claim_pg, review_quality
from .errors import AlreadyDecided, LeaseExpired, NotLeaseHolder, QueueError

log = logging.getLogger("reviewqueue.services")


class NotAQueueOfYours(QueueError):
    """A reviewer named a queue they do not review (or one that does not
    exist: the two read alike, so a name tells nothing)."""

    code = "not_your_queue"


def expire_leases(*, now: datetime | None = None) -> int:
    """Put items whose lease ran out back in the queue; the ``expire_leases``
    beat task runs it. ``claim`` does not wait for it: it takes an item whose
    lease ran out itself. Safe to repeat."""
    now = now or timezone.now()
    # A gold copy goes back like a real item: it waits for the next reviewer.
    expired = ReviewItem.all_objects.filter(status=ReviewItem.Status.CLAIMED, lease_expires_at__lt=now).update(
        status=ReviewItem.Status.PENDING,
        lease_holder=None,
        lease_expires_at=None,
        lease_expiries=F("lease_expiries") + 1,
    )
    # And the leases of holders who may no longer review, lost in a way no
    # event told of (operators' reviewing turned off by a restart).
    release_lost_leases(now=now)
    return expired


def current_claim(*, reviewer: AbstractBaseUser, now: datetime | None = None) -> ReviewItem | None:
    """The item the reviewer holds under a live lease, if any (a gold copy
    served to them included). Reads only."""
    now = now or timezone.now()
    return _held_by(reviewer, now).order_by("claimed_at").first()


def _held_by(reviewer: AbstractBaseUser, now: datetime) -> QuerySet[ReviewItem]:
    """Items under the reviewer's live lease in a queue they still review: a
    lease kept from before they left a queue holds nothing for them."""
    return ReviewItem.all_objects.filter(
        status=ReviewItem.Status.CLAIMED,
        lease_holder=reviewer,
        lease_expires_at__gte=now,
        queue__in=Queue.objects.reviewable_by(reviewer),
    )


def claim(
    *,
    reviewer: AbstractBaseUser,
    exclude: Collection[int] = (),
    now: datetime | None = None,
    lease_seconds: int | None = None,
    queue: Queue | str | None = None,
) -> ReviewItem | None:
    """The reviewer's next item under a lease: the one they already hold, else
    the next claimable item of the queues they review, passing over ``exclude``
    (items the reviewer skipped). None when nothing is left to claim.

    Which queue serves: ``policy.next_queue``'s rule over each queue's head
    (its next claimable item): the highest priority first, then the fuller
    queue against its capacity, then the item that waited longest, then the
    slug (ARCHITECTURE.md, "Many queues"). One statement reads every head
    (``queue_heads``); the claim then runs inside the chosen queue, with that
    queue's lease length, and goes on to the next queue in the same order
    when nothing there is left for this reviewer (locked by others, or
    already answered by them in a double review). ``queue`` (a slug or a
    row) claims from that queue only; a queue the reviewer may not review
    raises NotAQueueOfYours, whether it exists or not.

    Claimable means pending, or claimed under a lease that ran out: the sweep
    (``expire_leases``, a beat task) may run late, so claim takes such an item
    itself and counts the expiry on it (``lease_expiries``); the late holder's
    verdict is then refused with LeaseExpired. ``lease_seconds`` overrides the
    queue's lease length.

    Two reviewers never get the same item: on PostgreSQL one ``UPDATE ...
    WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED)`` skips rows another
    transaction has locked; elsewhere a conditional update decides the race.
    Safe to repeat: a reviewer holding a live lease gets the same item back.
    """
    now = now or timezone.now()
    heads, paused, held = queue_heads(reviewer=reviewer, now=now, exclude=exclude, queue=queue)
    mine = current_claim(reviewer=reviewer, now=now) if held is not None else None
    if mine is not None:  # (None: given back since the heads were read; claim on)
        return mine
    if paused:
        return None
    order = sorted((head for head in heads if head.head.waiting), key=lambda head: policy.serving_key(head.head))
    if not order:
        return None
    return _claim_in_order(reviewer, order, exclude, now, lease_seconds)


def _claim_in_order(
    reviewer: AbstractBaseUser, order: list[Head], exclude: Collection[int], now: datetime, lease_seconds: int | None
) -> ReviewItem | None:
    """Claim in the first queue of ``order`` that still has an item for this
    reviewer, under that queue's lease length unless ``lease_seconds`` is given."""
    passed = set(exclude)
    for head in order:
        lease = lease_seconds or head.lease_seconds
        while True:
            if connection.vendor == "postgresql":
                item = claim_pg.claim_one_statement(reviewer.pk, passed, now, lease, queue_id=head.queue_id)
            else:
                item = _claim_general(reviewer, passed, now, timedelta(seconds=lease), head.queue_id)
            if item is None or item.gold_id is None or review_quality.fill_copy(item, reviewer):
                break
            review_quality.give_back_copy(item)  # nothing in it this reviewer has not seen: the next reviewer's
            passed.add(item.pk)
        if item is not None:
            return item
    return None


@dataclass(frozen=True)
class Head:
    """One of the reviewer's queues as claim ranks it: ``head`` is what
    ``policy.next_queue`` reads; the rest is what the claim needs."""

    queue_id: int
    head: policy.QueueHead
    lease_seconds: int
    arrived_at: datetime | None


def focused_queue(reviewer: AbstractBaseUser, queue: Queue | str) -> Queue:
    """The named queue if the reviewer reviews it; NotAQueueOfYours otherwise,
    in the same words whether it exists or not."""
    slug = queue.slug if isinstance(queue, Queue) else str(queue)
    found = Queue.objects.reviewable_by(reviewer).filter(slug=slug).first()
    if found is None:
        raise NotAQueueOfYours(f"you do not review a queue {slug!r}")
    return found


def queue_heads(
    *,
    reviewer: AbstractBaseUser,
    now: datetime,
    exclude: Collection[int] = (),
    queue: Queue | str | None = None,
) -> tuple[list[Head], bool, int | None]:
    """Each of the reviewer's queues (or only ``queue``) with its next item
    claimable by this reviewer, whether the reviewer is paused, and the id of
    the item they hold under a live lease (any queue's, a gold copy
    included), if any: one statement. Each head is a subquery per queue that reads the partial index
    ``queue_next_item`` (queue, priority descending, age, id) from its start,
    so it costs the same with ten pending items or ten thousand, and the
    statement grows with the number of queues, never with their items. On
    PostgreSQL the statement is written once and prepared (``claim_pg``)."""
    if connection.vendor == "postgresql" and getattr(reviewer, "is_authenticated", False):
        slug = None if queue is None else (queue.slug if isinstance(queue, Queue) else str(queue))
        found = claim_pg.queue_heads_one_statement(reviewer.pk, now, exclude, slug)
        if not found and slug is not None:
            raise NotAQueueOfYours(f"you do not review a queue {slug!r}")
    else:
        found = _queue_heads_orm(reviewer, now, exclude, queue)
    heads = [
        Head(
            queue_id=pk,
            head=policy.QueueHead(
                slug=slug,
                priority=priority,
                depth=depth,
                capacity=max(capacity, 1),
                arrived=arrived.timestamp() if arrived is not None else None,
            ),
            lease_seconds=lease,
            arrived_at=arrived,
        )
        for pk, slug, depth, capacity, lease, priority, arrived, _, _ in found
    ]
    if not found:  # no queue to read the standing and the lease beside: read them alone
        mine = current_claim(reviewer=reviewer, now=now)
        return heads, review_quality.is_paused(reviewer), mine.pk if mine is not None else None
    return heads, bool(found[0][-2]), found[0][-1]


def _queue_heads_orm(
    reviewer: AbstractBaseUser, now: datetime, exclude: Collection[int], queue: Queue | str | None
) -> list[tuple[Any, ...]]:
    """queue_heads' rows through the ORM (SQLite, and any other database)."""
    rows = Queue.objects.reviewable_by(reviewer)
    if queue is not None:
        rows = rows.filter(pk=focused_queue(reviewer, queue).pk)
    nxt = _claimable_rows(reviewer, now, exclude).filter(queue=OuterRef("pk")).order_by("-priority", "created_at", "pk")
    paused = ReviewerStanding.objects.filter(reviewer=reviewer, paused_at__isnull=False)
    held = _held_by(reviewer, now).order_by("claimed_at")
    return list(
        rows.annotate(
            head_priority=Subquery(nxt.values("priority")[:1]),
            head_arrived=Subquery(nxt.values("created_at")[:1]),
            paused=Exists(paused),
            held=Subquery(held.values("pk")[:1]),
        ).values_list(
            "pk", "slug", "depth", "capacity", "lease_seconds", "head_priority", "head_arrived", "paused", "held"
        )
    )


def _claimable_rows(reviewer: AbstractBaseUser, now: datetime, exclude: Collection[int]) -> QuerySet[ReviewItem]:
    """Items this reviewer may claim now: pending, or claimed under a lease
    that ran out; never one they already answered in a double review, one
    only an operator settles, or one they skipped (``exclude``). The status
    is also named as the partial index's condition, so the index serves."""
    answered = Judgement.objects.filter(item=OuterRef("pk"), reviewer=reviewer)
    rows = (
        ReviewItem.all_objects.filter(status__in=ReviewItem.WAITING)
        .filter(Q(status=ReviewItem.Status.PENDING) | Q(lease_expires_at__lt=now))
        .filter(review_round__lt=OPERATOR_ROUND)
        .exclude(Q(review_round__gt=1) & Exists(answered))
    )
    if exclude:
        rows = rows.exclude(pk__in=list(exclude))
    return rows


def _claimable(reviewer: AbstractBaseUser, now: datetime, exclude: Collection[int], queue_id: int) -> ReviewItem | None:
    """The queue's next claimable item's ordering fields: the first pending
    one and the first whose lease ran out, each read through its own index,
    whichever comes first by priority then age. Never an item the reviewer
    already answered in a double review."""
    order = ("-priority", "created_at", "pk")
    answered = Judgement.objects.filter(item=OuterRef("pk"), reviewer=reviewer)
    candidates = [
        ReviewItem.all_objects.filter(status=ReviewItem.Status.PENDING),
        ReviewItem.all_objects.filter(status=ReviewItem.Status.CLAIMED, lease_expires_at__lt=now),
    ]
    found = []
    for rows in candidates:
        rows = rows.filter(queue_id=queue_id).exclude(Q(review_round__gt=1) & Exists(answered))
        rows = rows.filter(review_round__lt=OPERATOR_ROUND)
        if exclude:
            rows = rows.exclude(pk__in=list(exclude))
        first = rows.order_by(*order).only("pk", "priority", "created_at", "status").first()
        if first is not None:
            found.append(first)
    return min(found, key=lambda item: (-item.priority, item.created_at, item.pk), default=None)


def _claim_general(
    reviewer: AbstractBaseUser, exclude: Collection[int], now: datetime, lease: timedelta, queue_id: int
) -> ReviewItem | None:
    """Claim in one queue by a conditional update: it wins only if the row is still as read."""
    for _ in range(50):
        candidate = _claimable(reviewer, now, exclude, queue_id)
        if candidate is None:
            return None
        still = ReviewItem.all_objects.filter(pk=candidate.pk, status=candidate.status)
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
            return ReviewItem.all_objects.get(pk=candidate.pk)
    return None


def held_item(
    item_id: int,
    reviewer: AbstractBaseUser,
    now: datetime,
    *,
    with_double_review_rate: bool = False,
    with_lease_seconds: bool = False,
) -> ReviewItem:
    """The item under a row lock, checked to be in a queue the reviewer
    reviews, by someone who still reviews (the role, not paused: else
    NotAQueueOfYours) and under their live lease (a gold copy
    served to them included). ``with_double_review_rate``
    reads its queue's ``double_review_rate`` onto the item in the same
    statement (the queue row is read, not locked); ``with_lease_seconds``
    its queue's lease length likewise."""
    rows = ReviewItem.all_objects.select_for_update()
    own_queue = Queue.objects.filter(pk=OuterRef("queue_id"))
    # Membership is read at every action, in the same statement: a reviewer
    # taken off the queue since the claim acts on nothing of it.
    rows = rows.annotate(reviewable=Exists(Queue.objects.reviewable_by(reviewer).filter(pk=OuterRef("queue_id"))))
    # So are the reviewer's pause and role (the role from the cache that
    # every change of it clears): whoever lost the right acts on nothing.
    rows = rows.annotate(
        holder_paused=Exists(ReviewerStanding.objects.filter(reviewer=reviewer, paused_at__isnull=False))
    )
    if with_double_review_rate:
        rows = rows.annotate(double_review_rate=Subquery(own_queue.values("double_review_rate")[:1]))
    if with_lease_seconds:
        rows = rows.annotate(queue_lease_seconds=Subquery(own_queue.values("lease_seconds")[:1]))
    try:
        item = rows.get(pk=item_id)
    except ReviewItem.DoesNotExist:
        raise QueueError(f"item #{item_id} does not exist") from None
    if not item.reviewable or item.holder_paused or not access.has_permission(reviewer, access.REVIEW_PERMISSION):
        raise NotAQueueOfYours(f"item #{item_id} is in a queue you do not review")
    if item.status in ReviewItem.DECIDED or item.status == ReviewItem.Status.GOLD:
        raise AlreadyDecided(f"item #{item_id} was already decided ({item.get_status_display()})")
    if item.status == ReviewItem.Status.SHED:
        raise QueueError(f"item #{item_id} was shed from the queue")
    if item.status != ReviewItem.Status.CLAIMED or item.lease_holder_id != reviewer.pk:
        if Judgement.objects.filter(item=item, reviewer=reviewer).exists():
            # Their answer in a double review is in; the item waits for someone else.
            raise AlreadyDecided(f"you already answered item #{item_id}")
        if item.lease_expiries:
            # The late holder of a lease that ran out and was swept back.
            raise LeaseExpired(f"the lease on item #{item_id} expired; it went back to the queue")
        raise NotLeaseHolder(f"item #{item_id} is not claimed by you")
    if item.lease_expires_at is None or item.lease_expires_at < now:
        raise LeaseExpired(f"your lease on item #{item_id} expired")
    return item


def may_hold() -> Q:
    """On ``ReviewItem`` rows: the lease holder may still review the item's
    queue. Active, not paused, holding a permission that lets them review
    (``access.reviewers``, which follows ``REVIEWQUEUE_OPERATORS_REVIEW``) or
    a superuser, and a reviewer of the queue (it is open to all, names them,
    or names one of their groups)."""
    allowed = (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(Q(is_superuser=True) | Q(pk__in=access.reviewers().values("pk")))
        .exclude(standing__paused_at__isnull=False)
    )
    member = Queue.objects.filter(pk=OuterRef("queue_id")).filter(
        Q(open_to_all=True)
        | Q(members=OuterRef("lease_holder_id"))
        | Q(member_groups__user=OuterRef("lease_holder_id"))
    )
    return Q(lease_holder__in=allowed.values("pk")) & Q(Exists(member))


def release_lost_leases(
    *, queue_ids: Collection[int] | None = None, user_ids: Collection[Any] | None = None, now: datetime | None = None
) -> int:
    """Give back every item held by someone who may no longer review it
    (``may_hold``), of ``queue_ids`` or held by ``user_ids`` when given, in the
    caller's transaction: each waits again for the queue's other reviewers,
    a gold copy too. The one path every loss of the right takes: a queue's
    reviewers changed (``set_reviewers``, the admin), a group or a role
    changed, a user deactivated, deleted or paused (``reviewqueue.signals``),
    and the lease sweep (``expire_leases``), for a change no event tells of
    (``REVIEWQUEUE_OPERATORS_REVIEW`` turned off). Then drops the gold
    copies nobody left could be shown (``review_quality.drop_unserved_copies``).
    Safe to repeat; answers how many leases were released."""
    held = ReviewItem.all_objects.filter(status=ReviewItem.Status.CLAIMED)
    if queue_ids is not None:
        held = held.filter(queue_id__in=list(queue_ids))
    if user_ids is not None:
        held = held.filter(lease_holder_id__in=list(user_ids))
    lost = held.filter(Q(lease_holder__isnull=True) | ~may_hold())  # (NULL: the holder was deleted)
    released = lost.update(
        status=ReviewItem.Status.PENDING,
        lease_holder=None,
        lease_expires_at=None,
        updated_at=now or timezone.now(),
    )
    if released:
        log.info("leases released: their holders no longer review the queue", extra={"items": released})
    # Copies are kept only where someone could be shown them, as they are placed.
    review_quality.drop_unserved_copies(queue_ids)
    return released


def release_held_by(user_ids: Collection[Any]) -> int:
    """Give back every item these users hold (they are being deleted)."""
    return ReviewItem.all_objects.filter(status=ReviewItem.Status.CLAIMED, lease_holder_id__in=list(user_ids)).update(
        status=ReviewItem.Status.PENDING, lease_holder=None, lease_expires_at=None, updated_at=timezone.now()
    )


def release(*, item_id: int, reviewer: AbstractBaseUser, now: datetime | None = None) -> ReviewItem:
    """Give a claimed item back to the queue (skip), and keep the skip on the
    lease's ``LeaseRecord`` for the item's timeline. Only the lease holder
    may; a second call finds no lease of theirs and refuses."""
    now = now or timezone.now()
    with transaction.atomic():
        item = held_item(item_id, reviewer, now)  # a gold copy goes back as any item does
        _record_lease(item, reviewer, now, released_at=now)
        item.status = ReviewItem.Status.PENDING
        item.lease_holder = None
        item.lease_expires_at = None
        item.save(update_fields=["status", "lease_holder", "lease_expires_at", "updated_at"])
        return item


def renew(*, item_id: int, reviewer: AbstractBaseUser, now: datetime | None = None) -> ReviewItem:
    """Extend the holder's live lease by its queue's lease length, and count
    the renewal on the lease's one ``LeaseRecord`` row (written the first
    time, updated after). Safe to repeat: each call is one more renewal."""
    now = now or timezone.now()
    with transaction.atomic():
        item = held_item(item_id, reviewer, now, with_lease_seconds=True)
        item.lease_expires_at = now + timedelta(seconds=item.queue_lease_seconds)
        item.save(update_fields=["lease_expires_at", "updated_at"])
        _count_renewal(item, reviewer, now)
        return item


def _count_renewal(item: ReviewItem, reviewer: AbstractBaseUser, now: datetime) -> None:
    """One more renewal on the lease's row."""
    _record_lease(item, reviewer, now, renewed=True)


def _record_lease(
    item: ReviewItem,
    reviewer: AbstractBaseUser,
    now: datetime,
    *,
    renewed: bool = False,
    released_at: datetime | None = None,
) -> None:
    """Write a renewal or a skip on the lease's one row. The item's row lock,
    held by the caller, serialises the writes of one lease, so the update
    finds the row or, the first time, nothing, and the insert cannot collide."""
    lease = {"item_id": item.pk, "holder_id": reviewer.pk, "claimed_at": item.claimed_at or now}
    changes: dict[str, Any] = {"expires_at": item.lease_expires_at or now}
    if renewed:
        changes.update(renewals=F("renewals") + 1, last_at=now)
    if released_at is not None:
        changes["released_at"] = released_at
    if not LeaseRecord.objects.filter(**lease).update(**changes):
        first = {"renewals": 1, "first_at": now, "last_at": now} if renewed else {}
        LeaseRecord.objects.create(**lease, **{**changes, **first})
