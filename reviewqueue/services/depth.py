"""Each queue's kept depth and mode, stored on its row.

A queue's row is that queue's lock (``Queue.locked(queue)``). ``set_state``
and ``after_depth_change`` expect the caller to hold it; ``reconcile_depth``
takes it itself; ``take_one_off_depth`` takes it by updating the row, in one
statement, and the caller holds it until its transaction ends.
``queue_depth`` counts without a lock.

``record_depth_sample`` (the ``sample_depth`` beat task's work) reconciles
each queue's kept depth and records the samples the operators' dashboards
chart. Only one queue's row is locked at a time.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import Count
from django.utils import timezone

from .. import policy, task_names
from ..models import DepthSample, ModeChange, Queue, ReviewItem

log = logging.getLogger("reviewqueue.services")

DEPTH_RETENTION = timedelta(days=7)


def queue_depth(queue: Queue | int | None = None) -> int:
    """The queue's waiting items, counted (the kept depth is ``Queue.depth``);
    the default queue's when none is named."""
    pk = queue.pk if isinstance(queue, Queue) else queue if queue is not None else Queue.default().pk
    return ReviewItem.objects.filter(queue_id=pk, status__in=ReviewItem.WAITING).count()


def oldest_waiting_minutes(queue: Queue, now: datetime) -> float | None:
    """Minutes the queue's oldest waiting item has waited, for the age
    watermark; None when nothing waits or the queue has no age watermark
    (then nothing is read). One probe of ``queue_waiting_by_age``."""
    if queue.age_high_minutes is None:
        return None
    oldest = (
        ReviewItem.objects.filter(queue_id=queue.pk, status__in=ReviewItem.WAITING)
        .order_by("created_at")
        .values_list("created_at", flat=True)
        .first()
    )
    return None if oldest is None else max(0.0, (now - oldest).total_seconds() / 60)


def set_state(queue: Queue, mode: policy.Mode, depth: int, now: datetime) -> None:
    """Store the queue's new depth and mode on the locked policy row; a mode
    change is also written to the mode history."""
    if queue.mode != mode.value:
        ModeChange.objects.create(queue=queue, previous=queue.mode, mode=mode.value, depth=depth, created_at=now)
        log.info(
            "queue mode changed",
            extra={"queue": queue.slug, "previous": queue.mode, "mode": mode.value, "depth": depth},
        )
        queue_pk = queue.pk
        transaction.on_commit(lambda: announce_mode_change(queue_pk))
    if (queue.mode, queue.depth) != (mode.value, depth):
        queue.mode, queue.depth = mode.value, depth
        queue.save(update_fields=["mode", "depth", "updated_at"])


# A mode change's evaluation that waited this long is dropped unrun: the
# beat's evaluation (every 30 s) has seen the change by then.
ALERTS_TASK_EXPIRES_SECONDS = 60


def announce_mode_change(queue_pk: int) -> None:
    """Ask a worker to look at the queue's alerts now. Best effort, like a
    webhook announcement: the periodic evaluation finds the change anyway."""
    from celery import current_app

    try:
        current_app.send_task(
            task_names.EVALUATE_ALERTS,
            kwargs={"queue_id": queue_pk},
            ignore_result=True,
            retry=False,
            expires=ALERTS_TASK_EXPIRES_SECONDS,
        )
    except Exception as exc:  # noqa: BLE001 - any broker failure; the beat's evaluation follows
        log.warning("alert evaluation announcement failed", extra={"queue": queue_pk, "error": str(exc)[:200]})


def after_depth_change(queue: Queue, depth: int, now: datetime) -> None:
    """A verdict or an undo moved the depth: the watermarks (and the age
    watermark) may move the mode."""
    oldest = oldest_waiting_minutes(queue, now)
    set_state(queue, policy.next_mode(policy.Mode(queue.mode), depth, queue.watermarks(), oldest), depth, now)


def take_one_off_depth(queue_pk: int, now: datetime) -> Queue:
    """Take one off the kept depth (never below zero) in one ``UPDATE ...
    RETURNING`` statement and answer the updated policy row. The update locks
    the row, so call it inside transaction.atomic(), as late as possible: the
    lock is held until commit, and every admission waits for it."""
    meta = Queue._meta
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
        f" WHERE {meta.pk.column} = %s RETURNING {', '.join(field.column for field in fields)}"
    )
    field_value = meta.get_field("updated_at").get_db_prep_value(now, connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [field_value, queue_pk])
        row = cursor.fetchone()
    if row is None:
        raise Queue.DoesNotExist(f"no queue {queue_pk}")
    queue = Queue.from_db(connection.alias, [field.attname for field in fields], list(row))
    queue.updated_at = now
    return queue


def reconcile_depth(queue: Queue | int | None = None, *, now: datetime | None = None) -> int:
    """Recount the queue's waiting items under its lock and store the count
    (and the mode it implies) if the kept depth drifted, e.g. after rows were
    changed outside the services (the admin, bulk loads); every queue's when
    none is named. Returns the drift (summed). Safe to repeat; the depth
    sampler runs it every few seconds."""
    pks = [queue.pk if isinstance(queue, Queue) else queue] if queue is not None else _all_queue_pks()
    drift = 0
    for pk in pks:
        with transaction.atomic():
            locked = Queue.locked(pk)
            actual = queue_depth(pk)
            moved = actual - locked.depth
            if moved:
                log.warning(
                    "queue depth reconciled", extra={"queue": locked.slug, "kept": locked.depth, "counted": actual}
                )
            if moved or locked.age_high_minutes is not None:
                # Time passing alone moves the age watermark: look on every sample.
                after_depth_change(locked, actual, now or timezone.now())
            _reconcile_gold_waiting(locked)
            drift += moved
    return drift


def _reconcile_gold_waiting(queue: Queue) -> None:
    """Recount the queue's waiting gold copies (the rest of the waiting count
    reviewers see) under its lock, stored if it drifted."""
    copies = ReviewItem.all_objects.filter(queue_id=queue.pk, status__in=ReviewItem.WAITING, gold__isnull=False)
    counted = copies.count()
    if counted != queue.gold_waiting:
        Queue.objects.filter(pk=queue.pk).update(gold_waiting=counted)


def _all_queue_pks() -> list[int]:
    Queue.default()  # the default queue exists from the first sample on
    return list(Queue.objects.order_by("pk").values_list("pk", flat=True))


def record_depth_sample(*, now: datetime) -> int:
    """Recount every queue's kept depth, record one depth sample per queue
    (archived queues while they still hold waiting items) and prune samples
    past retention. Returns the total sampled depth.

    Safe to repeat: a second call only adds one more sample point per queue.
    """
    reconcile_depth(now=now)
    counts: dict[tuple[int, str], int] = {
        (row["queue_id"], row["status"]): row["n"]
        for row in ReviewItem.objects.filter(status__in=ReviewItem.WAITING)
        .values("queue_id", "status")
        .annotate(n=Count("pk"))
        .order_by()
    }
    total = 0
    samples = []
    for queue in Queue.objects.order_by("pk"):
        pending = counts.get((queue.pk, ReviewItem.Status.PENDING), 0)
        claimed = counts.get((queue.pk, ReviewItem.Status.CLAIMED), 0)
        if queue.archived and not pending + claimed:
            continue
        samples.append(
            DepthSample(
                queue=queue,
                created_at=now,
                depth=pending + claimed,
                pending=pending,
                claimed=claimed,
                mode=queue.mode,
                capacity=queue.capacity,
                step_limit=queue.step_limit,
            )
        )
        total += pending + claimed
    DepthSample.objects.bulk_create(samples)
    DepthSample.objects.filter(created_at__lt=now - DEPTH_RETENTION).delete()
    return total
