"""The webhook outbox: every event a producer should hear of is written here,
as a ``WebhookDelivery`` row, inside the transaction that makes the change it
reports (a verdict, a send-back, a shed or filtered item, a finished run).

Writing the event with the change is what makes delivery reliable: if the
transaction commits, the event exists; if it rolls back, it never did. Only
after the commit is a delivery task announced to the broker, and if that
announcement is lost (the broker down, the process killed) the periodic sweep
finds the row anyway (``reviewqueue.webhooks``). Nothing here talks to a
receiver, and no lock is taken beyond the caller's.

The event body is fixed when it is written, so every attempt sends, and
signs, the same bytes, and a receiver can dedupe on its ``id``. Every
item event carries the item's ``metadata``, the producer's own object, so a
producer routes a verdict back to whatever asked for it without a lookup.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from .. import task_names
from ..finality import final_at
from ..models import EventType, LoopRun, ReviewItem, Verdict, WebhookDelivery

log = logging.getLogger("reviewqueue.webhooks")


def new_event_id() -> str:
    return f"evt_{uuid.uuid4().hex}"


def record_event(
    event_type: EventType,
    *,
    url: str,
    producer: str,
    data: dict[str, Any],
    item: ReviewItem | None = None,
    run: LoopRun | None = None,
    now: datetime | None = None,
    not_before: datetime | None = None,
) -> WebhookDelivery | None:
    """Write one event for ``url`` in the caller's transaction and announce it
    after the commit; None, and nothing written, when there is no URL.
    ``not_before`` holds the event back until then (a verdict until it is
    final): the row is not due, and the announcement waits, until that instant.

    Events about one item share an ordering key (a run's events use its
    item's key once it has one), so a receiver hears of an item in the order
    things happened to it."""
    if not url:
        return None
    now = now or timezone.now()
    event_id = new_event_id()
    body = {
        "id": event_id,
        "type": str(event_type),
        "created": now.isoformat(),
        "item_id": item.pk if item is not None else None,
        "run_id": _run_id(item, run),
        "data": data,
    }
    delivery = WebhookDelivery.objects.create(
        event_id=event_id,
        event_type=event_type,
        url=url,
        producer=producer,
        item=item,
        run=run,
        ordering_key=f"item:{item.pk}" if item is not None else f"run:{run.pk if run else 0}",
        body=json.dumps(body, separators=(",", ":"), ensure_ascii=False),
        next_attempt_at=not_before or now,
        created_at=now,
    )
    delay = (not_before - now).total_seconds() if not_before is not None else 0.0
    transaction.on_commit(lambda: announce(delivery.pk, countdown=delay) if delay > 0 else announce(delivery.pk))
    return delivery


def _run_id(item: ReviewItem | None, run: LoopRun | None) -> str | None:
    """The producer's own run id: what it submitted, not our row's key."""
    if run is not None:
        return run.run_id
    if item is not None and item.source_run_id:
        return item.source_run_id
    return None


def announce(delivery_pk: int, countdown: float | None = None) -> None:
    """Ask a worker to attempt this delivery now (or in ``countdown`` seconds,
    when it is held back until then). Best effort, and without retries: this
    runs after the verdict's commit, in the reviewer's request, and a lost
    announcement only delays the event until the sweep finds it."""
    from celery import current_app

    options = {"countdown": countdown} if countdown else {}
    try:
        current_app.send_task(
            task_names.DELIVER_WEBHOOK, args=[delivery_pk], ignore_result=True, retry=False, **options
        )
    except Exception as exc:  # noqa: BLE001 - any broker failure; the sweep resends
        log.warning("webhook announcement failed", extra={"delivery": delivery_pk, "error": str(exc)[:200]})


# --- what each event says ---------------------------------------------------------------


def item_decided(item: ReviewItem, verdict: Verdict, now: datetime) -> WebhookDelivery | None:
    """``item.decided``: the decision as the producer acts on it (an edited
    approval is an approval, with the corrected output beside it). Due once
    the verdict is final (``finality``); undo deletes it before then."""
    edited = verdict.decision == Verdict.Decision.EDIT
    data = {
        "decision": "approve" if verdict.approved else "reject",
        "edited": edited,
        "edited_output": verdict.edited_output if edited else None,
        "reason_label": verdict.reason_label,
        "note": verdict.note,
        "version": item.version,
        "metadata": item.metadata_object(),
    }
    return record_event(
        EventType.ITEM_DECIDED,
        url=item.callback_url,
        producer=item.producer,
        item=item,
        data=data,
        now=now,
        not_before=final_at(now),
    )


def item_sent_back(item: ReviewItem, verdict: Verdict, now: datetime) -> WebhookDelivery | None:
    """``item.sent_back``: the reviewer's note, for the producer's next try;
    due, like ``item.decided``, once the send-back is final."""
    data = {"note": verdict.note, "version": item.version, "metadata": item.metadata_object()}
    return record_event(
        EventType.ITEM_SENT_BACK,
        url=item.callback_url,
        producer=item.producer,
        item=item,
        data=data,
        now=now,
        not_before=final_at(now),
    )


VERDICT_EVENTS = (EventType.ITEM_DECIDED, EventType.ITEM_SENT_BACK)


def withdraw_verdict_event(item: ReviewItem, decided_at: datetime) -> bool:
    """Delete the verdict's event written at ``decided_at`` while no attempt
    has taken it (undo, in the verdict's transaction). False when one has:
    the producer may have heard, and the verdict must stand. The conditional
    DELETE and a worker's lease (which counts the attempt) are one row's
    updates, so exactly one of them wins. Safe to repeat."""
    rows = WebhookDelivery.objects.filter(item=item, event_type__in=VERDICT_EVENTS, created_at__gte=decided_at)
    rows.filter(status=WebhookDelivery.Status.PENDING, attempts=0).delete()
    return not rows.exists()


def item_shed(item: ReviewItem, now: datetime) -> WebhookDelivery | None:
    """``item.shed``: dropped at capacity; no reviewer will see it."""
    data = {"priority": item.priority, "metadata": item.metadata_object()}
    return record_event(
        EventType.ITEM_SHED, url=item.callback_url, producer=item.producer, item=item, data=data, now=now
    )


def item_filtered(item: ReviewItem, now: datetime) -> WebhookDelivery | None:
    """``item.filtered``: rejected by an enabled filter rule's gate."""
    data = {"filter_reason": item.filter_reason, "metadata": item.metadata_object()}
    return record_event(
        EventType.ITEM_FILTERED, url=item.callback_url, producer=item.producer, item=item, data=data, now=now
    )


def run_finished(run: LoopRun, item: ReviewItem | None, now: datetime) -> WebhookDelivery | None:
    """``run.finished``: the loop's outcome and, if it reached the queue, its item."""
    data = {
        "outcome": run.outcome,
        "stop_reason": run.stop_reason,
        "attempts": run.attempts,
        "item_id": item.pk if item is not None else None,
    }
    return record_event(
        EventType.RUN_FINISHED, url=run.callback_url, producer=run.producer, item=item, run=run, data=data, now=now
    )
