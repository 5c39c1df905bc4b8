"""What renew, skip and undo leave behind for an item's timeline: one
coalesced row per renewed or skipped lease (never a row per renewal), and one row per answer
taken back, saying what it decided, who gave it, when, and when it was
undone; a verdict, a send-back and a double review's answers alike."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from reviewqueue import services
from reviewqueue.models import LeaseRecord, ReviewItem, UndoneAnswer

pytestmark = pytest.mark.django_db


def test_many_renewals_of_one_lease_are_one_row(claimed: ReviewItem, reviewer: Any) -> None:
    start = timezone.now()
    for minute in range(1, 6):
        services.renew(item_id=claimed.pk, reviewer=reviewer, now=start + timedelta(minutes=minute))
    lease = LeaseRecord.objects.get()
    assert lease.renewals == 5
    assert (lease.item_id, lease.holder_id, lease.claimed_at) == (claimed.pk, reviewer.pk, claimed.claimed_at)
    assert lease.first_at == start + timedelta(minutes=1)
    assert lease.last_at == start + timedelta(minutes=5)
    assert lease.expires_at == ReviewItem.objects.get(pk=claimed.pk).lease_expires_at


def test_a_new_lease_on_the_item_gets_its_own_row(
    claimed: ReviewItem, reviewer: Any, make_user: Callable[..., Any]
) -> None:
    services.renew(item_id=claimed.pk, reviewer=reviewer)
    services.release(item_id=claimed.pk, reviewer=reviewer)
    other = make_user("olga", "reviewer")
    assert services.claim(reviewer=other).pk == claimed.pk
    services.renew(item_id=claimed.pk, reviewer=other)
    services.renew(item_id=claimed.pk, reviewer=other)
    rows = list(LeaseRecord.objects.order_by("pk").values_list("holder__username", "renewals", "released_at"))
    assert [(who, n, skipped is not None) for who, n, skipped in rows] == [("rita", 1, True), ("olga", 2, False)]


def test_a_skip_is_kept_on_its_lease_whether_or_not_it_was_renewed(
    claimed: ReviewItem, reviewer: Any, make_user: Callable[..., Any]
) -> None:
    claimed_at = ReviewItem.objects.get(pk=claimed.pk).claimed_at
    skipped = timezone.now() + timedelta(seconds=20)
    services.release(item_id=claimed.pk, reviewer=reviewer, now=skipped)
    lease = LeaseRecord.objects.get()
    assert (lease.holder_id, lease.claimed_at, lease.renewals, lease.released_at) == (
        reviewer.pk,
        claimed_at,
        0,
        skipped,
    )
    assert lease.first_at is None and lease.last_at is None
    with pytest.raises(services.QueueError):  # a second skip has no lease to give back
        services.release(item_id=claimed.pk, reviewer=reviewer)
    assert LeaseRecord.objects.count() == 1


def test_a_refused_renewal_leaves_no_row(claimed: ReviewItem, make_user: Callable[..., Any]) -> None:
    with pytest.raises(services.NotLeaseHolder):
        services.renew(item_id=claimed.pk, reviewer=make_user("olga", "reviewer"))
    assert not LeaseRecord.objects.exists()


def test_claim_and_decide_write_no_renewal_row(claimed: ReviewItem, reviewer: Any) -> None:
    services.decide(item_id=claimed.pk, reviewer=reviewer, approve=True)
    assert not LeaseRecord.objects.exists()


def test_an_undone_verdict_is_kept_with_what_who_and_when(claimed: ReviewItem, reviewer: Any) -> None:
    given = timezone.now()
    services.decide(item_id=claimed.pk, reviewer=reviewer, approve=False, reason_label="code_error", now=given)
    services.undo(reviewer=reviewer, now=given + timedelta(seconds=4))
    undone = UndoneAnswer.objects.get()
    assert (undone.item_id, undone.reviewer_id, undone.kind) == (claimed.pk, reviewer.pk, "verdict")
    assert (undone.decision, undone.reason_label, undone.settled_by, undone.round) == (
        "reject",
        "code_error",
        "reviewer",
        1,
    )
    assert (undone.decided_at, undone.undone_at) == (given, given + timedelta(seconds=4))


def test_an_undone_send_back_keeps_its_note(claimed: ReviewItem, reviewer: Any) -> None:
    services.send_back(item_id=claimed.pk, reviewer=reviewer, note="Handle the empty list")
    services.undo(reviewer=reviewer)
    undone = UndoneAnswer.objects.get()
    assert (undone.decision, undone.note) == ("send_back", "Handle the empty list")
    assert ReviewItem.objects.get(pk=claimed.pk).status == ReviewItem.Status.CLAIMED


def test_a_refused_undo_keeps_nothing(claimed: ReviewItem, reviewer: Any) -> None:
    with pytest.raises(services.NothingToUndo):
        services.undo(reviewer=reviewer)
    assert not UndoneAnswer.objects.exists()


@pytest.mark.double_review
def test_undone_answers_of_a_double_review_say_their_round(
    admit_item: Callable[..., Any], small_queue: Callable[..., Any], make_user: Callable[..., Any]
) -> None:
    small_queue(capacity=50, double_review_rate=1.0, gold_rate=0)
    ann, ben = make_user("ann", "reviewer"), make_user("ben", "reviewer")
    item_id = admit_item().item.pk
    assert services.claim(reviewer=ann).pk == item_id
    services.decide(item_id=item_id, reviewer=ann, approve=True)
    services.undo(reviewer=ann)  # a first answer, which settled nothing
    services.decide(item_id=item_id, reviewer=ann, approve=True)
    assert services.claim(reviewer=ben).pk == item_id
    services.decide(item_id=item_id, reviewer=ben, approve=True)
    services.undo(reviewer=ben)  # the answer that settled the item by agreement
    rows = UndoneAnswer.objects.order_by("pk").values_list("reviewer__username", "kind", "round", "settled_by")
    assert list(rows) == [("ann", "review", 1, ""), ("ben", "verdict", 2, "agreement")]
