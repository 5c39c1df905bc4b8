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
``undo`` is rare. Taking back a verdict, it locks the queue's row, then the
verdict and the decided item (which nobody else locks while waiting for a
queue's row). Taking back an answer that settled nothing, it locks the
waiting item first and then the queue's row, as every writer that holds a
waiting item does (the next answer, an operator's settle, a bulk action).
"""

from __future__ import annotations

import logging
import math
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from .. import policy
from ..finality import undo_window
from ..models import (
    FilterRule,
    Judgement,
    LabelCount,
    Queue,
    ReasonLabel,
    ReviewItem,
    StepLimitChange,
    UndoneAnswer,
    Verdict,
)
from . import review_quality
from .cleaning import clean_text
from .depth import after_depth_change, take_one_off_depth
from .errors import AlreadyDecided, InvalidInput, NothingToUndo, QueueError, UndoRefused
from .leases import held_item
from .outbox import item_decided, item_sent_back, withdraw_verdict_event
from .review_quality import Answer
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
        item = held_item(item_id, reviewer, now, with_double_review_rate=True)
        if edited and _same_text(edited, item.final_output):
            edited = ""  # nothing was corrected: a plain approval
        answer = Answer(
            _decision(approve, edited),
            reason_label="" if approve else reason_label,
            note=note_text,
            edited_output=edited,
        )
        return _answer(item, reviewer, answer, now)


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
            queue_id=item.queue_id,
            reviewer=reviewer,
            counts_for_tuner=policy.counts_for_tuner(sampled=item.label == ReviewItem.Label.SAMPLED, draft=item.draft),
            created_at=now,
            **fields,
        )
    except IntegrityError:
        raise AlreadyDecided(f"item #{item.pk} was already decided") from None


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
        item = held_item(item_id, reviewer, now, with_double_review_rate=True)
        return _answer(item, reviewer, Answer(Verdict.Decision.SEND_BACK, note=note_text), now)


def _answer(item: ReviewItem, reviewer: AbstractBaseUser, answer: Answer, now: datetime) -> Verdict:
    """What a reviewer's answer on the item they hold becomes: a round of a
    double review, or the item's verdict; on a gold copy, the same rounds,
    each answer scored (``review_quality.answer_gold``), and never a
    verdict. Answers the verdict, or, while none is settled (and always for
    a copy), the answer as an unsaved Verdict."""
    rate = getattr(item, "double_review_rate", None) or 0.0
    single = item.review_round == 1 and not review_quality.wants_second_review(item, reviewer, rate)
    if item.gold_id is not None:
        review_quality.answer_gold(item, reviewer, answer, now, single=single)
        return answer.unsettled(item, reviewer, now)
    if single:
        return settle_item(item, reviewer, answer, "reviewer", now)
    settled = review_quality.record_review(item, reviewer, answer, now)
    if settled is None:
        return answer.unsettled(item, reviewer, now)
    return settle_item(item, *settled, now)


def settle_item(
    item: ReviewItem, reviewer: AbstractBaseUser, answer: Answer, settled_by: str, now: datetime
) -> Verdict:
    """Make the answer the item's verdict (the item is locked by the caller):
    the verdict, the item out of the waiting set, its event in the outbox, a
    resumed run for a send-back, the label counts for a rejection, then the
    policy row's lock for the depth, the tuner and the mode."""
    verdict = _write_verdict(item, reviewer, now, settled_by=settled_by, **answer.fields())
    reject = answer.decision == Verdict.Decision.REJECT
    if answer.decision == Verdict.Decision.SEND_BACK:
        _close_item(item, ReviewItem.Status.SENT_BACK, now)
        item_sent_back(item, verdict, now)  # the outbox row, in this transaction
        resume_sent_back(item, answer.note)
    else:
        _close_item(item, ReviewItem.Status.REJECTED if reject else ReviewItem.Status.APPROVED, now)
        item_decided(item, verdict, now)  # the outbox row, in this transaction
    if reject:
        LabelCount.objects.get_or_create(queue_id=item.queue_id, label=answer.reason_label)
        LabelCount.objects.filter(queue_id=item.queue_id, label=answer.reason_label).update(count=F("count") + 1)
    window = _tuner_window(item.queue_id) if verdict.counts_for_tuner else None
    queue = take_one_off_depth(item.queue_id, now)  # the item left the waiting set; its queue's lock from here
    if reject:
        _propose_rules(queue, now)
    if window is not None:
        _retune(queue, verdict, window, now)
    after_depth_change(queue, queue.depth, now)  # writes only if the watermarks move the mode
    return verdict


def settle(
    *,
    item_id: int,
    operator: AbstractBaseUser,
    decision: str,
    reason_label: str = "",
    note: str = "",
    now: datetime | None = None,
) -> Verdict:
    """An operator settles a double-reviewed item that is still waiting (its
    second review, a tiebreak, or an operator): their answer becomes the
    item's verdict, with everything a verdict brings. A reviewer who holds
    the item meanwhile finds it decided."""
    now = now or timezone.now()
    answer = _operator_answer(decision, reason_label, note)
    with transaction.atomic():
        try:
            item = ReviewItem.objects.select_for_update().get(pk=item_id)
        except ReviewItem.DoesNotExist:
            raise QueueError(f"item #{item_id} does not exist") from None
        if item.status in ReviewItem.DECIDED:
            raise AlreadyDecided(f"item #{item_id} was already decided ({item.get_status_display()})")
        if item.status not in ReviewItem.WAITING or item.review_round < 2:
            raise QueueError(f"item #{item_id} is not waiting for a double review to settle")
        verdict = settle_item(item, operator, answer, "operator", now)
        review_quality.settle_copies_with(item, now)
        return verdict


def _operator_answer(decision: str, reason_label: str, note: str) -> Answer:
    note_text, _ = clean_text(note, limit=NOTE_LIMIT)
    if decision == review_quality.APPROVE:
        return Answer(Verdict.Decision.APPROVE, note=note_text)
    if decision == review_quality.REJECT:
        if reason_label not in ReasonLabel.values:
            raise InvalidInput("reason_label", f"a rejection needs one of {', '.join(ReasonLabel.values)}")
        return Answer(Verdict.Decision.REJECT, reason_label=reason_label, note=note_text)
    if decision == review_quality.SEND_BACK:
        if not note_text.strip():
            raise InvalidInput("note", "sending back needs a note: say what the next try should change")
        return Answer(Verdict.Decision.SEND_BACK, note=note_text)
    raise InvalidInput("decision", "one of approve, reject, send_back")


def undo(*, reviewer: AbstractBaseUser, now: datetime | None = None) -> ReviewItem:
    """Take back the reviewer's last answer if it is younger than the undo
    window: the item returns to them under a fresh lease, and the label count
    and any step-limit change that verdict caused are reverted.

    A send-back is taken back only while its resumed run has not started:
    the run is cancelled with it. Once a worker has started the run, the
    send-back stands and UndoRefused says so. An answer in a double review
    is taken back while the item still waits and no one has answered it
    since; a gold answer, always. What was taken back is kept as an
    ``UndoneAnswer`` row, for the item's timeline."""
    now = now or timezone.now()
    window = undo_window()
    with transaction.atomic():
        # The latest answer, read before the locks and checked again after them.
        verdict, answer = _latest_answers(reviewer, now - window, lock=False)
        latest = (
            answer if answer is not None and (verdict is None or answer.created_at > verdict.created_at) else verdict
        )
        if latest is None:
            raise NothingToUndo(f"no verdict of yours in the last {window.seconds} seconds to undo")
        waiting = None
        if latest is answer:
            # An answer that settled nothing is on an item that still waits, which
            # others lock before its queue's row (the next answer, an operator's
            # settle, a bulk action): lock it first too, or each waits for the other.
            waiting = ReviewItem.all_objects.select_for_update().get(pk=latest.item_id)
        else:
            # A verdict's item, locked first too: a revision of a send-back locks
            # it (admission._lock_sent_back) while it admits, so the revision and
            # this undo are ordered, and the check for a revision below sees it.
            list(ReviewItem.all_objects.select_for_update().filter(pk=latest.item_id).values_list("pk"))
        queue = Queue.locked(waiting.queue_id if waiting is not None else latest.item.queue_id)
        if not Queue.objects.reviewable_by(reviewer).filter(pk=queue.pk).exists():
            raise UndoRefused(f"you no longer review the queue of item #{latest.item_id}, so your answer stands")
        verdict, answer = _latest_answers(reviewer, now - window, lock=True)
        if answer is not None and (verdict is None or answer.created_at > verdict.created_at):
            if answer.pk != latest.pk or waiting is None:
                raise UndoRefused("you answered again meanwhile; undo that answer first")
            return _undo_answer(queue, answer, waiting, reviewer, now)
        if verdict is None or verdict.pk != latest.pk:
            raise UndoRefused("you answered again meanwhile; undo that answer first")
        item = verdict.item
        if verdict.decision == Verdict.Decision.SEND_BACK:
            _refuse_undo_of_resumed(item)
        if not withdraw_verdict_event(item, verdict.created_at):
            raise UndoRefused(f"the producer has already been told the verdict on item #{item.pk}, so it stands")
        _revert_effects(queue, verdict)
        mine = Judgement.objects.filter(item=item, reviewer=reviewer, kind=Judgement.Kind.REVIEW).first()
        _record_undone(verdict, UndoneAnswer.Kind.VERDICT, mine.round if mine else item.review_round, now)
        verdict.delete()
        if mine is not None:  # the answer that settled a double review: the item waits for it again
            item.review_round = mine.round
            mine.delete()
        _hand_back(item, reviewer, queue, now)
        after_depth_change(queue, queue.depth + 1, now)  # the item is waiting again
        return item


def _refuse_undo_of_resumed(item: ReviewItem) -> None:
    """A send-back stands once the producer has acted on it: a revision of
    the item exists (pushed by the producer, or admitted by the resumed
    run), or the resumed run has started. Otherwise its run is cancelled."""
    revision = ReviewItem.objects.filter(previous_version=item).values_list("pk", flat=True).first()
    if revision is not None:
        raise UndoRefused(
            f"item #{item.pk} was sent back and its revision (item #{revision}) has already arrived, "
            "so the send-back stands"
        )
    if not cancel_resumed_run(item):
        raise UndoRefused(f"item #{item.pk} was sent back and its new run has already started, so the send-back stands")


def _latest_answers(
    reviewer: AbstractBaseUser, since: datetime, *, lock: bool
) -> tuple[Verdict | None, Judgement | None]:
    """The reviewer's latest verdict (row-locked when ``lock``) and latest
    unsettling answer after ``since``: strictly after, so an answer is
    undoable exactly while it is not final (``finality``)."""
    verdicts = Verdict.objects.select_for_update() if lock else Verdict.objects
    # An operator's verdict (a settled disagreement, a bulk rejection) is an
    # operator's act, audited as one, not an answer the review page gives: a
    # reviewing operator's undo never takes one of them back.
    mine = verdicts.filter(reviewer=reviewer, created_at__gt=since).exclude(settled_by="operator")
    verdict = mine.order_by("-created_at", "-pk").first()
    answer = Judgement.objects.filter(reviewer=reviewer, created_at__gt=since).order_by("-created_at", "-pk").first()
    return verdict, answer


def _revert_effects(queue: Queue, verdict: Verdict) -> None:
    """Take back what an undone verdict changed in its locked queue: the
    step-limit change it caused (if the limit is still the one it set) and
    its reason label's count."""
    change = StepLimitChange.objects.filter(verdict=verdict).first()
    if change is not None and queue.step_limit == change.step_limit:
        queue.step_limit = change.previous
        if queue.expected_step_limit is not None:
            queue.expected_step_limit = float(change.previous)
        queue.save(update_fields=["step_limit", "expected_step_limit", "updated_at"])
        change.delete()
    if verdict.reason_label and verdict.decision == Verdict.Decision.REJECT:
        LabelCount.objects.filter(queue=queue, label=verdict.reason_label, count__gt=0).update(count=F("count") - 1)


def _undo_answer(
    queue: Queue, answer: Judgement, item: ReviewItem, reviewer: AbstractBaseUser, now: datetime
) -> ReviewItem:
    """Take back a double review's answer that settled nothing, or any
    answer on a gold copy that a real item's undo would take back: one that
    settled nothing, on the same terms, and the one that settled it (a real
    item's settling answer is its verdict, undone in ``undo``). ``item`` is
    the answer's item, locked by the caller."""
    copy = item.gold_id is not None
    settled_it = copy and item.status == ReviewItem.Status.GOLD and item.review_round == answer.round
    if not settled_it:
        if item.status not in ReviewItem.WAITING:
            # No status in the words: a gold copy's would tell it apart.
            raise UndoRefused(f"item #{item.pk} has been settled since, so your answer stands")
        later = item.review_round > answer.round + 1
        held = item.status == ReviewItem.Status.CLAIMED and item.lease_holder_id != reviewer.pk
        if later or (held and item.lease_expires_at is not None and item.lease_expires_at >= now):
            raise UndoRefused(f"another reviewer is answering item #{item.pk} now, so your answer stands")
    item.review_round = answer.round
    _record_undone(answer, answer.kind, answer.round, now)
    answer.delete()
    _hand_back(item, reviewer, queue, now)
    if settled_it:
        review_quality.gold_waiting_moved(queue.pk, +1)  # waiting again, as a real item's undo adds to the depth
    if copy:
        review_quality.update_standing(reviewer, now)
    return item


def _record_undone(answer: Verdict | Judgement, kind: str, round_: int, now: datetime) -> UndoneAnswer:
    """What the undone answer was, kept for the item's timeline before the
    answer's own row is deleted."""
    return UndoneAnswer.objects.create(
        item_id=answer.item_id,
        reviewer_id=answer.reviewer_id,
        kind=kind,
        round=round_,
        decision=answer.decision,
        reason_label=answer.reason_label,
        note=answer.note,
        settled_by=getattr(answer, "settled_by", ""),
        decided_at=answer.created_at,
        undone_at=now,
    )


def _hand_back(item: ReviewItem, reviewer: AbstractBaseUser, queue: Queue, now: datetime) -> None:
    """The item claimed by the reviewer again, under a fresh lease."""
    item.status = ReviewItem.Status.CLAIMED
    item.lease_holder = reviewer
    item.lease_expires_at = now + timedelta(seconds=queue.lease_seconds)
    item.decided_at = None
    item.save(update_fields=["status", "lease_holder", "lease_expires_at", "decided_at", "review_round", "updated_at"])


# --- what verdicts feed back into the loops ---------------------------------------------

# One verdict in the tuner's window: (item id, reviewer id, decision, settled by).
WindowRow = tuple[int, int | None, str, str]


def _tuner_window(queue_pk: int) -> list[WindowRow]:
    """The queue's last verdicts that count for the tuner, as many as its
    tuner window, oldest first: one statement, no lock (the window's length
    is read in the same statement)."""
    verdict, queue = Verdict._meta, Queue._meta

    def col(name: str) -> str:
        return verdict.get_field(name).column

    sql = (
        f"SELECT {col('item')}, {col('reviewer')}, {col('decision')}, {col('settled_by')} FROM {verdict.db_table}"
        f" WHERE {col('counts_for_tuner')} AND {col('queue')} = %(queue)s"
        f" ORDER BY {col('created_at')} DESC, {verdict.pk.column} DESC"
        f" LIMIT COALESCE((SELECT {queue.get_field('tuner_window').column}"
        f" FROM {queue.db_table} WHERE {queue.pk.column} = %(queue)s), 0)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, {"queue": queue_pk})
        rows = cursor.fetchall()
    return [tuple(row) for row in reversed(rows)]  # type: ignore[misc]


def _retune(queue: Queue, verdict: Verdict, window: list[WindowRow], now: datetime) -> None:
    """Move the step limit as the policy's tuner says, recording a change
    against the verdict that caused it (so undo can revert it). The caller
    holds the lock; the plain tuner writes only when the limit moves, the
    noise-aware one also when its fractional state moves.

    Only an approval counts as one: an edit or a send-back says the output
    was not acceptable as the loop produced it. The noise-aware tuner weighs
    each verdict by its reviewers' estimated reliability (``review_quality.
    window_probabilities``) and keeps the expected limit of a noise-free
    tuner; loops run it rounded."""
    cfg = queue.tuner()
    window = window[-cfg.window :] if cfg.window else []
    fields = []
    if queue.tuner_rule == "noise_aware":
        probabilities = review_quality.window_probabilities(window, queue)
        expected = queue.expected_step_limit
        if expected is None or policy.applied_step_limit(expected, cfg) != queue.step_limit:
            expected = float(queue.step_limit)  # first look, or an operator set the limit since
        new_expected = policy.tune_step_limit_weighted(expected, probabilities, cfg)
        new_limit = policy.applied_step_limit(new_expected, cfg)
        rate = math.fsum(probabilities) / len(probabilities) if len(probabilities) == cfg.window else None
        if new_expected != queue.expected_step_limit:
            queue.expected_step_limit = new_expected
            fields.append("expected_step_limit")
    else:
        approvals = [decision == Verdict.Decision.APPROVE for _, _, decision, _ in window]
        new_limit = policy.tune_step_limit(queue.step_limit, approvals, cfg)
        rate = policy.approve_rate(approvals, cfg.window)
        if queue.expected_step_limit is not None:
            queue.expected_step_limit = None
            fields.append("expected_step_limit")
    if new_limit != queue.step_limit:
        StepLimitChange.objects.create(
            queue=queue,
            previous=queue.step_limit,
            step_limit=new_limit,
            approve_rate=rate,
            verdict=verdict,
            created_at=now,
        )
        log.info(
            "step limit tuned",
            extra={
                "queue": queue.slug,
                "previous": queue.step_limit,
                "step_limit": new_limit,
                "tuner": queue.tuner_rule,
            },
        )
        queue.step_limit = new_limit
        fields.append("step_limit")
    if fields:
        queue.save(update_fields=[*fields, "updated_at"])


def _propose_rules(queue: Queue, now: datetime) -> None:
    """Propose a filter rule for each rejection label counted past the threshold."""
    counts = dict(LabelCount.objects.filter(queue=queue).values_list("label", "count"))
    existing = FilterRule.objects.filter(queue=queue).values_list("label", flat=True)
    for label in policy.proposed_filter_rules(counts, queue.label_threshold, existing):
        gate, description = policy.FILTER_GATES[label]
        FilterRule.objects.create(
            queue=queue,
            label=label,
            gate=gate,
            description=description,
            count_at_proposal=counts[label],
            proposed_at=now,
        )
        log.info("filter rule proposed", extra={"queue": queue.slug, "label": label, "gate": gate})
