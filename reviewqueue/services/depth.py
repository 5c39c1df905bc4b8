"""The queue's kept depth and mode, stored on the policy row.

The policy row is the queue's lock (``QueuePolicy.locked()``). ``set_state``
and ``after_depth_change`` expect the caller to hold it; ``reconcile_depth``
takes it itself; ``take_one_off_depth`` takes it by updating the row, in one
statement, and the caller holds it until its transaction ends.
``queue_depth`` counts without a lock.

``record_depth_sample`` (the ``sample_depth`` beat task's work) reconciles
the kept depth and records the sample the operators' dashboard charts.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from .. import policy
from ..models import DepthSample, ModeChange, QueuePolicy, ReviewItem

log = logging.getLogger("reviewqueue.services")

DEPTH_RETENTION = timedelta(days=7)


def queue_depth() -> int:
    """The waiting items, counted (the kept depth is ``QueuePolicy.depth``)."""
    return ReviewItem.objects.filter(status__in=ReviewItem.WAITING).count()


def set_state(queue: QueuePolicy, mode: policy.Mode, depth: int, now: datetime) -> None:
    """Store the queue's new depth and mode on the locked policy row; a mode
    change is also written to the mode history."""
    if queue.mode != mode.value:
        ModeChange.objects.create(previous=queue.mode, mode=mode.value, depth=depth, created_at=now)
        log.info("queue mode changed", extra={"previous": queue.mode, "mode": mode.value, "depth": depth})
    if (queue.mode, queue.depth) != (mode.value, depth):
        queue.mode, queue.depth = mode.value, depth
        queue.save(update_fields=["mode", "depth", "updated_at"])


def after_depth_change(queue: QueuePolicy, depth: int, now: datetime) -> None:
    """A verdict or an undo moved the depth: the watermarks may move the mode."""
    set_state(queue, policy.next_mode(policy.Mode(queue.mode), depth, queue.watermarks()), depth, now)


def take_one_off_depth(now: datetime) -> QueuePolicy:
    """Take one off the kept depth (never below zero) in one ``UPDATE ...
    RETURNING`` statement and answer the updated policy row. The update locks
    the row, so call it inside transaction.atomic(), as late as possible: the
    lock is held until commit, and every admission waits for it."""
    meta = QueuePolicy._meta
    # Every column but updated_at (set here to ``now``) and the JSON ones
    # (loaded on first use, by the noise-aware tuner only): plain numbers and
    # text, which both databases return as Python values without converters.
    fields = [
        field
        for field in meta.concrete_fields
        if field.name != "updated_at" and field.get_internal_type() != "JSONField"
    ]
    depth, updated = meta.get_field("depth").column, meta.get_field("updated_at").column
    sql = (
        f"UPDATE {meta.db_table} SET {depth} = CASE WHEN {depth} > 0 THEN {depth} - 1 ELSE 0 END, {updated} = %s"
        f" WHERE {meta.pk.column} = 1 RETURNING {', '.join(field.column for field in fields)}"
    )
    field_value = meta.get_field("updated_at").get_db_prep_value(now, connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [field_value])
        row = cursor.fetchone()
    if row is None:  # no policy row yet: create it, then take the lock the usual way
        queue = QueuePolicy.locked()
        queue.depth = max(queue.depth - 1, 0)
        queue.save(update_fields=["depth", "updated_at"])
        return queue
    queue = QueuePolicy.from_db(connection.alias, [field.attname for field in fields], list(row))
    queue.updated_at = now
    return queue


def reconcile_depth(*, now: datetime | None = None) -> int:
    """Recount the waiting items under the policy lock and store the count
    (and the mode it implies) if the kept depth drifted, e.g. after rows were
    changed outside the services (the admin, bulk loads). Returns the drift.
    Safe to repeat; the depth sampler runs it every few seconds."""
    with transaction.atomic():
        queue = QueuePolicy.locked()
        actual = queue_depth()
        drift = actual - queue.depth
        if drift:
            log.warning("queue depth reconciled", extra={"kept": queue.depth, "counted": actual})
            after_depth_change(queue, actual, now or timezone.now())
        return drift


def record_depth_sample(*, now: datetime) -> int:
    """Recount the kept depth, record one depth sample and prune samples past
    retention. Returns the sampled depth.

    Safe to repeat: a second call only adds one more sample point.
    """
    reconcile_depth(now=now)
    queue = QueuePolicy.current()
    pending = ReviewItem.objects.filter(status=ReviewItem.Status.PENDING).count()
    claimed = ReviewItem.objects.filter(status=ReviewItem.Status.CLAIMED).count()
    DepthSample.objects.create(
        created_at=now,
        depth=pending + claimed,
        pending=pending,
        claimed=claimed,
        mode=queue.mode,
        capacity=queue.capacity,
        step_limit=queue.step_limit,
    )
    DepthSample.objects.filter(created_at__lt=now - DEPTH_RETENTION).delete()
    return pending + claimed
