"""Gold copies go through the rounds of a double review as real items do
(ARCHITECTURE.md, "Double review, gold items and reviewer reliability"):
chosen for a second review by the same rule on their own id, served blind
to another reviewer, sent to a third after a disagreement, each answer
scored for its reviewer, and closed when a real item would be settled. None
of it reaches the depth, producers, webhooks, the tuner or the agreement
statistics."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from reviewqueue import agreement, services
from reviewqueue.models import (
    OPERATOR_ROUND,
    GoldItem,
    Judgement,
    LabelCount,
    Queue,
    ReviewItem,
    StepLimitChange,
    Verdict,
    WebhookDelivery,
)
from reviewqueue.selectors.items import ItemFilter
from reviewqueue.selectors.review_item import copy_verdict
from reviewqueue.services import bulk, review_quality
from reviewqueue.tokens import issue_token

pytestmark = [pytest.mark.double_review, pytest.mark.django_db]


@pytest.fixture(autouse=True)
def _fresh_gold_settings(settings: Any) -> None:
    settings.REVIEWQUEUE_OPERATORS_REVIEW = False  # who reviews is the team below, nobody else
    review_quality.forget_gold_settings()


@pytest.fixture
def team(make_user: Callable[..., Any]) -> list[Any]:
    return [make_user(name, "reviewer") for name in ("ann", "ben", "cat")]


@pytest.fixture
def gold(
    admit_item: Callable[..., Any], small_queue: Callable[..., Any], make_user: Callable[..., Any], operator: Any
) -> Callable[..., list[GoldItem]]:
    """Gold items decided by a reviewer who then leaves; afterwards a copy is
    placed beside every real item and every item is chosen for a second review."""

    def make(count: int = 2, **fields: Any) -> list[GoldItem]:
        small_queue(capacity=50, double_review_rate=0, gold_rate=0, **fields)
        dan = make_user("dan", "reviewer")
        made = []
        for _ in range(count):
            source = admit_item().item.pk
            assert services.claim(reviewer=dan).pk == source
            services.decide(item_id=source, reviewer=dan, approve=True)
            made.append(services.mark_gold(item_id=source, operator=operator, expected_decision="approve"))
        dan.is_active = False
        dan.save()
        services.policy_update(user=None, changes={"gold_rate": 1.0, "double_review_rate": 1.0})
        return made

    return make


def placed(admit_item: Callable[..., Any]) -> tuple[int, int]:
    """A real item admitted, and the copy placed beside it."""
    real = admit_item().item.pk
    copy = ReviewItem.all_objects.get(pk=real + 1)
    assert copy.gold_id is not None
    return real, copy.pk


def answer(reviewer: Any, item_id: int, approve: bool, *, skip: tuple[int, ...] = (), now: Any = None) -> None:
    held = services.claim(reviewer=reviewer, exclude=skip, now=now)
    assert held is not None and held.pk == item_id, (held and held.pk, item_id)
    services.decide(item_id=item_id, reviewer=reviewer, approve=approve, reason_label="unclear", now=now)


def state(pk: int) -> tuple[str, int]:
    item = ReviewItem.all_objects.get(pk=pk)
    return item.status, item.review_round


def waiting() -> int:
    return Queue.current().waiting


def timeless(body: Any) -> Any:
    """A JSON body without what moves with the clock alone."""
    if isinstance(body, dict):
        return {k: timeless(v) for k, v in body.items() if k not in ("generated_at", "oldest_waiting_seconds")}
    if isinstance(body, list):
        return [timeless(v) for v in body]
    return body


def untouched() -> dict[str, Any]:
    """Everything a copy must never move, /api/stats as a producer reads it included."""
    queue = Queue.current()
    _, token = issue_token(name=f"stats-{Judgement.objects.count()}", scopes=["outputs"])
    stats = Client().get("/api/stats", headers={"Authorization": f"Bearer {token}"})
    assert stats.status_code == 200
    return {
        "api stats": timeless(stats.json()),
        "depth": queue.depth,
        "step": queue.step_limit,
        "verdicts": Verdict.objects.count(),
        "events": WebhookDelivery.objects.count(),
        "labels": dict(LabelCount.objects.values_list("label", "count")),
        "changes": StepLimitChange.objects.count(),
        "review answers": Judgement.objects.filter(kind=Judgement.Kind.REVIEW).count(),
        "pairs": agreement.quality_report(bootstrap=10)["pairs"],
        "double review": agreement.double_review_counts(),
    }


def test_a_copy_waits_for_a_second_reviewer_and_settles_as_a_real_item_does(
    admit_item: Callable[..., Any], gold: Callable[..., list[GoldItem]], team: list[Any]
) -> None:
    ann, ben, _ = team
    gold()
    real, copy = placed(admit_item)
    # The real item first, then its copy: each through the same two rounds,
    # the waiting count moving the same way over each answer.
    trace = {}
    for pk, skip in ((real, (copy,)), (copy, (real,))):
        counts = [waiting()]
        answer(ann, pk, approve=True, skip=skip)
        counts.append(waiting())
        assert state(pk) == ("pending", 2)
        assert services.claim(reviewer=ann, exclude=skip) is None  # never the same reviewer twice
        answer(ben, pk, approve=True, skip=skip)
        counts.append(waiting())
        trace[pk] = counts
    assert trace[real] == [2, 2, 1] and trace[copy] == [1, 1, 0]
    assert state(copy) == ("gold", 2)
    rounds = Judgement.objects.filter(item_id=copy).order_by("round")
    assert [(j.kind, j.round, j.reviewer, j.correct) for j in rounds] == [
        ("gold", 1, ann, True),
        ("gold", 2, ben, True),
    ]
    assert copy_verdict(ReviewItem.all_objects.get(pk=copy)).reviewer == ben  # shown as a real item's verdict


def test_a_copy_reaches_nothing_a_real_item_reaches_through_all_its_rounds(
    admit_item: Callable[..., Any], gold: Callable[..., list[GoldItem]], team: list[Any]
) -> None:
    ann, ben, cat = team
    gold(tuner_window=1, step_limit=5, escalation_delay_minutes=None)
    real, copy = placed(admit_item)
    before = untouched()
    answer(ann, copy, approve=True, skip=(real,))
    answer(ben, copy, approve=False, skip=(real,))  # a disagreement: a third round, as for a real item
    assert state(copy) == ("pending", 3)
    assert untouched() == before
    answer(cat, copy, approve=True, skip=(real,))  # the tiebreak settles it
    assert state(copy) == ("gold", 3)
    assert untouched() == before
    assert [j.correct for j in Judgement.objects.filter(item_id=copy).order_by("round")] == [True, False, True]
    assert review_quality.gold_record(ben.pk) == (0, 1) and review_quality.gold_record(cat.pk) == (1, 1)
    assert Queue.current().gold_waiting == 0


def three_ways(admit_item: Callable[..., Any], team: list[Any]) -> tuple[int, int]:
    """A real item and its copy, each answered three different ways (approve,
    reject, send back): both wait for an operator."""
    ann, ben, cat = team
    real, copy = placed(admit_item)
    for pk, skip in ((real, (copy,)), (copy, (real,))):
        answer(ann, pk, approve=True, skip=skip)
        answer(ben, pk, approve=False, skip=skip)
        assert services.claim(reviewer=cat, exclude=skip).pk == pk
        services.send_back(item_id=pk, reviewer=cat, note="another try")
        assert state(pk) == ("pending", OPERATOR_ROUND)
    return real, copy


def test_three_different_answers_on_a_copy_wait_for_an_operator_unseen_by_the_operators(
    admit_item: Callable[..., Any], gold: Callable[..., list[GoldItem]], team: list[Any], operator: Any
) -> None:
    ann = team[0]
    gold(escalation_delay_minutes=None)
    real, copy = three_ways(admit_item, team)
    assert Queue.current().gold_waiting == 1  # it still waits, counted, as the real item does
    assert all(services.claim(reviewer=r) is None for r in team)
    # The operators see the real disagreement, not the copy.
    assert agreement.double_review_counts()["awaiting_operator"] == 1
    client = Client()
    client.force_login(operator)
    page = client.get(reverse("ops:quality")).content.decode()
    assert f'id="disagreement-{real}"' in page and f'id="disagreement-{copy}"' not in page
    # An operator settles the real one: the copy is settled with it, by its expectation.
    services.settle(item_id=real, operator=operator, decision="approve")
    assert state(copy) == ("gold", OPERATOR_ROUND)
    assert Queue.current().gold_waiting == 0
    shown = copy_verdict(ReviewItem.all_objects.get(pk=copy))
    assert (shown.decision, shown.reviewer) == ("approve", operator)
    # What ann sees of each on its page: its status and a verdict by the operator.
    reader = Client()
    reader.force_login(ann)
    for pk in (real, copy):
        html = reader.get(reverse("review_item", args=[pk])).content.decode()
        assert "Approved" in html and f"by {operator.username}," in html, pk


@pytest.mark.parametrize("action", ["reject", "expire"])
def test_a_disagreement_an_operator_ends_in_bulk_takes_its_copy_with_it(
    admit_item: Callable[..., Any], gold: Callable[..., list[GoldItem]], team: list[Any], operator: Any, action: str
) -> None:
    gold(escalation_delay_minutes=None)
    _real, copy = three_ways(admit_item, team)
    assert Queue.current().gold_waiting == 1
    filters = ItemFilter(status="pending")
    seen = bulk.bulk_count(filters=filters, action=action)
    assert seen == 1  # the real disagreement; the copy is never in an operator's list
    options = {"reason_label": "unclear"} if action == "reject" else {}
    bulk.bulk_apply(operator=operator, filters=filters, action=action, seen=seen, **options)
    assert state(copy) == ("gold", OPERATOR_ROUND)
    assert Queue.current().waiting == 0


def test_each_answer_on_a_copy_is_undone_as_on_a_real_item(
    admit_item: Callable[..., Any], gold: Callable[..., list[GoldItem]], team: list[Any]
) -> None:
    ann, ben, cat = team
    gold(escalation_delay_minutes=None)
    real, copy = placed(admit_item)
    skip = (real,)
    answer(ann, copy, approve=True, skip=skip)
    assert waiting() == 2
    item = services.undo(reviewer=ann)  # an answer that settled nothing, while nobody took it
    assert (item.pk, item.status, item.review_round, item.lease_holder) == (copy, "claimed", 1, ann)
    assert not Judgement.objects.filter(item_id=copy).exists() and waiting() == 2
    services.decide(item_id=copy, reviewer=ann, approve=True)
    assert services.claim(reviewer=ben, exclude=skip).pk == copy
    with pytest.raises(services.UndoRefused, match="another reviewer"):
        services.undo(reviewer=ann)  # ben holds it now
    services.decide(item_id=copy, reviewer=ben, approve=True)  # agreement: it is settled
    assert state(copy) == ("gold", 2) and waiting() == 1
    with pytest.raises(services.UndoRefused, match=r"^item #\d+ has been settled since, so your answer stands$"):
        services.undo(reviewer=ann)
    item = services.undo(reviewer=ben)  # the settling answer: the round opens again
    assert (item.status, item.review_round, item.lease_holder) == ("claimed", 2, ben)
    assert waiting() == 2 and review_quality.gold_record(ben.pk) == (0, 0)
    services.decide(item_id=copy, reviewer=ben, approve=False, reason_label="unclear")
    assert state(copy) == ("pending", 3) and waiting() == 2
    answer(cat, copy, approve=False, skip=skip)
    assert state(copy) == ("gold", 3) and waiting() == 1
    item = services.undo(reviewer=cat)
    assert (item.status, item.review_round) == ("claimed", 3) and waiting() == 2


def test_a_copy_in_a_later_round_is_skipped_abandoned_and_given_back_like_a_real_item(
    admit_item: Callable[..., Any], gold: Callable[..., list[GoldItem]], team: list[Any]
) -> None:
    ann, ben, cat = team
    gold()
    queue = services.create_queue(user=None, slug="docs", settings={"double_review_rate": 1.0, "gold_rate": 1.0})
    services.set_reviewers(queue=queue, user=None, open_to_all=False, members=team, groups=[])
    source = GoldItem.objects.first().item
    ReviewItem.objects.filter(pk=source.pk).update(queue=queue)  # the gold item belongs to the queue
    review_quality.forget_gold_settings()
    real, copy = placed(lambda: admit_item(queue="docs"))
    skip = (real,)
    answer(ann, copy, approve=True, skip=skip)
    assert services.claim(reviewer=ben, exclude=skip).pk == copy
    services.release(item_id=copy, reviewer=ben)  # skipped
    assert state(copy) == ("pending", 2)
    later = timezone.now() + timedelta(hours=1)
    assert services.claim(reviewer=ben, exclude=skip, now=later).pk == copy
    services.expire_leases(now=later + timedelta(hours=1))  # abandoned
    assert state(copy) == ("pending", 2)
    assert services.claim(reviewer=cat, exclude=skip).pk == copy
    services.set_reviewers(queue=queue, user=None, open_to_all=False, members=[ann, ben], groups=[])  # cat leaves
    assert state(copy) == ("pending", 2)
    assert services.claim(reviewer=ann, exclude=skip) is None  # still never its first reviewer
    answer(ben, copy, approve=True, skip=skip)
    assert state(copy) == ("gold", 2)
    assert Queue.objects.get(slug="docs").gold_waiting == 0


def test_a_copy_is_not_sent_for_a_second_review_when_it_would_show_nobody_anything_new(
    admit_item: Callable[..., Any], gold: Callable[..., list[GoldItem]], make_user: Callable[..., Any], operator: Any
) -> None:
    ann, ben = make_user("ann", "reviewer"), make_user("ben", "reviewer")
    _, other = gold(count=2)
    services.retire_gold(gold_id=other.pk, operator=operator)  # one gold item: every copy shows it
    real, copy = placed(admit_item)
    answer(ben, copy, approve=True, skip=(real,))
    answer(ann, copy, approve=True, skip=(real,))  # both have seen it now
    real2, copy2 = placed(admit_item)
    # A real item would wait for the other reviewer; nobody could be shown this copy anything new.
    assert not review_quality.wants_second_review(ReviewItem.all_objects.get(pk=copy2), ann, 1.0)
    assert review_quality.wants_second_review(ReviewItem.objects.get(pk=real2), ann, 1.0)


def test_a_gold_item_a_copy_keeps_for_its_next_round_is_not_shown_in_another_copy(
    admit_item: Callable[..., Any], gold: Callable[..., list[GoldItem]], team: list[Any]
) -> None:
    ann, ben, _ = team
    golds = gold(count=2)
    real, copy = placed(admit_item)
    answer(ann, copy, approve=True, skip=(real,))
    kept = ReviewItem.all_objects.get(pk=copy).gold_id
    real2, copy2 = placed(admit_item)
    held = services.claim(reviewer=ben, exclude=(real, real2, copy))
    assert held.pk == copy2
    assert held.gold_id != kept and held.gold_id in {g.pk for g in golds}
    assert services.claim(reviewer=ben, exclude=(real, real2)).pk == copy2  # the one held


def test_a_copy_waiting_for_its_third_reviewer_goes_to_the_operators_after_the_delay(
    admit_item: Callable[..., Any], gold: Callable[..., list[GoldItem]], team: list[Any]
) -> None:
    ann, ben, _ = team
    gold(escalation_delay_minutes=30)
    real, copy = placed(admit_item)
    start = timezone.now()
    answer(ann, copy, approve=True, skip=(real,), now=start)
    answer(ben, copy, approve=False, skip=(real,), now=start)
    assert state(copy) == ("pending", 3)
    assert review_quality.escalate_overdue(now=start + timedelta(minutes=20)) == 0
    assert review_quality.escalate_overdue(now=start + timedelta(minutes=31)) == 1
    assert state(copy) == ("pending", OPERATOR_ROUND) and Queue.current().gold_waiting == 1


def test_copies_waiting_for_an_operator_leave_with_the_settlements_in_order_of_arrival(
    admit_item: Callable[..., Any], gold: Callable[..., list[GoldItem]], make_user: Callable[..., Any], operator: Any
) -> None:
    ann, ben = make_user("ann", "reviewer"), make_user("ben", "reviewer")
    gold(count=3, escalation_delay_minutes=None)  # two reviewers: a disagreement goes to the operators at once
    pairs = [placed(admit_item) for _ in range(3)]
    for real, copy in pairs:
        for pk in (real, copy):
            others = [p for pair in pairs for p in pair if p != pk]
            answer(ann, pk, approve=True, skip=tuple(others))
            answer(ben, pk, approve=False, skip=tuple(others))
            assert state(pk) == ("pending", OPERATOR_ROUND)
    assert Queue.current().gold_waiting == 3
    (first, c1), (second, c2), (third, c3) = pairs
    services.settle(item_id=second, operator=operator, decision="approve")  # the copies that came before it go
    assert [state(c)[0] for c in (c1, c2, c3)] == ["gold", "gold", "pending"]
    services.settle(item_id=first, operator=operator, decision="approve")  # none came before: the oldest goes
    assert state(c3)[0] == "gold" and Queue.current().gold_waiting == 0
    services.settle(item_id=third, operator=operator, decision="reject", reason_label="unclear")
    assert Queue.current().gold_waiting == 0
