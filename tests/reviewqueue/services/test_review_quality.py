"""Double review, gold items, reviewers' standing and the noise-aware tuner,
through the services (ARCHITECTURE.md rule 11)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from reviewqueue import policy, services
from reviewqueue.models import (
    GoldItem,
    Judgement,
    LabelCount,
    Queue,
    ReviewerStanding,
    ReviewItem,
    StepLimitChange,
    Verdict,
    WebhookDelivery,
)
from reviewqueue.services import review_quality

pytestmark = [pytest.mark.double_review, pytest.mark.django_db]

CALLBACK = "http://127.0.0.1:9/hook"


@pytest.fixture(autouse=True)
def _loopback_callbacks(settings: Any) -> None:
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    review_quality.forget_gold_settings()


@pytest.fixture
def team(make_user: Callable[..., Any]) -> list[Any]:
    return [make_user(name, "reviewer") for name in ("ann", "ben", "cat")]


def double_reviewed(admit_item: Callable[..., Any], small_queue: Callable[..., Any], **policy_fields: Any) -> int:
    small_queue(capacity=50, double_review_rate=1.0, gold_rate=0, **policy_fields)
    return admit_item(callback_url=CALLBACK).item.pk


def answer(reviewer: Any, item_id: int, approve: bool, label: str = "unclear", note: str = "") -> Verdict:
    item = services.claim(reviewer=reviewer)
    assert item is not None and item.pk == item_id
    return services.decide(item_id=item_id, reviewer=reviewer, approve=approve, reason_label=label, note=note)


def events(item_id: int) -> list[str]:
    return list(WebhookDelivery.objects.filter(item_id=item_id).values_list("event_type", flat=True))


# --- double review -----------------------------------------------------------------------


def test_a_first_answer_waits_for_a_second_reviewer_and_tells_no_one(
    admit_item: Callable[..., Any], small_queue: Callable[..., Any], team: list[Any]
) -> None:
    item_id = double_reviewed(admit_item, small_queue)
    ann, ben, _ = team
    said = answer(ann, item_id, approve=False, label="logic_error", note="ann's secret reasoning")
    assert said.pk is None  # recorded as ann's answer, not as the item's verdict
    item = ReviewItem.objects.get(pk=item_id)
    assert (item.status, item.review_round, item.lease_holder_id) == ("pending", 2, None)
    assert not Verdict.objects.filter(item_id=item_id).exists()
    assert events(item_id) == []  # no webhook until it is settled
    assert Queue.current().depth == 1  # still waiting
    assert LabelCount.objects.count() == 0
    assert services.claim(reviewer=ann) is None  # never the same reviewer twice
    assert services.claim(reviewer=ben).pk == item_id


def test_two_answers_that_agree_settle_the_item_with_one_event(
    admit_item: Callable[..., Any], small_queue: Callable[..., Any], team: list[Any]
) -> None:
    item_id = double_reviewed(admit_item, small_queue)
    ann, ben, _ = team
    answer(ann, item_id, approve=False, label="logic_error")
    verdict = answer(ben, item_id, approve=False, label="code_error")
    assert verdict.pk is not None and verdict.settled_by == "agreement" and verdict.reviewer == ben
    assert verdict.reason_label == "code_error"  # the settling answer's
    assert ReviewItem.objects.get(pk=item_id).status == "rejected"
    assert events(item_id) == ["item.decided"]
    assert Queue.current().depth == 0
    assert dict(LabelCount.objects.values_list("label", "count")) == {"code_error": 1}


def test_a_disagreement_goes_to_a_third_reviewer_who_breaks_the_tie(
    admit_item: Callable[..., Any], small_queue: Callable[..., Any], team: list[Any]
) -> None:
    item_id = double_reviewed(admit_item, small_queue)
    ann, ben, cat = team
    answer(ann, item_id, approve=True)
    answer(ben, item_id, approve=False, label="hallucination")
    item = ReviewItem.objects.get(pk=item_id)
    assert (item.status, item.review_round) == ("pending", 3)
    assert services.claim(reviewer=ann) is None and services.claim(reviewer=ben) is None
    verdict = answer(cat, item_id, approve=True)
    assert (verdict.settled_by, verdict.decision, verdict.reviewer) == ("tiebreak", "approve", cat)
    assert events(item_id) == ["item.decided"]
    assert list(Judgement.objects.filter(item_id=item_id).order_by("round").values_list("round", flat=True)) == [
        1,
        2,
        3,
    ]


def test_three_different_answers_wait_for_an_operator_who_settles(
    admit_item: Callable[..., Any],
    small_queue: Callable[..., Any],
    team: list[Any],
    operator: Any,
    make_user: Callable[..., Any],
) -> None:
    item_id = double_reviewed(admit_item, small_queue)
    ann, ben, cat = team
    answer(ann, item_id, approve=True)
    answer(ben, item_id, approve=False, label="hallucination")
    claimed = services.claim(reviewer=cat)
    services.send_back(item_id=claimed.pk, reviewer=cat, note="try again, shorter")
    item = ReviewItem.objects.get(pk=item_id)
    assert (item.status, item.review_round) == ("pending", 4)
    assert all(services.claim(reviewer=r) is None for r in team)  # only an operator settles it now
    assert services.claim(reviewer=make_user("dan", "reviewer")) is None  # not a fourth reviewer either
    with pytest.raises(services.InvalidInput):
        services.settle(item_id=item_id, operator=operator, decision="reject")  # a rejection needs a label
    verdict = services.settle(item_id=item_id, operator=operator, decision="reject", reason_label="hallucination")
    assert (verdict.settled_by, verdict.reviewer) == ("operator", operator)
    assert events(item_id) == ["item.decided"]
    with pytest.raises(services.AlreadyDecided):
        services.settle(item_id=item_id, operator=operator, decision="approve")


def test_an_operator_cannot_settle_an_item_no_double_review_holds(
    admit_item: Callable[..., Any], operator: Any
) -> None:
    item_id = admit_item().item.pk
    with pytest.raises(services.QueueError, match="not waiting for a double review"):
        services.settle(item_id=item_id, operator=operator, decision="approve")


def test_only_the_settled_verdict_tunes_the_step_limit(
    admit_item: Callable[..., Any], small_queue: Callable[..., Any], team: list[Any]
) -> None:
    item_id = double_reviewed(admit_item, small_queue, tuner_window=1, step_limit=5, approve_low=0.4)
    ann, ben, _ = team
    answer(ann, item_id, approve=False)
    assert Queue.current().step_limit == 5 and not StepLimitChange.objects.exists()
    answer(ben, item_id, approve=False)
    assert Queue.current().step_limit == 4


def test_no_second_review_without_another_reviewer(
    admit_item: Callable[..., Any], small_queue: Callable[..., Any], reviewer: Any
) -> None:
    item_id = double_reviewed(admit_item, small_queue)  # rita is the only reviewer
    verdict = answer(reviewer, item_id, approve=True)
    assert verdict.pk is not None and verdict.settled_by == "reviewer"


def test_the_share_of_double_reviewed_items_follows_the_rate() -> None:
    chosen = sum(policy.selected_for_double_review(i, 0.1) for i in range(20_000))
    assert 1_800 < chosen < 2_200
    assert policy.selected_for_double_review(7, 0.1) == policy.selected_for_double_review(7, 0.1)
    assert not any(policy.selected_for_double_review(i, 0.0) for i in range(1000))
    assert all(policy.selected_for_double_review(i, 1.0) for i in range(1000))


def test_a_first_answer_is_undone_until_someone_else_takes_the_item(
    admit_item: Callable[..., Any], small_queue: Callable[..., Any], team: list[Any]
) -> None:
    item_id = double_reviewed(admit_item, small_queue)
    ann, ben, _ = team
    answer(ann, item_id, approve=True)
    item = services.undo(reviewer=ann)
    assert (item.pk, item.status, item.lease_holder_id, item.review_round) == (item_id, "claimed", ann.pk, 1)
    assert not Judgement.objects.exists()
    services.decide(item_id=item_id, reviewer=ann, approve=True)
    services.claim(reviewer=ben)
    with pytest.raises(services.UndoRefused, match="another reviewer"):
        services.undo(reviewer=ann)


def test_undoing_the_settling_answer_reopens_the_round(
    admit_item: Callable[..., Any], small_queue: Callable[..., Any], team: list[Any]
) -> None:
    item_id = double_reviewed(admit_item, small_queue)
    ann, ben, _ = team
    answer(ann, item_id, approve=True)
    answer(ben, item_id, approve=True)
    item = services.undo(reviewer=ben)
    assert (item.status, item.lease_holder_id, item.review_round) == ("claimed", ben.pk, 2)
    assert list(Judgement.objects.values_list("reviewer__username", flat=True)) == ["ann"]
    assert Queue.current().depth == 1
    verdict = services.decide(item_id=item_id, reviewer=ben, approve=False, reason_label="unclear")
    assert verdict.pk is None and ReviewItem.objects.get(pk=item_id).review_round == 3


# --- gold items --------------------------------------------------------------------------


def decided_item(admit_item: Callable[..., Any], by: Any, approve: bool) -> int:
    item_id = admit_item(callback_url=CALLBACK).item.pk
    answer(by, item_id, approve=approve, label="code_error")
    return item_id


@pytest.fixture
def gold_queue(small_queue: Callable[..., Any]) -> Callable[..., Any]:
    def make(**fields: Any) -> Any:
        return small_queue(**{"capacity": 50, "double_review_rate": 0, "gold_rate": 1.0, **fields})

    return make


@pytest.fixture
def gold_decided_by(
    admit_item: Callable[..., Any], gold_queue: Callable[..., Any], operator: Any
) -> Callable[..., GoldItem]:
    """Gold items decided (approved) by one reviewer, then a copy placed beside every real item (gold rate 1)."""

    def make(reviewer: Any, count: int = 1, **policy_fields: Any) -> GoldItem:
        gold_queue(**{**policy_fields, "gold_rate": 0})  # no copies served while the sources are decided
        for _ in range(count):
            source = decided_item(admit_item, reviewer, approve=True)
            gold = services.mark_gold(item_id=source, operator=operator, expected_decision="approve")
        services.policy_update(user=None, changes={"gold_rate": 1.0})
        return gold

    return make


def test_a_gold_copy_looks_like_its_item_and_its_answer_reaches_no_one(
    admit_item: Callable[..., Any], gold_queue: Callable[..., Any], team: list[Any], operator: Any
) -> None:
    ann, ben, _ = team
    gold_queue(gold_rate=0, tuner_window=1, step_limit=5)
    source = decided_item(admit_item, ann, approve=False)
    gold = services.mark_gold(
        item_id=source, operator=operator, expected_decision="reject", expected_label="code_error"
    )
    services.policy_update(user=None, changes={"gold_rate": 1.0})
    real = admit_item().item.pk  # a copy is placed beside it
    assert Queue.current().gold_waiting == 1
    before = {
        "events": WebhookDelivery.objects.count(),
        "verdicts": Verdict.objects.count(),
        "labels": dict(LabelCount.objects.values_list("label", "count")),
        "depth": Queue.current().depth,
        "changes": StepLimitChange.objects.count(),
        "step": Queue.current().step_limit,
    }
    copy = services.claim(reviewer=ben, exclude=[real])
    src = ReviewItem.objects.get(pk=source)
    assert copy.gold_id == gold.pk and copy.pk != source
    assert (copy.task_description, copy.final_output, copy.cutoff_reason) == (
        src.task_description,
        src.final_output,
        src.cutoff_reason,
    )
    assert copy.callback_url == "" and copy.source_run_id == "" and copy.previous_version_id is None
    assert not ReviewItem.objects.filter(pk=copy.pk).exists()  # invisible to every count and list
    said = services.decide(item_id=copy.pk, reviewer=ben, approve=False, reason_label="code_error")
    assert said.pk is None
    after = {
        "events": WebhookDelivery.objects.count(),
        "verdicts": Verdict.objects.count(),
        "labels": dict(LabelCount.objects.values_list("label", "count")),
        "depth": Queue.current().depth,
        "changes": StepLimitChange.objects.count(),
        "step": Queue.current().step_limit,
    }
    assert after == before
    assert Queue.current().gold_waiting == 0  # it left the waiting count reviewers see, as a real item does
    judgement = Judgement.objects.get(item=copy.pk)
    assert (judgement.kind, judgement.correct, judgement.label_correct) == ("gold", True, True)
    with pytest.raises(services.AlreadyDecided):
        services.decide(item_id=copy.pk, reviewer=ben, approve=True)


def test_a_copy_is_placed_beside_a_real_item_and_never_served_to_its_decider_or_twice(
    admit_item: Callable[..., Any], gold_decided_by: Callable[..., GoldItem], team: list[Any]
) -> None:
    ann, ben, _ = team
    gold_decided_by(ann)
    assert services.claim(reviewer=ben) is None  # nothing real arrived: no copy either
    real = admit_item().item
    copy = ReviewItem.all_objects.get(gold__isnull=False, status="pending")
    # Its neighbour's place: the next id, the same arrival, priority and draft tag.
    assert copy.pk == real.pk + 1
    assert (copy.created_at, copy.priority, copy.draft) == (real.created_at, real.priority, real.draft)
    assert Queue.current().waiting == Queue.current().depth + 1
    assert services.claim(reviewer=ann).pk == real.pk  # served in queue order
    services.release(item_id=real.pk, reviewer=ann)
    assert services.claim(reviewer=ann, exclude=[real.pk]) is None  # ann decided the source: not hers
    assert ReviewItem.all_objects.get(pk=copy.pk).status == "pending"  # it waits for the next reviewer
    served = services.claim(reviewer=ben, exclude=[real.pk])
    assert served.pk == copy.pk and served.gold_id is not None
    services.decide(item_id=copy.pk, reviewer=ben, approve=True)
    second = admit_item().item.pk  # another real item, another copy of the one gold item
    assert services.claim(reviewer=ben, exclude=[real.pk, second]) is None  # answered once: not again


def test_a_skipped_or_abandoned_copy_waits_again_like_a_real_item(
    admit_item: Callable[..., Any], gold_decided_by: Callable[..., GoldItem], team: list[Any]
) -> None:
    ann, ben, cat = team
    gold_decided_by(ann)
    real = admit_item().item.pk
    copy = services.claim(reviewer=ben, exclude=[real])
    assert copy.gold_id is not None
    services.release(item_id=copy.pk, reviewer=ben)
    assert ReviewItem.all_objects.get(pk=copy.pk).status == "pending"
    assert Queue.current().gold_waiting == 1
    assert services.claim(reviewer=cat, exclude=[real]).pk == copy.pk
    later = timezone.now() + timedelta(hours=1)
    services.expire_leases(now=later)
    assert ReviewItem.all_objects.get(pk=copy.pk).status == "pending"
    assert not ReviewItem.objects.filter(pk=copy.pk).exists()  # still in no count or list but the waiting one
    assert services.claim(reviewer=cat, exclude=[real], now=later).pk == copy.pk


def test_a_copy_whose_gold_was_retired_leaves_the_queue_when_claimed(
    admit_item: Callable[..., Any], gold_decided_by: Callable[..., GoldItem], team: list[Any], operator: Any
) -> None:
    ann, ben, _ = team
    gold = gold_decided_by(ann)
    real = admit_item().item.pk
    services.retire_gold(gold_id=gold.pk, operator=operator)
    assert services.claim(reviewer=ben, exclude=[real]) is None
    assert not ReviewItem.all_objects.filter(gold__isnull=False, status__in=ReviewItem.WAITING).exists()
    assert Queue.current().gold_waiting == 0


def test_a_reviewer_below_the_bar_on_gold_is_flagged_paused_and_reinstated(
    admit_item: Callable[..., Any], gold_decided_by: Callable[..., GoldItem], team: list[Any], operator: Any
) -> None:
    ann, ben, _ = team
    gold_decided_by(ann, count=4, gold_min_accuracy=0.7, gold_min_answers=3, gold_pause=True)
    reals = [admit_item().item.pk for _ in range(3)]  # a copy beside each
    for n in range(3):  # ben rejects what is right
        copy = services.claim(reviewer=ben, exclude=reals)
        assert copy.gold_id is not None, n
        services.decide(item_id=copy.pk, reviewer=ben, approve=False, reason_label="unclear")
    standing = ReviewerStanding.objects.get(reviewer=ben)
    assert standing.flagged_at is not None and standing.paused_at is not None
    assert services.claim(reviewer=ben) is None  # paused: nothing is served
    assert services.is_paused(ben)
    services.reinstate(reviewer_id=ben.pk, operator=operator)
    assert services.claim(reviewer=ben) is not None
    assert ReviewerStanding.objects.get(reviewer=ben).flagged_at is None


def test_gold_marks_only_decided_items(admit_item: Callable[..., Any], operator: Any) -> None:
    waiting = admit_item().item.pk
    with pytest.raises(services.InvalidInput, match="only an item a person decided"):
        services.mark_gold(item_id=waiting, operator=operator, expected_decision="approve")
    with pytest.raises(services.InvalidInput):
        services.mark_gold(item_id=waiting, operator=operator, expected_decision="maybe")


def test_retired_gold_is_not_served(
    admit_item: Callable[..., Any], gold_decided_by: Callable[..., GoldItem], team: list[Any], operator: Any
) -> None:
    ann, ben, _ = team
    gold = gold_decided_by(ann)
    services.retire_gold(gold_id=gold.pk, operator=operator)
    admit_item()
    assert services.claim(reviewer=ben).gold_id is None
    assert GoldItem.objects.get(pk=gold.pk).retired_at is not None


# --- reliability and the noise-aware tuner -----------------------------------------------


def gold_answers(reviewer: Any, right: int, wrong: int, source: ReviewItem, gold: GoldItem) -> None:
    """Gold answers written as the service writes them, without serving copies one by one."""
    for n in range(right + wrong):
        copy = ReviewItem.all_objects.create(
            task_description=source.task_description,
            cutoff_reason=source.cutoff_reason,
            idempotency_key=f"gold-copy-{reviewer.pk}-{n}",
            gold=gold,
            status=ReviewItem.Status.GOLD,
        )
        Judgement.objects.create(
            item=copy, reviewer=reviewer, kind="gold", decision="approve" if n < right else "reject", correct=n < right
        )


def test_reestimate_finds_the_unreliable_reviewer(
    admit_item: Callable[..., Any], small_queue: Callable[..., Any], team: list[Any], operator: Any
) -> None:
    ann, ben, _ = team
    small_queue(capacity=50, double_review_rate=0)  # the source item is decided by ann alone
    source_id = decided_item(admit_item, ann, approve=True)
    gold = services.mark_gold(item_id=source_id, operator=operator, expected_decision="approve")
    source = ReviewItem.objects.get(pk=source_id)
    gold_answers(ann, right=30, wrong=0, source=source, gold=gold)
    gold_answers(ben, right=17, wrong=13, source=source, gold=gold)
    estimate = services.reestimate()
    assert estimate.error(ann.pk) < 0.1
    assert estimate.error(ben.pk) > 0.3
    stored = Queue.current().reliability
    assert float(stored["errors"][str(ben.pk)]) == pytest.approx(estimate.error(ben.pk), abs=1e-5)


@pytest.mark.parametrize(("rule", "expected_limit"), [("plain", 4), ("noise_aware", 5)])
def test_the_noise_aware_tuner_discounts_a_coin_flipping_reviewer(
    admit_item: Callable[..., Any],
    small_queue: Callable[..., Any],
    team: list[Any],
    rule: str,
    expected_limit: int,
) -> None:
    ann, ben, _ = team
    small_queue(capacity=50, double_review_rate=0, gold_rate=0, tuner_window=4, step_limit=5, tuner_rule=rule)
    Queue.objects.filter(pk=Queue.default().pk).update(
        reliability={"errors": {str(ben.pk): 0.45, str(ann.pk): 0.01}, "default_error": 0.1, "approve_share": 0.6}
    )
    for _ in range(4):
        item_id = admit_item().item.pk
        answer(ben, item_id, approve=False)
    queue = Queue.current()
    assert queue.step_limit == expected_limit
    if rule == "noise_aware":
        assert 4.5 <= queue.expected_step_limit < 5  # moved a little: ben's rejections say little


def test_the_noise_aware_tuner_follows_a_reliable_reviewer(
    admit_item: Callable[..., Any], small_queue: Callable[..., Any], team: list[Any]
) -> None:
    ann, _, _ = team
    small_queue(capacity=50, double_review_rate=0, gold_rate=0, tuner_window=4, step_limit=5, tuner_rule="noise_aware")
    Queue.objects.filter(pk=Queue.default().pk).update(
        reliability={"errors": {str(ann.pk): 0.01}, "default_error": 0.1, "approve_share": 0.6}
    )
    for _ in range(4):
        answer(ann, admit_item().item.pk, approve=False)
    queue = Queue.current()
    assert queue.step_limit == 4 and queue.expected_step_limit < 4.1
    change = StepLimitChange.objects.get()
    assert (change.previous, change.step_limit) == (5, 4)
    item = services.undo(reviewer=ann)  # the verdict that moved it: the limit moves back
    assert item.status == "claimed" and Queue.current().step_limit == 5


def test_a_disagreement_no_third_reviewer_could_take_goes_to_the_operators_at_once(
    admit_item: Callable[..., Any], small_queue: Callable[..., Any], make_user: Callable[..., Any]
) -> None:
    from reviewqueue.models import OPERATOR_ROUND

    ann, ben = make_user("ann", "reviewer"), make_user("ben", "reviewer")
    item_id = double_reviewed(admit_item, small_queue)
    answer(ann, item_id, approve=True)
    answer(ben, item_id, approve=False, label="logic_error")
    item = ReviewItem.objects.get(pk=item_id)
    assert (item.status, item.review_round) == ("pending", OPERATOR_ROUND)
    assert services.claim(reviewer=ann) is None and services.claim(reviewer=ben) is None
    assert not Verdict.objects.filter(item_id=item_id).exists()


def test_a_disagreement_waits_for_a_third_reviewer_when_one_exists(
    admit_item: Callable[..., Any], small_queue: Callable[..., Any], team: list[Any]
) -> None:
    ann, ben, cat = team
    item_id = double_reviewed(admit_item, small_queue)
    answer(ann, item_id, approve=True)
    answer(ben, item_id, approve=False, label="logic_error")
    assert ReviewItem.objects.get(pk=item_id).review_round == 3
    assert services.claim(reviewer=cat).pk == item_id


def answer_at(reviewer: Any, item_id: int, approve: bool, now: Any) -> None:
    item = services.claim(reviewer=reviewer, now=now)
    assert item is not None and item.pk == item_id
    services.decide(item_id=item_id, reviewer=reviewer, approve=approve, reason_label="unclear", now=now)


def test_a_disagreement_goes_to_the_operators_once_its_delay_has_passed(
    admit_item: Callable[..., Any], small_queue: Callable[..., Any], team: list[Any]
) -> None:
    from reviewqueue.models import OPERATOR_ROUND

    ann, ben, cat = team
    item_id = double_reviewed(admit_item, small_queue, escalation_delay_minutes=30)
    start = timezone.now()
    answer_at(ann, item_id, approve=True, now=start)
    answer_at(ben, item_id, approve=False, now=start + timedelta(minutes=5))
    assert ReviewItem.objects.get(pk=item_id).review_round == 3
    # The delay runs from the answer that disagreed, not from the first one.
    assert review_quality.escalate_overdue(now=start + timedelta(minutes=34)) == 0
    assert ReviewItem.objects.get(pk=item_id).review_round == 3
    assert review_quality.escalate_overdue(now=start + timedelta(minutes=36)) == 1
    item = ReviewItem.objects.get(pk=item_id)
    assert (item.status, item.review_round) == ("pending", OPERATOR_ROUND)
    assert Queue.current().depth == 1  # still waiting, now for an operator
    assert services.claim(reviewer=cat, now=start + timedelta(minutes=37)) is None
    assert review_quality.escalate_overdue(now=start + timedelta(minutes=40)) == 0  # safe to repeat


def test_a_third_reviewer_holding_the_item_keeps_it_past_the_delay_until_the_lease_runs_out(
    admit_item: Callable[..., Any], small_queue: Callable[..., Any], team: list[Any]
) -> None:
    from reviewqueue.models import OPERATOR_ROUND

    ann, ben, cat = team
    item_id = double_reviewed(admit_item, small_queue, escalation_delay_minutes=10, lease_seconds=600)
    start = timezone.now()
    answer_at(ann, item_id, approve=True, now=start)
    answer_at(ben, item_id, approve=False, now=start)
    assert services.claim(reviewer=cat, now=start + timedelta(minutes=9)).pk == item_id
    assert review_quality.escalate_overdue(now=start + timedelta(minutes=15)) == 0
    assert review_quality.escalate_overdue(now=start + timedelta(minutes=20)) == 1
    item = ReviewItem.objects.get(pk=item_id)
    assert (item.status, item.review_round, item.lease_holder_id) == ("pending", OPERATOR_ROUND, None)


def test_a_blank_delay_waits_for_a_third_reviewer_and_zero_escalates_at_once(
    admit_item: Callable[..., Any], small_queue: Callable[..., Any], team: list[Any]
) -> None:
    from reviewqueue.models import OPERATOR_ROUND

    ann, ben, _ = team
    item_id = double_reviewed(admit_item, small_queue, escalation_delay_minutes=None)
    start = timezone.now()
    answer_at(ann, item_id, approve=True, now=start)
    answer_at(ben, item_id, approve=False, now=start)
    assert review_quality.escalate_overdue(now=start + timedelta(days=30)) == 0
    assert ReviewItem.objects.get(pk=item_id).review_round == 3

    services.policy_update(user=None, changes={"escalation_delay_minutes": 0})
    other = admit_item(callback_url=CALLBACK).item.pk
    answer_at(ann, other, approve=True, now=start)
    answer_at(ben, other, approve=False, now=start)
    assert ReviewItem.objects.get(pk=other).review_round == OPERATOR_ROUND


def test_a_reviewer_outside_the_queue_is_no_third_reviewer(
    admit_item: Callable[..., Any], small_queue: Callable[..., Any], team: list[Any]
) -> None:
    from reviewqueue.models import OPERATOR_ROUND

    ann, ben, _cat = team
    queue = services.create_queue(user=None, slug="docs", settings={"double_review_rate": 1.0, "gold_rate": 0})
    services.set_reviewers(queue=queue, user=None, open_to_all=False, members=[ann, ben], groups=[])
    item_id = admit_item(queue="docs").item.pk
    answer(ann, item_id, approve=True)
    answer(ben, item_id, approve=False)
    # cat reviews other queues, not this one: nobody could take a third round.
    assert ReviewItem.objects.get(pk=item_id).review_round == OPERATOR_ROUND


def test_the_escalation_delay_is_validated_and_audited(small_queue: Callable[..., Any], operator: Any) -> None:
    from django.core.exceptions import ValidationError

    from reviewqueue.models import PolicyAudit

    with pytest.raises(ValidationError) as caught:
        services.policy_update(user=operator, changes={"escalation_delay_minutes": -1})
    assert "escalation_delay_minutes" in caught.value.message_dict
    services.policy_update(user=operator, changes={"escalation_delay_minutes": 15})
    audit = PolicyAudit.objects.filter(user=operator).latest("pk")
    assert audit.changes == {"escalation_delay_minutes": [60.0, 15]}


def test_the_escalation_task_runs_twice_safely(
    admit_item: Callable[..., Any], small_queue: Callable[..., Any], team: list[Any]
) -> None:
    from reviewqueue.tasks import escalate_disagreements

    ann, ben, _ = team
    item_id = double_reviewed(admit_item, small_queue, escalation_delay_minutes=1)
    past = timezone.now() - timedelta(minutes=5)
    answer_at(ann, item_id, approve=True, now=past)
    answer_at(ben, item_id, approve=False, now=past)
    assert escalate_disagreements.apply().get() == 1
    assert escalate_disagreements.apply().get() == 0
