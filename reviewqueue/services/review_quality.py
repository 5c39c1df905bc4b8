"""Trusting the verdicts: double review, gold items, reviewers' standing and
their estimated reliability (ARCHITECTURE.md rule 11).

**Double review.** When a reviewer answers an item for the first time,
``policy.selected_for_double_review`` picks a share ``double_review_rate`` of
items (by a hash of the item's id). The answer is kept as a ``Judgement`` and
the item goes back to the waiting set for a second reviewer, who is never the
first and never sees the first answer (the card shows the item, nothing
else). Two answers in the same decision category (approve, which includes
edit; reject; send back) settle the item; two that differ send it to a third
reviewer; if the three still differ, only an operator settles it
(``verdicts.settle``). A disagreement also goes to the operators when it
has waited for a third reviewer longer than the queue's
``escalation_delay_minutes`` (``escalate_overdue``, on the beat), and at
once when the delay is 0 or when nobody who reviews the queue, besides
those who answered, could take it (``could_take_next_round``: the people
the claim would serve, operators among them while operators review): a
small team does not wait for nobody.
Until then the item stays waiting: it keeps its place in the depth, no
webhook is sent, and the tuner does not hear of it. The settled verdict is
the answer of the reviewer who settled it (the second, or the third) and is
what the producer and the tuner get (``verdicts.settle_item``).

**Gold items.** An operator marks a decided item as gold with its expected
decision and label (``mark_gold``). At admission, beside a share
``gold_rate`` of the real items enqueued, a *copy* of one of the queue's gold
items is placed (``place_gold``, by ``policy.gold_copy_placed``): a row
written then, so its id, arrival, priority and draft tag are a real item's
neighbour's, waiting in queue order and counted in the waiting count
reviewers see (``Queue.gold_waiting``). The claim serves it as it serves any
item and then makes it show a gold item the reviewer has not seen
(``fill_copy``); leases, skips and expiry treat it as a real item. It goes
through the rounds of a double review as a real item does (chosen by the
same rule on its own id, served blind to someone it is new to, a third
round after a disagreement), each answer scored against the expectation
and kept as a gold ``Judgement`` (``answer_gold``), and it is closed when a
real item would be settled. Three answers that all differ wait for an
operator, unseen by the operators, and are settled beside the next
disagreement an operator settles (``settle_copies_with``). It never becomes
a Verdict, so it never reaches a producer, the tuner, the label counts, the
agreement statistics or the depth. Copies are invisible to every other query
(``ReviewItem.objects`` leaves them out).

**Standing.** After each gold answer, a reviewer whose share right falls
below ``gold_min_accuracy`` over at least ``gold_min_answers`` answers is
flagged, and, if ``gold_pause`` is on, paused: claim serves them nothing
until an operator reinstates them (``reinstate``); answers before that no
longer count towards a flag.

**Reliability.** ``reestimate`` runs ``policy.estimate_reliability`` (a
Dawid-Skene estimate) over the recent gold answers, double reviews and
single verdicts, and stores each reviewer's error rate on the policy row,
for the noise-aware tuner and the operators' page. A beat task runs it every
minute.

Locks: ``answer_gold`` and ``record_review`` run inside ``decide``'s
transaction under the item's lock (a copy's answer then updates its queue's
row, ``gold_waiting``); ``settle_copies_with`` runs inside an operator's
``settle``, after the queue's row, and locks copies no reviewer holds
(skipping any that something else holds); ``reestimate`` takes only the one
its single UPDATE of the policy row takes.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Collection, Hashable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from .. import access, policy
from ..models import OPERATOR_ROUND, GoldItem, Judgement, Queue, ReasonLabel, ReviewerStanding, ReviewItem, Verdict
from .errors import InvalidInput

log = logging.getLogger("reviewqueue.services")

# How much history a re-estimate of reviewer reliability reads at most.
RELIABILITY_HISTORY = 5_000

# Decision categories: what two answers must share to agree (policy.decision_category).
APPROVE, REJECT, SEND_BACK = policy.APPROVE, policy.REJECT, policy.SEND_BACK


def category(decision: str) -> str:
    """approve (as it is, or edited), reject, or send back; the service's
    answers are always one of the four decisions."""
    return policy.decision_category(decision) or SEND_BACK


@dataclass(frozen=True)
class Answer:
    """What one reviewer (or operator) said about one item."""

    decision: str
    reason_label: str = ""
    note: str = ""
    edited_output: str = ""

    @property
    def category(self) -> str:
        return category(self.decision)

    def fields(self) -> dict[str, str]:
        return {
            "decision": self.decision,
            "reason_label": self.reason_label,
            "note": self.note,
            "edited_output": self.edited_output,
        }

    def unsettled(self, item: ReviewItem, reviewer: AbstractBaseUser, now: datetime) -> Verdict:
        """The answer as an unsaved Verdict, for callers that show what was
        recorded: the item has no verdict yet (a double review waiting for
        its next reviewer), or never will (a gold copy). ``pk`` is None."""
        return Verdict(item=item, reviewer=reviewer, created_at=now, **self.fields())


# --- double review ----------------------------------------------------------------------


def wants_second_review(item: ReviewItem, reviewer: AbstractBaseUser, rate: float) -> bool:
    """Whether this first answer on the item waits for a second, blind one:
    the item is in the chosen share (by its own id, a gold copy's too), and
    someone else who could be served the next round exists (else it would
    wait for nobody)."""
    if item.review_round != 1 or not policy.selected_for_double_review(item.pk, rate):
        return False
    return could_take_next_round(item, reviewer).exists()


def could_take_next_round(item: ReviewItem, reviewer: AbstractBaseUser, *answered: Any) -> Any:
    """Who, besides ``reviewer`` and those in ``answered``, the claim could
    serve this item's next round: ``other_reviewers`` of its queue; for a
    gold copy, only those to whom it shows something new (they neither
    answered a copy of its gold item nor decided or answered its source),
    as ``fill_copy`` serves it."""
    users = other_reviewers(reviewer, *answered, queue_id=item.queue_id)
    if item.gold_id is not None:
        # Operators who review stay in, though no copy is shown to them: whether a
        # copy waits for another round must be decided as a real item's is, or the
        # waiting count over the answer would tell the two apart.
        users = users.exclude(_seen_gold(item.gold_id))
    return users


def shown_copies(reviewer: AbstractBaseUser) -> bool:
    """Whether a gold copy may be shown to this user: not to an operator
    (or a superuser), whose pages show them what an item is (its gold mark,
    its real status), so a copy would measure nothing and could be told apart."""
    return not access.is_operator(reviewer)


def copies_have_reviewers(queue_id: int) -> bool:
    """Whether someone the claim could show a copy of this queue exists: a
    reviewer of the queue, active, not paused, not an operator. A copy is
    placed only then; else it would only wait, seen by no one it measures."""
    return _queue_reviewers(queue_id).exclude(pk__in=access.operators().values("pk")).exists()


def _seen_gold(gold_id: int) -> Q:
    """Users who have seen this gold item: answered one of its copies,
    decided its source or answered it in a double review (as ``_gold_for``
    reads it, from the user's side)."""
    source = GoldItem.objects.filter(pk=gold_id).values("item_id")
    rows = (
        Judgement.objects.filter(item__gold_id=gold_id),
        Judgement.objects.filter(item_id__in=source),
        Verdict.objects.filter(item_id__in=source),
    )
    seen = Q()
    for answers in rows:
        seen |= Q(pk__in=answers.filter(reviewer_id__isnull=False).values("reviewer_id"))
    return seen


def other_reviewers(reviewer: AbstractBaseUser, *also: Any, queue_id: int | None = None) -> Any:
    """The users other than ``reviewer`` (and the user ids in ``also``) whom
    the claim would serve: active, not paused, holding a permission that
    lets them review (``access.reviewers``: the reviewer role, and operators
    while operators review); with ``queue_id``, only those who may review
    that queue (it is open to all, names them, or names one of their
    groups). Superusers count only if they hold such a permission too: an
    administrator is not assumed to review."""
    return _queue_reviewers(queue_id).exclude(pk__in=[reviewer.pk, *also])


def _queue_reviewers(queue_id: int | None) -> Any:
    """Whom the claim would serve (of the queue ``queue_id``, when given)."""
    users = (
        get_user_model()
        .objects.filter(pk__in=access.reviewers().values("pk"))
        .exclude(standing__paused_at__isnull=False)
    )
    if queue_id is not None:
        open_to_all = Exists(Queue.objects.filter(pk=queue_id, open_to_all=True))
        users = users.filter(open_to_all | Q(review_queues__pk=queue_id) | Q(groups__review_queues__pk=queue_id))
    return users


def record_review(
    item: ReviewItem, reviewer: AbstractBaseUser, answer: Answer, now: datetime, **scored: Any
) -> tuple[AbstractBaseUser, Answer, str] | None:
    """Keep this round's answer on a double-reviewed item (locked by the
    caller): a real item's as a review ``Judgement``, a gold copy's as a
    gold one with its score (``scored``). Answers (who settled it, the
    settled answer, how) when the answers so far settle the item; else puts
    the item back in the waiting set for its next round and answers None.
    Real items and copies go through these rounds alike."""
    kind = Judgement.Kind.GOLD if item.gold_id is not None else Judgement.Kind.REVIEW
    Judgement.objects.create(
        item=item,
        reviewer=reviewer,
        kind=kind,
        round=item.review_round,
        created_at=now,
        **scored,
        **answer.fields(),
    )
    decisions = list(
        Judgement.objects.filter(item=item, kind=kind)
        .order_by("round", "created_at", "pk")
        .values_list("decision", flat=True)
    )
    agreed = policy.settled_decision([category(d) for d in decisions])
    if agreed is not None:
        # Rounds 1 and 2 disagreed before any third answer, so a majority
        # always includes this, the latest, answer.
        how = "agreement" if len(decisions) == 2 else "tiebreak"
        log.info("double review settled", extra={"item": item.pk, "how": how, "decision": agreed})
        return reviewer, answer, how
    item.review_round = len(decisions) + 1
    if item.review_round < OPERATOR_ROUND and escalate_now(item, reviewer):
        item.review_round = OPERATOR_ROUND
    item.status = ReviewItem.Status.PENDING
    item.lease_holder = None
    item.lease_expires_at = None
    item.save(update_fields=["review_round", "status", "lease_holder", "lease_expires_at", "updated_at"])
    log.info("double review continues", extra={"item": item.pk, "round": item.review_round})
    return None


def escalate_now(item: ReviewItem, reviewer: AbstractBaseUser) -> bool:
    """Whether a disagreement goes to the operators at once rather than wait
    for a third reviewer: the queue says so (a delay of 0), or nobody else
    who reviews the queue, active and not paused, could take the next round
    (a small team would wait for nobody)."""
    delay = None
    if item.review_round > 2:  # a disagreement, not a first answer waiting for its second
        delay = Queue.objects.filter(pk=item.queue_id).values_list("escalation_delay_minutes", flat=True).first()
    if delay is not None and delay <= 0:
        log.info("double review escalated: the queue settles disagreements by an operator", extra={"item": item.pk})
        return True
    answered = Judgement.objects.filter(item=item).values_list("reviewer_id", flat=True)
    if not could_take_next_round(item, reviewer, *answered).exists():
        log.info("double review escalated: no other reviewer", extra={"item": item.pk})
        return True
    return False


def escalate_overdue(*, now: datetime) -> int:
    """Send to the operators each disagreement that has waited for a third
    reviewer longer than its queue's ``escalation_delay_minutes`` (counted
    from the answer that disagreed). An item a third reviewer holds under a
    live lease is left to them; one whose lease ran out is taken back. One
    conditional UPDATE per queue, so a claim racing it either wins (the item
    is held) or finds the item in the operators' round, which no reviewer
    claims. The item stays waiting, so depth and mode do not move. Safe to
    repeat. Answers how many items were escalated."""
    escalated = 0
    delays = Queue.objects.filter(escalation_delay_minutes__isnull=False).values_list("pk", "escalation_delay_minutes")
    for queue_id, delay in delays:
        cutoff = now - timedelta(minutes=delay)
        # A gold copy's answers count as a real item's: it is escalated alike.
        disagreed = Judgement.objects.filter(item=OuterRef("pk"), created_at__gt=cutoff)
        free = Q(status=ReviewItem.Status.PENDING) | Q(status=ReviewItem.Status.CLAIMED, lease_expires_at__lt=now)
        count = (
            ReviewItem.all_objects.filter(queue_id=queue_id, review_round__gt=2, review_round__lt=OPERATOR_ROUND)
            .filter(free)
            .exclude(Exists(disagreed))
            .update(
                review_round=OPERATOR_ROUND,
                status=ReviewItem.Status.PENDING,
                lease_holder=None,
                lease_expires_at=None,
                updated_at=now,
            )
        )
        if count:
            log.info("double review escalated: waited too long", extra={"queue": queue_id, "items": count})
        escalated += count
    return escalated


# --- gold items -------------------------------------------------------------------------


def mark_gold(
    *,
    item_id: int,
    operator: AbstractBaseUser,
    expected_decision: str,
    expected_label: str = "",
    now: datetime | None = None,
) -> GoldItem:
    """Mark a decided item as gold: its right decision (approve or reject)
    and, for a rejection, optionally its right label. Marking it again
    changes the expectation and serves it again if it was retired."""
    now = now or timezone.now()
    if expected_decision not in GoldItem.Expected.values:
        raise InvalidInput("expected_decision", "approve or reject")
    if expected_label and (expected_decision != REJECT or expected_label not in ReasonLabel.values):
        raise InvalidInput("expected_label", f"only a rejection has a label, one of {', '.join(ReasonLabel.values)}")
    with transaction.atomic():
        item = ReviewItem.objects.filter(pk=item_id).first()
        if item is None:
            raise InvalidInput("item", f"item {item_id} does not exist")
        if item.status not in (ReviewItem.Status.APPROVED, ReviewItem.Status.REJECTED, ReviewItem.Status.SENT_BACK):
            raise InvalidInput("item", f"item {item_id} is {item.status}: only an item a person decided can be gold")
        gold, created = GoldItem.objects.update_or_create(
            item=item,
            defaults={
                "expected_decision": expected_decision,
                "expected_label": expected_label,
                "retired_at": None,
            },
            create_defaults={
                "expected_decision": expected_decision,
                "expected_label": expected_label,
                "created_by": operator,
                "created_at": now,
            },
        )
    forget_gold_settings()
    log.info("gold item marked", extra={"item": item_id, "expected": expected_decision, "new": created})
    return gold


def retire_gold(*, gold_id: int, operator: AbstractBaseUser, now: datetime | None = None) -> GoldItem:
    """Stop serving a gold item; its answers so far still count."""
    now = now or timezone.now()
    gold = GoldItem.objects.filter(pk=gold_id).first()
    if gold is None:
        raise InvalidInput("gold", f"gold item {gold_id} does not exist")
    if gold.retired_at is None:
        gold.retired_at = now
        gold.save(update_fields=["retired_at"])
        log.info("gold item retired", extra={"gold": gold_id, "operator": operator.pk})
    forget_gold_settings()
    return gold


# Each queue's gold rate while it has an active gold item, read at every
# admission, so kept per process for a few seconds: a change reaches every
# process within GOLD_SETTINGS_SECONDS (and this one at once: see
# forget_gold_settings).
GOLD_SETTINGS_SECONDS = 5.0
_gold_settings: dict[str, Any] = {}
_gold_lock = threading.Lock()
_rng = random.SystemRandom()


def forget_gold_settings() -> None:
    with _gold_lock:
        _gold_settings.clear()


def _gold_rates() -> dict[int, float]:
    """The gold rate of each queue that has an active gold item and a rate
    above zero (one statement, at most once per GOLD_SETTINGS_SECONDS)."""
    with _gold_lock:
        if _gold_settings and time.monotonic() - _gold_settings["read"] < GOLD_SETTINGS_SECONDS:
            return dict(_gold_settings["rates"])
    active = GoldItem.objects.filter(retired_at__isnull=True, item__queue_id=OuterRef("pk"))
    rates = {
        pk: float(rate)
        for pk, rate in Queue.objects.filter(gold_rate__gt=0).filter(Exists(active)).values_list("pk", "gold_rate")
    }
    with _gold_lock:
        _gold_settings.update(rates=rates, read=time.monotonic())
    return rates


# What a copy takes from its gold item: what the card shows, nothing that
# links it back (ids, run, producer's key, callback, history). Its place in
# the queue (id, arrival, priority, draft tag) is the real item's beside
# which it was placed.
_COPIED = (
    "task_id",
    "task_kind",
    "task_description",
    "final_output",
    "output_truncated",
    "last_error",
    "attempt_count",
    "reviewed_attempt",
    "checks_passed",
    "checks_total",
    "reviewed_score",
    "failing_checks",
    "cutoff_reason",
    "label",
    "producer",
)


def place_gold(item: ReviewItem, now: datetime) -> ReviewItem | None:
    """With chance ``gold_rate`` of its queue, place a gold copy beside a
    real item just enqueued: a row written now, so its id neighbours the real
    item's, with the same arrival, priority and draft tag. It waits like a
    real item, is served in queue order by the same claim, and counts in the
    waiting count reviewers see (``Queue.gold_waiting``), never in the depth.
    Which gold item it shows is settled when a reviewer claims it
    (``fill_copy``). None when nothing was placed."""
    rate = _gold_rates().get(item.queue_id, 0.0)
    if rate <= 0 or not policy.gold_copy_placed(_rng.random(), rate):
        return None
    gold = (
        GoldItem.objects.filter(retired_at__isnull=True, item__queue_id=item.queue_id)
        .select_related("item")
        .order_by("?")
        .first()
    )
    if gold is None or not copies_have_reviewers(item.queue_id):
        return None
    with transaction.atomic():
        copy = ReviewItem.all_objects.create(
            **{name: getattr(gold.item, name) for name in _COPIED},
            queue_id=item.queue_id,
            gold=gold,
            idempotency_key=f"gold-copy:{uuid.uuid4().hex}",
            status=ReviewItem.Status.PENDING,
            priority=item.priority,
            draft=item.draft,
            created_at=item.created_at,
        )
        Queue.objects.filter(pk=item.queue_id).update(gold_waiting=F("gold_waiting") + 1)
    log.info("gold copy placed", extra={"gold": gold.pk, "beside": item.pk})
    return copy


def drop_unserved_copies(queue_ids: Collection[int] | None = None) -> int:
    """Take out of the waiting set (and the waiting count) the copies no one
    could be shown any more: those waiting for their first reviewer in a
    queue where nobody reviews who may be shown a copy
    (``copies_have_reviewers``), as none is placed there. Copies held or in
    a later round go on as a real item does. Answers how many were dropped."""
    queues = Queue.objects.filter(gold_waiting__gt=0)
    if queue_ids is not None:
        queues = queues.filter(pk__in=list(queue_ids))
    dropped = 0
    for queue_id in queues.values_list("pk", flat=True):
        if copies_have_reviewers(queue_id):
            continue
        with transaction.atomic():
            gone, _ = ReviewItem.all_objects.filter(
                queue_id=queue_id, gold__isnull=False, status=ReviewItem.Status.PENDING, review_round=1
            ).delete()
            if gone:
                gold_waiting_moved(queue_id, -gone)
                log.info("gold copies dropped: nobody left to show them", extra={"queue": queue_id, "copies": gone})
        dropped += gone
    return dropped


def fill_copy(copy: ReviewItem, reviewer: AbstractBaseUser) -> bool:
    """Make the copy the reviewer just claimed show a gold item they neither
    decided nor answered. In its first round: of those, one no other open
    copy shows (held now, or waiting for a later round), and that the fewest
    reviewers have answered (at random among them), so that if it is chosen
    for a second review someone it is new to is there, as for a real item. In a later round it shows what the earlier rounds were
    shown, so it is served only to a reviewer to whom that is new. False
    when there is nothing for them (the caller gives it back)."""
    if not shown_copies(reviewer):
        return False
    if copy.review_round > 1:
        seen = get_user_model().objects.filter(pk=reviewer.pk).filter(_seen_gold(copy.gold_id))
        return not is_paused(reviewer) and not seen.exists()
    # A gold item another copy shows (held by a reviewer now, or waiting for
    # its next round) is kept for that copy: shown meanwhile in this one, it
    # would no longer be new to the reviewers the other's next round waits for.
    eligible = _gold_for(reviewer, [copy.queue_id]).exclude(Exists(_shown_elsewhere(OuterRef("pk"), copy.pk)))
    answered = Count("copies__judgements__reviewer", distinct=True)
    for gold in eligible.annotate(answered=answered).order_by("answered", "?")[:FILL_CANDIDATES]:
        with transaction.atomic():
            # Two claims at once may pick the same gold item, neither seeing the
            # other's copy yet: the gold item's row lock orders them, and the
            # second, once the lock is its own, sees the first's copy and moves on.
            GoldItem.objects.select_for_update().filter(pk=gold.pk).values_list("pk").first()
            if _shown_elsewhere(gold.pk, copy.pk).exists():
                continue
            if gold.pk != copy.gold_id:
                for name in _COPIED:
                    setattr(copy, name, getattr(gold.item, name))
                copy.gold = gold
                copy.save(update_fields=[*_COPIED, "gold", "updated_at"])
        log.info("gold item served", extra={"gold": gold.pk, "reviewer": reviewer.pk})
        return True
    return False


# How many gold items a claim tries, fewest answers first, when another claim
# took the first at the same moment.
FILL_CANDIDATES = 3


def _shown_elsewhere(gold: Any, copy_pk: int) -> QuerySet[ReviewItem]:
    """The open copies other than ``copy_pk`` that show ``gold`` (a gold
    item's pk, or a reference to one): held by a reviewer now, or waiting
    for a later round."""
    return (
        ReviewItem.all_objects.filter(gold=gold, status__in=ReviewItem.WAITING)
        .filter(Q(review_round__gt=1) | Q(status=ReviewItem.Status.CLAIMED))
        .exclude(pk=copy_pk)
    )


def give_back_copy(copy: ReviewItem) -> None:
    """A copy just claimed that ``fill_copy`` could not fill: back to the
    queue for the next reviewer, or, when it is in its first round and its
    queue has no active gold item left to show, out of the queue and the
    waiting count. A copy in a later round always waits again, as a real
    item does."""
    with transaction.atomic():
        keep = copy.review_round > 1
        if keep or GoldItem.objects.filter(retired_at__isnull=True, item__queue_id=copy.queue_id).exists():
            ReviewItem.all_objects.filter(pk=copy.pk, status=ReviewItem.Status.CLAIMED).update(
                status=ReviewItem.Status.PENDING, lease_holder=None, lease_expires_at=None, claimed_at=None
            )
            return
        if ReviewItem.all_objects.filter(pk=copy.pk, status=ReviewItem.Status.CLAIMED).delete()[0]:
            gold_waiting_moved(copy.queue_id, -1)


def _gold_for(reviewer: AbstractBaseUser, queues: Collection[int]) -> QuerySet[GoldItem]:
    """The active gold items of ``queues`` that this reviewer neither
    decided nor answered (none for a paused reviewer)."""
    paused = ReviewerStanding.objects.filter(reviewer=reviewer, paused_at__isnull=False)
    seen = Judgement.objects.filter(reviewer=reviewer, item__gold=OuterRef("pk"))
    judged_source = Judgement.objects.filter(reviewer=reviewer, item=OuterRef("item"))
    return (
        GoldItem.objects.filter(retired_at__isnull=True, item__queue_id__in=list(queues))
        .exclude(item__verdict__reviewer=reviewer)
        .exclude(Exists(judged_source))
        .exclude(Exists(seen))
        .exclude(Exists(paused))
        .select_related("item")
    )


def answer_gold(item: ReviewItem, reviewer: AbstractBaseUser, answer: Answer, now: datetime, *, single: bool) -> None:
    """A gold copy's answer: scored against the expectation and kept as a
    gold ``Judgement``, through the rounds a real item goes through
    (``single``: the first answer settles it, as a real item's does when it
    is not chosen for a second review; else ``record_review``). The copy is
    closed when a real item would be settled, and waits, counted in the
    waiting count, while a real item would wait. Each answer re-reads the
    reviewer's standing. Nothing else hears of it."""
    gold = GoldItem.objects.get(pk=item.gold_id)
    expected_approve = gold.expected_decision == GoldItem.Expected.APPROVE
    label_expected = bool(gold.expected_label) and answer.decision == Verdict.Decision.REJECT
    scored = {
        "correct": (answer.category == APPROVE) == expected_approve,
        "label_correct": (answer.reason_label == gold.expected_label) if label_expected else None,
    }
    if single:
        Judgement.objects.create(
            item=item,
            reviewer=reviewer,
            kind=Judgement.Kind.GOLD,
            round=item.review_round,
            created_at=now,
            **scored,
            **answer.fields(),
        )
    if single or record_review(item, reviewer, answer, now, **scored) is not None:
        close_copy(item, now)
    update_standing(reviewer, now)


def close_copy(item: ReviewItem, now: datetime) -> None:
    """The copy is settled: it leaves the waiting set, and the waiting count."""
    item.status = ReviewItem.Status.GOLD
    item.decided_at = now
    item.lease_expires_at = None
    item.save(update_fields=["status", "decided_at", "lease_expires_at", "updated_at"])
    gold_waiting_moved(item.queue_id, -1)


def settle_copies_with(item: ReviewItem, now: datetime) -> list[int]:
    """An operator has just settled ``item``, one of its queue's double
    reviews: the copies of the queue waiting for an operator (three answers
    that all differed) that arrived no later than it are settled with it,
    or, if none did, the oldest one; so copies leave that round at the pace
    and in the order in which the operators settle real items, and never
    show on their page. Each shows its gold item's expected answer as its
    verdict (``selectors.review_item.copy_verdict``). Answers their ids."""
    waiting = ReviewItem.all_objects.filter(
        queue_id=item.queue_id, gold__isnull=False, review_round=OPERATOR_ROUND, status__in=ReviewItem.WAITING
    ).order_by("created_at", "pk")
    copies = list(waiting.filter(created_at__lte=item.created_at).select_for_update(skip_locked=True))
    if not copies:
        copies = list(waiting.select_for_update(skip_locked=True)[:1])
    for copy in copies:
        close_copy(copy, now)
    if copies:
        log.info(
            "gold copies settled beside an operator's settlement",
            extra={"item": item.pk, "copies": [copy.pk for copy in copies]},
        )
    return [copy.pk for copy in copies]


def gold_waiting_moved(queue_pk: int, by: int) -> None:
    """A copy left the waiting set (answered: -1) or came back to it (its
    answer undone: +1), in the caller's transaction, as the depth moves for
    a real item; never below zero."""
    moved = Greatest(F("gold_waiting") + by, Value(0))
    Queue.objects.filter(pk=queue_pk).update(gold_waiting=moved, updated_at=timezone.now())


# --- standing ---------------------------------------------------------------------------


def gold_record(reviewer_id: int, since: datetime | None = None) -> tuple[int, int]:
    """(right, answers) on gold, since ``since`` when given."""
    answers = Judgement.objects.filter(reviewer_id=reviewer_id, kind=Judgement.Kind.GOLD)
    if since is not None:
        answers = answers.filter(created_at__gte=since)
    counts = Counter(answers.values_list("correct", flat=True))
    return counts[True], counts[True] + counts[False]


def update_standing(reviewer: AbstractBaseUser, now: datetime) -> ReviewerStanding | None:
    """Flag (and, if the policy says so, pause) a reviewer whose accuracy on
    gold since they were last reinstated is below the policy's bar; lift a
    flag that no longer holds. A pause stays until an operator lifts it.
    A reviewer's standing is team-wide, under the default queue's gold
    settings (ARCHITECTURE.md, "Many queues")."""
    queue = Queue.default()
    standing = ReviewerStanding.objects.filter(reviewer=reviewer).first()
    right, answers = gold_record(reviewer.pk, standing.reinstated_at if standing else None)
    flagged = policy.gold_flagged(right, answers, queue.gold_min_accuracy, queue.gold_min_answers)
    if standing is None and not flagged:
        return None
    if standing is None:
        standing = ReviewerStanding(reviewer=reviewer)
    was = (standing.flagged_at is not None, standing.paused_at is not None)
    standing.flagged_at = (standing.flagged_at or now) if flagged else None
    if flagged and queue.gold_pause and standing.paused_at is None:
        standing.paused_at = now
    if (standing.flagged_at is not None, standing.paused_at is not None) != was or standing.pk is None:
        standing.save()
        log.warning(
            "reviewer standing changed",
            extra={
                "reviewer": reviewer.pk,
                "flagged": standing.flagged_at is not None,
                "paused": standing.paused_at is not None,
                "gold_right": right,
                "gold_answers": answers,
            },
        )
    return standing


def reinstate(*, reviewer_id: int, operator: AbstractBaseUser, now: datetime | None = None) -> ReviewerStanding:
    """Lift a reviewer's flag and pause; gold answers before now no longer count towards a flag."""
    now = now or timezone.now()
    if not get_user_model().objects.filter(pk=reviewer_id).exists():
        raise InvalidInput("reviewer", f"user {reviewer_id} does not exist")
    standing, _ = ReviewerStanding.objects.get_or_create(reviewer_id=reviewer_id)
    standing.flagged_at = None
    standing.paused_at = None
    standing.reinstated_at = now
    standing.reinstated_by = operator
    standing.save()
    log.info("reviewer reinstated", extra={"reviewer": reviewer_id, "operator": operator.pk})
    return standing


def is_paused(reviewer: AbstractBaseUser) -> bool:
    return ReviewerStanding.objects.filter(reviewer=reviewer, paused_at__isnull=False).exists()


# --- reliability ------------------------------------------------------------------------


def reliability_of(queue: Queue) -> policy.Reliability:
    """The stored estimate, as policy.py's value (the prior's if none yet)."""
    stored = queue.reliability if isinstance(queue.reliability, dict) else {}
    prior = policy.ReliabilityPrior()
    try:
        return policy.Reliability(
            errors={int(k): float(v) for k, v in dict(stored.get("errors", {})).items()},
            approve_share=float(stored.get("approve_share", prior.approve)),
            default_error=float(stored.get("default_error", prior.error)),
            answers={int(k): float(v) for k, v in dict(stored.get("answers", {})).items()},
        )
    except (TypeError, ValueError):
        return policy.Reliability(approve_share=prior.approve, default_error=prior.error)


def reestimate(*, now: datetime | None = None) -> policy.Reliability:
    """Re-estimate every reviewer's error rate from the recent history of all
    queues and store it on every queue's row (``Queue.reliability``): a
    reviewer is as reliable in one queue as in another.

    Gold answers count as known right or wrong; double-reviewed items give
    the estimator their reviewers' answers to weigh against each other;
    single verdicts inform only how often items deserve approval. As the
    tuner asks, an answer is an approval only if it approved the output as
    it was (an edit or a send-back says it needed more)."""
    now = now or timezone.now()
    gold_rows = (
        Judgement.objects.filter(kind=Judgement.Kind.GOLD, reviewer__isnull=False)
        .order_by("-created_at")
        .values_list("reviewer_id", "decision", "item__gold__expected_decision")[:RELIABILITY_HISTORY]
    )
    gold = [
        policy.GoldAnswer(reviewer=rid, approved=decision == Verdict.Decision.APPROVE, truth=expected == APPROVE)
        for rid, decision, expected in gold_rows
    ]
    recent_items = (
        Judgement.objects.filter(kind=Judgement.Kind.REVIEW)
        .order_by("-item_id")
        .values_list("item_id", flat=True)
        .distinct()[:RELIABILITY_HISTORY]
    )
    by_item: dict[int, list[policy.ReviewerVerdict]] = defaultdict(list)
    for item_id, rid, decision in Judgement.objects.filter(
        kind=Judgement.Kind.REVIEW, item_id__in=list(recent_items), reviewer__isnull=False
    ).values_list("item_id", "reviewer_id", "decision"):
        by_item[item_id].append(policy.ReviewerVerdict(rid, decision == Verdict.Decision.APPROVE))
    groups: Counter[tuple[policy.ReviewerVerdict, ...]] = Counter(
        tuple(sorted(verdicts, key=lambda v: (str(v.reviewer), v.approved))) for verdicts in by_item.values()
    )
    singles = (
        Verdict.objects.filter(settled_by="reviewer", reviewer__isnull=False, counts_for_tuner=True)
        .order_by("-created_at")
        .values_list("reviewer_id", "decision")[:RELIABILITY_HISTORY]
    )
    for rid, decision in singles:
        groups[(policy.ReviewerVerdict(rid, decision == Verdict.Decision.APPROVE),)] += 1
    estimate = policy.estimate_reliability(gold, dict(groups))
    stored = {
        "errors": {str(k): round(v, 6) for k, v in estimate.errors.items()},
        "answers": {str(k): round(v, 3) for k, v in estimate.answers.items()},
        "default_error": round(estimate.default_error, 6),
        "approve_share": round(estimate.approve_share, 6),
        "estimated_at": now.isoformat(),
    }
    Queue.default()  # the row exists
    Queue.objects.update(reliability=stored)
    return estimate


def window_probabilities(rows: list[tuple[int, int | None, str, str]], queue: Queue) -> list[float]:
    """For the tuner's window (item, reviewer, decision, settled_by; oldest
    first), each item's chance that it truly deserved approval, given its
    reviewers' answers and their estimated reliability. An operator's
    settlement is taken as the truth."""
    reliability = reliability_of(queue)
    doubles = [item_id for item_id, _, _, how in rows if how in ("agreement", "tiebreak")]
    answers: dict[int, list[policy.ReviewerVerdict]] = defaultdict(list)
    if doubles:
        for item_id, rid, decision in Judgement.objects.filter(
            item_id__in=doubles, kind=Judgement.Kind.REVIEW
        ).values_list("item_id", "reviewer_id", "decision"):
            answers[item_id].append(policy.ReviewerVerdict(_who(rid, item_id), decision == Verdict.Decision.APPROVE))
    probabilities = []
    for item_id, rid, decision, how in rows:
        approved = decision == Verdict.Decision.APPROVE
        if how == "operator":
            probabilities.append(1.0 if approved else 0.0)
            continue
        verdicts = answers.get(item_id) or [policy.ReviewerVerdict(_who(rid, item_id), approved)]
        probabilities.append(policy.approve_probability(verdicts, reliability))
    return probabilities


def _who(reviewer_id: int | None, item_id: int) -> Hashable:
    """A removed reviewer is nobody known: the team's pooled error applies."""
    return reviewer_id if reviewer_id is not None else f"removed:{item_id}"
