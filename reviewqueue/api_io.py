"""What the producer API reads and answers, apart from its endpoints
(views/api.py): a run and an item as their producer reads them (a verdict
shows only once final, services/finality.py), and the sent-back item a
revised output follows on from. Only reads."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from . import services
from .finality import is_final
from .models import LoopRun, ReviewItem


def _run_told(run: LoopRun) -> bool:
    """Whether the producer may read the run: any run but one resumed after
    a send-back that is not final, or was undone (``finality``): until then
    the send-back is not told, and neither is the run it would start."""
    if run.resumed_from_id is None:
        return True
    sent_back = run.resumed_from.item if run.resumed_from is not None else None
    return (
        sent_back is not None
        and sent_back.status == ReviewItem.Status.SENT_BACK
        and is_final(sent_back.decided_at, timezone.now())
    )


def _run_body(run: LoopRun, *, created: bool = False) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "task_id": run.task_id,
        "queue": run.queue.slug,
        "outcome": run.outcome,
        "item_id": run.item_id,
        "created": created,
        "resumed_from": run.resumed_from.run_id if run.resumed_from_id and run.resumed_from else None,
    }


def _item_body(item: ReviewItem) -> dict[str, Any]:
    """An item as its producer reads it: status, version and the verdict's
    words (the reviewer's corrected output too, for an edited approval).
    ``decision`` is kept beside ``verdict`` for producers that read it.

    A verdict shows only once it is final (``finality``): until its undo
    window has closed the item reads as still under review, exactly as it
    did before the verdict, so an undone verdict leaves no trace here."""
    if not _told(item):
        return {
            **_common(item),
            "status": ReviewItem.Status.CLAIMED,
            "decision": None,
            "verdict": None,
            "awaiting": AWAITING.get(item.review_round, "operator"),
        }
    verdict = getattr(item, "verdict", None)
    return {
        **_common(item),
        "status": item.status,
        "decision": verdict.decision if verdict is not None else None,
        "awaiting": _awaiting(item),
        "verdict": (
            {
                "decision": verdict.decision,
                "reason_label": verdict.reason_label,
                "note": verdict.note,
                "edited_output": verdict.edited_output or None,
            }
            if verdict is not None
            else None
        ),
    }


def _common(item: ReviewItem) -> dict[str, Any]:
    return {
        "item_id": item.pk,
        "queue": item.queue.slug,
        "label": item.label,
        "version": item.version,
        "previous_item": item.previous_version_id,
        "metadata": item.metadata_object(),
    }


# The statuses a reviewer's verdict gives, told only once final.
VERDICT_STATUSES = (ReviewItem.Status.APPROVED, ReviewItem.Status.REJECTED, ReviewItem.Status.SENT_BACK)


def _told_status(item: ReviewItem) -> str:
    """The item's status as its producer may be told it: ``claimed`` while
    its verdict can still be taken back."""
    return item.status if _told(item) else ReviewItem.Status.CLAIMED


def _told(item: ReviewItem) -> bool:
    """Whether the producer may be told the item's status as it is."""
    return item.status not in VERDICT_STATUSES or is_final(item.decided_at, timezone.now())


# What a waiting item waits for, by its review round (ARCHITECTURE.md rule 11).
AWAITING = {1: "review", 2: "second_review", 3: "tiebreak"}


def _awaiting(item: ReviewItem) -> str | None:
    """``review``, ``second_review`` (double review: a first answer is in,
    unseen), ``tiebreak`` (the two disagreed) or ``operator``; None once
    decided (or shed, or filtered)."""
    if item.status not in ReviewItem.WAITING:
        return None
    return AWAITING.get(item.review_round, "operator")


def _sent_back_item(producer: str, item_id: int | None) -> ReviewItem | None:
    """The item a revised output follows on from: one of this producer's,
    sent back by a reviewer; anything else is refused naming the field."""
    if item_id is None:
        return None
    item = ReviewItem.objects.filter(pk=item_id, producer=producer).first()
    if item is None:
        raise services.InvalidInput("previous_item", f"no item {item_id} from this producer")
    if item.status != ReviewItem.Status.SENT_BACK or not _told(item):
        shown = item.status if _told(item) else ReviewItem.Status.CLAIMED
        raise services.InvalidInput("previous_item", f"item {item_id} was not sent back (it is {shown})")
    return item
