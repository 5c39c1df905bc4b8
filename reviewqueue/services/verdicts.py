"""Verdicts: a reviewer approves (as it is, or corrected: *edit and approve*),
rejects, or sends back with a note the item they hold, or takes their last
verdict back; each verdict tunes the loops (ARCHITECTURE.md rule 8).

The tuner asks one question of a verdict: was the cut-off output acceptable
as the loop produced it? Approve says yes; reject, edit (it needed a
correction) and send back (it needed another try) say no. Label counts, and
so filter-rule proposals, grow only with rejections, which alone carry a
reason label.

``decide`` locks the item's row first and takes the policy row's lock last:
the item lock (``held_item``) is what makes a verdict happen once; the
verdict, the item, the label counts and the tuner's read are written under it;
then one statement takes one off the kept depth on the policy row (which
locks it, serialised with admissions) and returns the row, and only a mode or
step-limit change, when one is due, is written under that lock before commit.
``send_back`` takes the same locks in the same order as ``decide``, and also
writes, in that transaction, the run that resumes the item's loop (when our
workers ran it), so a committed send-back always has its run.
``undo`` is rare: it locks the policy row first, then the verdict and the item.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from .. import policy
from ..models import FilterRule, LabelCount, QueuePolicy, ReasonLabel, ReviewItem, StepLimitChange, Verdict
from .cleaning import clean_text
from .depth import after_depth_change, take_one_off_depth
from .errors import AlreadyDecided, InvalidInput, NothingToUndo, UndoRefused
from .leases import held_item
from .outbox import item_decided, item_sent_back
from .runs import cancel_resumed_run, resume_sent_back

log = logging.getLogger("reviewqueue.services")


def decide(
    *,
    item_id: int,
    reviewer: AbstractBaseUser,
    approve: bool,
    reason_label: str = "",
    note: str = "",
    edited_output: str = "",
    now: datetime | None = None,
) -> Verdict:
    """Record a verdict on an item the reviewer holds under a live lease.

    ``edited_output`` with an approval is the reviewer's correction: when it
    differs from the output (line endings aside) the verdict is ``edit``, the
    item approved with the corrected text stored beside the original; the
    same text is a plain approval.

    Only once: a second call raises AlreadyDecided and changes nothing. The
    step-limit tuner, the label counts and the queue mode move in the same
    transaction as the verdict.
    """
    now = now or timezone.now()
    if not approve and reason_label not in ReasonLabel.values:
        raise InvalidInput("reason_label", f"a rejection needs one of {', '.join(ReasonLabel.values)}")
    if not approve and edited_output:
        raise InvalidInput("edited_output", "only an approval carries a corrected output")
    note_text, _ = clean_text(note, limit=NOTE_LIMIT)
    edited = _cleaned_edit(edited_output)
    with transaction.atomic():
        item = held_item(item_id, reviewer, now)
        if edited and _same_text(edited, item.final_output):
            edited = ""  # nothing was corrected: a plain approval
        verdict = _write_verdict(
            item,
            reviewer,
            now,
            decision=_decision(approve, edited),
            reason_label="" if approve else reason_label,
            note=note_text,
            edited_output=edited,
        )
        _close_item(item, ReviewItem.Status.APPROVED if approve else ReviewItem.Status.REJECTED, now)
        item_decided(item, verdict, now)  # the outbox row, in this transaction
        if not approve:
            LabelCount.objects.get_or_create(label=reason_label)
            LabelCount.objects.filter(label=reason_label).update(count=F("count") + 1)
        recent = _tuner_verdicts_by_policy_window() if verdict.counts_for_tuner else None
        queue = take_one_off_depth(now)  # the item left the waiting set; the policy lock from here
        if not approve:
            _propose_rules(queue, now)
        if recent is not None:
            _retune(queue, verdict, recent, now)
        after_depth_change(queue, queue.depth, now)  # writes only if the watermarks move the mode
        return verdict


NOTE_LIMIT = 5_000


def _write_verdict(item: ReviewItem, reviewer: AbstractBaseUser, now: datetime, **fields: Any) -> Verdict:
    """The verdict row on the locked item; whether it tunes follows the item.

    No savepoint: the item's row lock and its status check make a second
    verdict on this item impossible (a second decide waits for the lock,
    then finds the item decided). A unique violation can come only from
    rows changed outside the services; it aborts this whole transaction,
    which the raise below rolls back, so nothing half-written survives."""
    try:
        return Verdict.objects.create(
            item=item,
            reviewer=reviewer,
            counts_for_tuner=policy.counts_for_tuner(sampled=item.label == ReviewItem.Label.SAMPLED, draft=item.draft),
            created_at=now,
            **fields,
        )
    except IntegrityError:
        raise AlreadyDecided(f"item {item.pk} was already decided") from None


def _close_item(item: ReviewItem, status: str, now: datetime) -> None:
    """The decided item leaves the waiting set and its lease."""
    item.status = status
    item.decided_at = now
    item.lease_expires_at = None
    item.save(update_fields=["status", "decided_at", "lease_expires_at", "updated_at"])


def _decision(approve: bool, edited: str) -> Verdict.Decision:
    if not approve:
        return Verdict.Decision.REJECT
    return Verdict.Decision.EDIT if edited else Verdict.Decision.APPROVE


def _cleaned_edit(edited_output: str) -> str:
    """The corrected output, cleaned like any stored text, its line endings
    made LF (a browser's textarea sends CRLF, which would otherwise show as a
    change on every line); refused, never cut, over the output size limit: a
    silently shortened correction would be approved as something the
    reviewer never wrote."""
    if not edited_output:
        return ""
    limit = settings.REVIEWQUEUE_MAX_OUTPUT_CHARS
    text, truncated = clean_text(_lf(edited_output), limit=limit)
    if truncated:
        raise InvalidInput("edited_output", f"is longer than {limit} characters")
    return text if text.strip() else ""


def _same_text(a: str, b: str) -> bool:
    """Equal once line endings are made the same (a browser's textarea sends CRLF)."""
    return _lf(a) == _lf(b)


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def send_back(*, item_id: int, reviewer: AbstractBaseUser, note: str, now: datetime | None = None) -> Verdict:
    """Send the held item back with a note, for another try.

    The verdict ``send_back`` (the note is required), the item out of the
    waiting set as ``sent_back``, the ``item.sent_back`` event, and, when our
    workers ran the item's loop, the run that resumes it from this output
    with the note (``runs.resume_sent_back``), all in one transaction; the
    run is published after the commit. For the tuner it counts as "not
    acceptable as produced"; it adds to no label count.
    """
    now = now or timezone.now()
    note_text, _ = clean_text(note, limit=NOTE_LIMIT)
    if not note_text.strip():
        raise InvalidInput("note", "sending back needs a note: say what the next try should change")
    with transaction.atomic():
        item = held_item(item_id, reviewer, now)
        verdict = _write_verdict(item, reviewer, now, decision=Verdict.Decision.SEND_BACK, note=note_text)
        _close_item(item, ReviewItem.Status.SENT_BACK, now)
        item_sent_back(item, verdict, now)  # the outbox row, in this transaction
        resume_sent_back(item, note_text)
        recent = _tuner_verdicts_by_policy_window() if verdict.counts_for_tuner else None
        queue = take_one_off_depth(now)  # the policy lock from here, as in decide
        if recent is not None:
            _retune(queue, verdict, recent, now)
        after_depth_change(queue, queue.depth, now)
        return verdict


def undo(*, reviewer: AbstractBaseUser, now: datetime | None = None) -> ReviewItem:
    """Take back the reviewer's last verdict if it is younger than the undo
    window: the item returns to them under a fresh lease, and the label count
    and any step-limit change that verdict caused are reverted.

    A send-back is taken back only while its resumed run has not started:
    the run is cancelled with it. Once a worker has started the run, the
    send-back stands and UndoRefused says so."""
    now = now or timezone.now()
    window = timedelta(seconds=settings.REVIEWQUEUE_UNDO_SECONDS)
    with transaction.atomic():
        queue = QueuePolicy.locked()
        verdict = (
            Verdict.objects.select_for_update()
            .filter(reviewer=reviewer, created_at__gte=now - window)
            .order_by("-created_at", "-pk")
            .first()
        )
        if verdict is None:
            raise NothingToUndo(f"no verdict of yours in the last {window.seconds} seconds to undo")
        item = verdict.item
        if verdict.decision == Verdict.Decision.SEND_BACK and not cancel_resumed_run(item):
            raise UndoRefused(
                f"item {item.pk} was sent back and its new run has already started, so the send-back stands"
            )
        change = StepLimitChange.objects.filter(verdict=verdict).first()
        if change is not None and queue.step_limit == change.step_limit:
            queue.step_limit = change.previous
            queue.save(update_fields=["step_limit", "updated_at"])
            change.delete()
        if verdict.reason_label:
            LabelCount.objects.filter(label=verdict.reason_label, count__gt=0).update(count=F("count") - 1)
        verdict.delete()
        item.status = ReviewItem.Status.CLAIMED
        item.lease_holder = reviewer
        item.lease_expires_at = now + timedelta(seconds=queue.lease_seconds)
        item.decided_at = None
        item.save(update_fields=["status", "lease_holder", "lease_expires_at", "decided_at", "updated_at"])
        after_depth_change(queue, queue.depth + 1, now)  # the item is waiting again
        return item


# --- what verdicts feed back into the loops ---------------------------------------------


def _tuner_verdicts_by_policy_window() -> list[bool]:
    """The last verdicts that count for the tuner, as many as the policy's
    tuner window, oldest first, as approvals: one statement, no lock (the
    window's length is read in the same statement)."""
    verdict, queue = Verdict._meta, QueuePolicy._meta
    sql = (
        f"SELECT {verdict.get_field('decision').column} FROM {verdict.db_table}"
        f" WHERE {verdict.get_field('counts_for_tuner').column}"
        f" ORDER BY {verdict.get_field('created_at').column} DESC, {verdict.pk.column} DESC"
        f" LIMIT COALESCE((SELECT {queue.get_field('tuner_window').column}"
        f" FROM {queue.db_table} WHERE {queue.pk.column} = 1), 0)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql)
        decisions = [row[0] for row in cursor.fetchall()]
    return [decision == Verdict.Decision.APPROVE for decision in reversed(decisions)]


def _retune(queue: QueuePolicy, verdict: Verdict, verdicts: list[bool], now: datetime) -> None:
    """Move the step limit as the tuner says, recording the change against the
    verdict that caused it (so undo can revert it). The caller holds the lock;
    the change is rare, and written only when the limit moves."""
    cfg = queue.tuner()
    verdicts = verdicts[-cfg.window :] if cfg.window else []
    new_limit = policy.tune_step_limit(queue.step_limit, verdicts, cfg)
    if new_limit != queue.step_limit:
        StepLimitChange.objects.create(
            previous=queue.step_limit,
            step_limit=new_limit,
            approve_rate=policy.approve_rate(verdicts, cfg.window),
            verdict=verdict,
            created_at=now,
        )
        log.info("step limit tuned", extra={"previous": queue.step_limit, "step_limit": new_limit})
        queue.step_limit = new_limit
        queue.save(update_fields=["step_limit", "updated_at"])


def _propose_rules(queue: QueuePolicy, now: datetime) -> None:
    """Propose a filter rule for each rejection label counted past the threshold."""
    counts = dict(LabelCount.objects.values_list("label", "count"))
    existing = FilterRule.objects.values_list("label", flat=True)
    for label in policy.proposed_filter_rules(counts, queue.label_threshold, existing):
        gate, description = policy.FILTER_GATES[label]
        FilterRule.objects.create(
            label=label, gate=gate, description=description, count_at_proposal=counts[label], proposed_at=now
        )
        log.info("filter rule proposed", extra={"label": label, "gate": gate})
