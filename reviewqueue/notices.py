"""What became of an item, as the reviewer who tried to act on it hears it: a
verdict already recorded (by them, in another tab, or by someone else), an
item outside their queues, a send-back. Each notice reads the item only when
an action was refused or just done; nothing here writes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone

from . import services
from .formatting import decision_words
from .models import Judgement, LoopRun, Queue, ReasonLabel, ReviewItem, Verdict
from .selectors.review_item import _as_reviewer_sees_it, answer_as_verdict, as_lineage, copy_verdict
from .templatetags.time_tags import ago


@dataclass
class Notice:
    """One line telling the reviewer what just happened; ``level`` picks the colour."""

    text: str
    level: str = "info"

    def __post_init__(self) -> None:
        # A service's error message starts in lower case, to be quoted inside
        # a sentence; said on its own, it starts a sentence.
        self.text = self.text[:1].upper() + self.text[1:]


def _as_seen(user: User, item_id: int, exc: services.QueueError) -> services.QueueError:
    """A refused action's error as this reviewer may hear it. About an item
    outside the queues they review, they hear what they would hear of an
    item that does not exist: nothing tells them it exists, who holds it or
    how it was decided. Read only when an action was refused."""
    if ReviewItem.all_objects.filter(pk=item_id, queue__in=Queue.objects.reviewable_by(user)).exists():
        return exc
    return services.QueueError(f"item #{item_id} does not exist")


def _verdict_words(verdict: Verdict) -> str:
    """'approved', 'approved with edits', 'sent back' or 'rejected (reason)'."""
    if verdict.decision == Verdict.Decision.REJECT:
        return f"rejected ({verdict.get_reason_label_display()})"
    return decision_words(verdict.decision)


def _already_decided(item_id: int, reviewer: User, approve: bool, reason_label: str, tried: str = "") -> Notice:
    """What was recorded on the item, by whom and when, and what became of
    this (second) verdict: two tabs, a double submit or another reviewer."""
    tried = tried or ("approval" if approve else "rejection")
    verdict = Verdict.objects.filter(item_id=item_id).select_related("reviewer").first()
    mine = Judgement.objects.filter(item_id=item_id, reviewer=reviewer).first()
    if mine is not None and (verdict is None or verdict.reviewer_id != reviewer.pk):
        # Their own answer in a double review, or on a gold copy: said as their
        # verdict, in the same words, and what the others said stays unseen.
        verdict = answer_as_verdict(mine)
    if verdict is None:
        verdict = _copy_answer(item_id)
    if verdict is None:  # a filter rule decided it, or it has only answers (a double review)
        item = ReviewItem.all_objects.filter(pk=item_id).first()
        if item is None:
            return Notice(f"Item #{item_id} was already decided (removed); your {tried} was not recorded.", "error")
        # Said as for any item, so an answered gold copy reads like an ordinary decided one.
        status, _ = _as_reviewer_sees_it(reviewer, item, None)
        return Notice(f"Item #{item_id} was already decided ({status}); your {tried} was not recorded.", "error")
    recorded = f"{_verdict_words(verdict)} {ago(verdict.created_at)}"
    if verdict.reviewer_id != reviewer.pk:
        who = verdict.reviewer.get_username() if verdict.reviewer is not None else "a reviewer since removed"
        return Notice(
            f"Item #{item_id} was already {_verdict_words(verdict)} by {who}, {ago(verdict.created_at)}; "
            f"your {tried} was not recorded.",
            "error",
        )
    same = verdict.approved == approve and (approve or verdict.reason_label == reason_label)
    if tried == "send-back":
        same = verdict.decision == Verdict.Decision.SEND_BACK
    if same:
        return Notice(f"Your verdict on item #{item_id} was already recorded ({recorded}); nothing changed.")
    undo_seconds = settings.REVIEWQUEUE_UNDO_SECONDS
    undo = (
        f" Undo (u) within {undo_seconds} s of that verdict takes it back."
        if timezone.now() - verdict.created_at < timedelta(seconds=undo_seconds)
        else ""
    )
    return Notice(
        f"Item #{item_id} was already {recorded} by you, in another tab or window; this {tried} was "
        f"not recorded.{undo}",
        "error",
    )


def _copy_answer(item_id: int) -> Verdict | None:
    """A settled gold copy's verdict as a real item's would read (never
    saved), so the notice names who decided it as it does for a real item."""
    item = ReviewItem.all_objects.filter(pk=item_id, gold__isnull=False).first()
    return copy_verdict(item) if item is not None else None


def _sent_back_words(verdict: Verdict) -> str:
    """What became of a send-back, and how long undo can take it back."""
    seconds = settings.REVIEWQUEUE_UNDO_SECONDS
    if verdict.pk is None:
        settled_copy = ReviewItem.all_objects.filter(
            pk=verdict.item_id, gold__isnull=False, status=ReviewItem.Status.GOLD
        ).first()
        if settled_copy is None:  # an answer that settles nothing yet: nobody hears of it now
            return f"Sent back item #{verdict.item_id} with your note. Undo (u) within {seconds} s takes it back."
        # A gold copy this answer settled reads as a real item of its kind
        # would: its source's, fed by a loop or pushed by a producer.
        loop_fed = LoopRun.objects.filter(item=as_lineage(settled_copy)).exists()
    else:
        loop_fed = LoopRun.objects.filter(resumed_from__item_id=verdict.item_id).exists()
    if loop_fed:
        return (
            f"Sent back item #{verdict.item_id}: its loop runs again from this output with your note. "
            f"Undo (u) within {seconds} s takes it back, until the new run starts."
        )
    return f"Sent back item #{verdict.item_id}: its producer gets your note. Undo (u) within {seconds} s takes it back."


def _lease_ran_out(item_id: int, held: ReviewItem | None) -> Notice:
    """Say what really became of an item whose lease ran out before the
    verdict: claimed again by this reviewer, taken or decided by someone
    else, or waiting in the queue."""
    said = f"Your lease on item #{item_id} ran out before your verdict arrived, so the verdict was not recorded."
    if held is not None and held.pk == item_id:
        return Notice(
            f"{said} Nobody else had taken it, so it is yours again under a new lease: decide it again.", "error"
        )
    # Every item, gold copies included: a copy's fate is told as a real item's.
    item = ReviewItem.all_objects.filter(pk=item_id).select_related("verdict__reviewer").first()
    if item is None:
        fate = " It went back to the queue."
    elif item.status == ReviewItem.Status.SHED:
        fate = " It has since left the queue."
    elif item.status in ReviewItem.DECIDED or item.status == ReviewItem.Status.GOLD:
        verdict = getattr(item, "verdict", None) or copy_verdict(item)
        who = verdict.reviewer.get_username() if verdict is not None and verdict.reviewer is not None else None
        fate = f" {who} has decided it since." if who else " It has been decided since."
    elif item.status == ReviewItem.Status.CLAIMED:
        fate = " Another reviewer has it now."
    else:
        fate = " It went back to the queue."
    after = f" Here is item #{held.pk}." if held is not None else " Nothing else waits right now."
    return Notice(said + fate + after, "error")


EMPTY_EDIT = (
    "The corrected output is empty: type the output to approve, or close the editor (Esc) and press a "
    "to approve the original. Nothing was recorded."
)


def _panel_error(exc: services.QueueError) -> str:
    if isinstance(exc, services.InvalidInput) and exc.field == "note":
        return "Sending back needs a note: say what the next try should change."
    if isinstance(exc, services.InvalidInput) and exc.message.endswith(EMPTY_EDIT):
        return EMPTY_EDIT
    if isinstance(exc, services.InvalidInput) and exc.field == "edited_output":
        return f"The corrected output is too long ({exc.message.split(': ', 1)[-1]}); nothing was recorded."
    return exc.message


def verdict_refused(
    user: User, item_id: int, caught: services.QueueError, *, approve: bool, reason_label: str
) -> Notice | None:
    """What became of a verdict services.decide refused; None when the lease
    ran out first (the caller says that, with what became of the item)."""
    exc = _as_seen(user, item_id, caught)
    if isinstance(exc, services.AlreadyDecided):
        return _already_decided(item_id, user, approve, reason_label)
    if isinstance(exc, services.LeaseExpired):
        return None
    if isinstance(exc, services.NotLeaseHolder):
        return Notice(f"Item #{item_id} is held by another reviewer; your verdict was not recorded.", "error")
    return Notice(f"{exc.message}. Your verdict was not recorded.", "error")


def verdict_recorded(verdict: Verdict, *, approve: bool, reason_label: str, edited_output: str = "") -> Notice:
    """The verdict just recorded (or the answer, in a double review), and
    how long undo can take it back."""
    item_id = verdict.item_id
    if not approve:
        done = f"Rejected item #{item_id} ({ReasonLabel(reason_label).label})"
    elif verdict.decision == Verdict.Decision.EDIT:
        done = f"Approved with your edits: item #{item_id}"
    elif edited_output:
        done = f"Approved (the output was not changed): item #{item_id}"
    else:
        done = f"Approved item #{item_id}"
    return Notice(f"{done}. Undo (u) within {settings.REVIEWQUEUE_UNDO_SECONDS} s takes it back.")
