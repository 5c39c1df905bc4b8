"""Bulk actions by filter: an operator requeues, rejects with a label, moves
to another queue or expires every item a filter matches.

The server applies the filter (``selectors.items.matching``), never a list
of ids from the page, and only after the operator has seen how many items it
matches: ``bulk_apply`` recounts and refuses with ``CountChanged`` when the
count is not the one confirmed. Each action is audited (``PolicyAudit``:
who, the filter, the action, how many).

**Locks.** Each item is its own transaction, as a single-item service's: its
row is locked with ``SKIP LOCKED`` and its state checked again under the
lock, so an item a reviewer is deciding at that moment, or that changed
since the count, is skipped and counted as such, never waited on. An item
a reviewer holds under a live lease is never taken from them: only waiting
items with no live lease are rejected, moved or expired, and only items
whose lease has run out are requeued. A shed item is never requeued: its
producer has been told it was shed (the push's answer, ``item.shed``, the
item API), and what leaves is final (ARCHITECTURE.md rule 13), so an expiry
cannot be taken back. The queue's row is taken
last, for the depth, one queue at a time (ARCHITECTURE.md, "Many queues"):
a move adds each item to the new queue's depth in the item's transaction,
then takes it off the old queue's in a transaction of its own, so no
transaction holds two queues and the queue that holds an item always counts
it (for a moment both do).

**What producers hear.** A rejection is an operator's verdict through
``verdicts.settle_item``, the path every verdict takes: its ``item.decided``
event is due once the undo window has closed, the label counts and the tuner
follow. An expiry is an ``item.shed`` event. Requeue and move tell nobody:
the item is still under review.

Safe to repeat: a second call finds no item still eligible (or a different
count, and refuses).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from ..models import PolicyAudit, Queue, ReasonLabel, ReviewItem, Verdict
from ..selectors.items import ItemFilter, matching
from .depth import after_depth_change, take_one_off_depth
from .errors import InvalidInput, QueueError
from .outbox import item_shed
from .review_quality import Answer, settle_copies_with
from .verdicts import settle_item

ACTIONS = ("requeue", "reject", "move", "expire")
# One confirmation acts on at most this many items; narrow the filter for more.
BULK_LIMIT = 5_000


class CountChanged(QueueError):
    """The filter matches another number of items than the one confirmed."""

    code = "count_changed"

    def __init__(self, seen: int, count: int) -> None:
        super().__init__(f"the filter now matches {count} items, not the {seen} you confirmed; check again")
        self.seen = seen
        self.count = count


@dataclass(frozen=True)
class BulkResult:
    action: str
    matched: int
    applied: int
    skipped: int


def eligible(filters: ItemFilter, action: str, now: datetime) -> QuerySet[ReviewItem]:
    """The items the action would change: the filter's matches that the
    action applies to (see the module's docstring on leases)."""
    if action not in ACTIONS:
        raise InvalidInput("action", f"one of {', '.join(ACTIONS)}")
    rows = matching(ReviewItem.objects.all(), filters)
    return rows.filter(_applies(action, now))


def _applies(action: str, now: datetime) -> Q:
    lapsed = Q(status=ReviewItem.Status.CLAIMED) & (Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True))
    if action == "requeue":
        return lapsed
    return Q(status=ReviewItem.Status.PENDING) | lapsed


def _targets(filters: ItemFilter, action: str, target: Queue | None, now: datetime) -> QuerySet[ReviewItem]:
    rows = eligible(filters, action, now)
    return rows.exclude(queue=target) if action == "move" and target is not None else rows


def bulk_count(*, filters: ItemFilter, action: str, target: Queue | None = None, now: datetime | None = None) -> int:
    """How many items the action would change now: what the operator
    confirms. Reads only."""
    return _targets(filters, action, target, now or timezone.now()).count()


def bulk_apply(
    *,
    operator: AbstractBaseUser,
    filters: ItemFilter,
    action: str,
    seen: int,
    reason_label: str = "",
    target: Queue | None = None,
    now: datetime | None = None,
) -> BulkResult:
    """Apply ``action`` to every item the filter matches, once the operator
    has seen ``seen`` of them: a different count now raises CountChanged
    and changes nothing. Audited whatever the outcome of each item."""
    now = now or timezone.now()
    _check(action, reason_label, target)
    if target is not None and filters.queue is not None and target.pk == filters.queue.pk:
        raise InvalidInput("target", "the items are already in that queue")
    rows = _targets(filters, action, target, now)
    pks = list(rows.order_by("pk").values_list("pk", flat=True)[: BULK_LIMIT + 1])
    if len(pks) != seen:
        raise CountChanged(seen, len(pks))
    if len(pks) > BULK_LIMIT:
        raise InvalidInput("filter", f"matches more than {BULK_LIMIT} items; narrow it")
    applied = sum(_apply_one(pk, action, operator, reason_label, target, now) for pk in pks)
    _audit(operator, filters, action, reason_label, target, len(pks), applied, now)
    return BulkResult(action=action, matched=len(pks), applied=applied, skipped=len(pks) - applied)


def _check(action: str, reason_label: str, target: Queue | None) -> None:
    if action not in ACTIONS:
        raise InvalidInput("action", f"one of {', '.join(ACTIONS)}")
    if action == "reject" and reason_label not in ReasonLabel.values:
        raise InvalidInput("reason_label", f"a rejection needs one of {', '.join(ReasonLabel.values)}")
    if action == "move" and (target is None or target.archived):
        raise InvalidInput("target", "choose an active queue to move the items to")


def _apply_one(
    pk: int, action: str, operator: AbstractBaseUser, reason_label: str, target: Queue | None, now: datetime
) -> bool:
    """One item in its own transaction; False when it was skipped (locked
    by someone deciding it, or no longer eligible)."""
    left = None
    with transaction.atomic():
        item = ReviewItem.objects.select_for_update(skip_locked=True).filter(_applies(action, now), pk=pk).first()
        if item is None:
            return False
        if action == "reject":
            answer = Answer(Verdict.Decision.REJECT, reason_label=reason_label, note="rejected in bulk by an operator")
            settle_item(item, operator, answer, "operator", now)
        elif action == "expire":
            _expire(item, now)
        elif action == "requeue":
            _requeue(item, now)
        else:
            assert target is not None
            left = _move(item, target, now)
        if action in ("reject", "expire") and item.review_round >= 2:
            # A double review an operator ends in bulk is settled as on the
            # quality page, so gold copies waiting for an operator leave at
            # the same pace (review_quality.settle_copies_with).
            settle_copies_with(item, now)
    if left is not None:  # the moved item off the old queue's depth, once the new one counts it
        with transaction.atomic():
            queue = take_one_off_depth(left, now)
            after_depth_change(queue, queue.depth, now)
    return True


def _release(item: ReviewItem) -> list[str]:
    lapsed = item.status == ReviewItem.Status.CLAIMED
    item.lease_holder = None
    item.lease_expires_at = None
    if lapsed:
        item.lease_expiries += 1
    return ["lease_holder", "lease_expires_at", "lease_expiries"]


def _expire(item: ReviewItem, now: datetime) -> None:
    changed = _release(item)
    item.status, item.shed_at = ReviewItem.Status.SHED, now
    item.save(update_fields=[*changed, "status", "shed_at", "updated_at"])
    item_shed(item, now)  # the outbox row, in this transaction
    queue = take_one_off_depth(item.queue_id, now)
    after_depth_change(queue, queue.depth, now)


def _requeue(item: ReviewItem, now: datetime) -> None:
    # A lapsed lease never left the waiting set, so the depth already counts it.
    changed = _release(item)
    item.status = ReviewItem.Status.PENDING
    item.save(update_fields=[*changed, "status", "updated_at"])


def _move(item: ReviewItem, target: Queue, now: datetime) -> int:
    """The item into ``target``, counted in its depth in this transaction;
    answers the queue it left, whose depth the caller takes it off after the
    commit. Counted in the new queue first, so the queue that holds it always
    counts it (for a moment both do): a reviewer who decides it there at once
    takes one off a depth that counted it."""
    source = item.queue_id
    changed = _release(item)
    item.status, item.queue_id = ReviewItem.Status.PENDING, target.pk
    item.save(update_fields=[*changed, "status", "queue", "updated_at"])
    _add_to_depth(target.pk, 1, now)
    return source


def _add_to_depth(queue_pk: int, count: int, now: datetime) -> None:
    with transaction.atomic():
        queue = Queue.locked(queue_pk)
        after_depth_change(queue, queue.depth + count, now)


def _audit(
    operator: AbstractBaseUser,
    filters: ItemFilter,
    action: str,
    reason_label: str,
    target: Queue | None,
    matched: int,
    applied: int,
    now: datetime,
) -> None:
    what: dict[str, object] = {"action": action, "matched": matched, "applied": applied}
    if reason_label:
        what["reason_label"] = reason_label
    if target is not None:
        what["target"] = target.slug
    PolicyAudit.objects.create(
        queue=filters.queue or Queue.default(),
        user=operator,
        changes={f"bulk {action}": [{"filter": filters.described()}, what]},
        created_at=now,
    )
