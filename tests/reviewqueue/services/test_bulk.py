"""Bulk actions by filter: each action on what the filter matches, the
count-changed refusal, leases left alone, the audit, the depth kept, and the
webhooks of the verdicts a rejection settles (due only once final)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from reviewqueue import services
from reviewqueue.finality import final_at
from reviewqueue.models import PolicyAudit, Queue, ReviewItem, Verdict, WebhookDelivery
from reviewqueue.selectors.items import ItemFilter
from reviewqueue.services import bulk

pytestmark = pytest.mark.django_db

HOOK = "http://127.0.0.1:9/hook"


def _apply(operator: Any, filters: ItemFilter, action: str, **options: Any) -> bulk.BulkResult:
    seen = bulk.bulk_count(filters=filters, action=action, target=options.get("target"))
    return bulk.bulk_apply(operator=operator, filters=filters, action=action, seen=seen, **options)


def test_reject_settles_each_item_as_an_operators_verdict_with_its_webhook(operator: Any, admit_item: Any) -> None:
    items = [admit_item(task_description="bad batch", callback_url=HOOK).item for _ in range(2)]
    admit_item(task_description="keep me")
    result = _apply(operator, ItemFilter(q="bad batch"), "reject", reason_label="format_issue")
    assert (result.matched, result.applied, result.skipped) == (2, 2, 0)
    for item in items:
        verdict = Verdict.objects.get(item=item)
        assert (verdict.decision, verdict.reason_label, verdict.settled_by) == ("reject", "format_issue", "operator")
        event = WebhookDelivery.objects.get(item=item)
        assert json.loads(event.body)["data"]["decision"] == "reject"
        assert event.next_attempt_at == final_at(verdict.created_at)  # told only once final
    assert Queue.default().depth == 1
    assert ReviewItem.objects.filter(status="pending").count() == 1


def test_a_changed_count_is_refused_and_changes_nothing(operator: Any, admit_item: Any) -> None:
    admit_item()
    with pytest.raises(bulk.CountChanged) as refused:
        bulk.bulk_apply(operator=operator, filters=ItemFilter(), action="expire", seen=2)
    assert (refused.value.seen, refused.value.count) == (2, 1)
    assert ReviewItem.objects.filter(status="shed").count() == 0
    assert not PolicyAudit.objects.exists()


def test_a_reviewer_deciding_between_the_count_and_the_confirmation_makes_it_refused(
    operator: Any, reviewer: Any, admit_item: Any
) -> None:
    items = [admit_item(task_description="nightly batch").item for _ in range(5)]
    seen = bulk.bulk_count(filters=ItemFilter(q="nightly"), action="reject")
    decided = services.claim(reviewer=reviewer)
    services.decide(item_id=decided.pk, reviewer=reviewer, approve=True)
    with pytest.raises(bulk.CountChanged) as refused:
        bulk.bulk_apply(
            operator=operator, filters=ItemFilter(q="nightly"), action="reject", seen=seen, reason_label="unclear"
        )
    assert (refused.value.seen, refused.value.count) == (5, 4)
    assert not PolicyAudit.objects.filter(changes__has_key="bulk reject").exists()
    assert list(Verdict.objects.filter(item__in=items).values_list("item_id", flat=True)) == [decided.pk]


def test_an_item_under_a_live_lease_is_left_to_its_reviewer(operator: Any, reviewer: Any, admit_item: Any) -> None:
    held = admit_item().item
    free = admit_item().item
    assert services.claim(reviewer=reviewer).pk == held.pk
    assert bulk.bulk_count(filters=ItemFilter(), action="expire") == 1
    _apply(operator, ItemFilter(), "expire")
    assert ReviewItem.objects.get(pk=held.pk).status == "claimed"
    assert ReviewItem.objects.get(pk=free.pk).status == "shed"


def test_an_expired_item_stays_shed_for_its_producer_whatever_is_requeued(operator: Any, admit_item: Any) -> None:
    # Its producer is told at once that the item was shed: nothing brings it
    # back to be decided later (what leaves is final).
    items = [admit_item(callback_url=HOOK).item for _ in range(3)]
    _apply(operator, ItemFilter(), "expire")
    assert Queue.default().depth == 0
    assert WebhookDelivery.objects.filter(event_type="item.shed").count() == 3
    assert bulk.bulk_count(filters=ItemFilter(), action="requeue") == 0
    assert _apply(operator, ItemFilter(), "requeue").applied == 0
    assert set(ReviewItem.objects.filter(pk__in=[i.pk for i in items]).values_list("status", flat=True)) == {"shed"}
    assert Queue.default().depth == 0
    assert WebhookDelivery.objects.exclude(event_type="item.shed").count() == 0


def test_a_reviewing_operators_undo_never_takes_back_their_bulk_rejection(operator: Any, admit_item: Any) -> None:
    # Operators review by default: their undo takes back their own last answer
    # on the review page, never one item of an audited bulk action.
    item = admit_item().item
    _apply(operator, ItemFilter(), "reject", reason_label="unclear")
    with pytest.raises(services.NothingToUndo):
        services.undo(reviewer=operator)
    assert Verdict.objects.get(item=item).decision == "reject"
    assert ReviewItem.objects.get(pk=item.pk).status == "rejected"


def test_requeue_takes_back_a_lapsed_lease(operator: Any, reviewer: Any, admit_item: Any) -> None:
    item = admit_item().item
    services.claim(reviewer=reviewer)
    ReviewItem.objects.filter(pk=item.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert _apply(operator, ItemFilter(), "requeue").applied == 1
    item.refresh_from_db()
    assert (item.status, item.lease_holder_id, item.lease_expiries) == ("pending", None, 1)
    assert Queue.default().depth == 1


def test_move_takes_items_to_another_queue_and_moves_the_depth(operator: Any, admit_item: Any) -> None:
    docs = services.create_queue(user=None, slug="docs", name="Docs")
    items = [admit_item().item for _ in range(2)]
    result = _apply(operator, ItemFilter(queue=Queue.default()), "move", target=docs)
    assert result.applied == 2
    assert set(ReviewItem.objects.filter(pk__in=[i.pk for i in items]).values_list("queue", flat=True)) == {docs.pk}
    assert (Queue.default().depth, Queue.objects.get(pk=docs.pk).depth) == (0, 2)
    assert bulk.bulk_count(filters=ItemFilter(), action="move", target=docs) == 0


def test_a_moved_item_decided_in_its_new_queue_before_the_move_ends_is_counted_once(
    operator: Any, reviewer: Any, admit_item: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reviewer decides the first moved item while the move goes on to
    the others: the new queue's depth counts exactly the moved items still
    waiting (it was one too many when the move added them all at its end)."""
    docs = services.create_queue(user=None, slug="docs", name="Docs")
    Queue.objects.filter(pk=docs.pk).update(open_to_all=True)
    items = [admit_item().item for _ in range(3)]
    real, done = bulk._apply_one, []

    def decide_the_first_moved_item_meanwhile(pk: int, *args: Any) -> bool:
        if len(done) == 1:
            moved = services.claim(reviewer=reviewer, queue="docs")
            assert moved is not None and moved.pk == done[0]
            services.decide(item_id=moved.pk, reviewer=reviewer, approve=True)
        done.append(pk)
        return real(pk, *args)

    monkeypatch.setattr(bulk, "_apply_one", decide_the_first_moved_item_meanwhile)
    assert _apply(operator, ItemFilter(queue=Queue.default()), "move", target=docs).applied == 3
    waiting = ReviewItem.objects.filter(pk__in=[i.pk for i in items], status="pending").count()
    assert (Queue.default().depth, Queue.objects.get(pk=docs.pk).depth, waiting) == (0, 2, 2)


def test_each_action_is_audited_with_who_what_filter_and_how_many(operator: Any, admit_item: Any) -> None:
    admit_item(producer="alpha")
    _apply(operator, ItemFilter(producer="alpha"), "reject", reason_label="unclear")
    audit = PolicyAudit.objects.get()
    assert audit.user == operator
    assert audit.changes["bulk reject"] == [
        {"filter": {"producer": "alpha"}},
        {"action": "reject", "matched": 1, "applied": 1, "reason_label": "unclear"},
    ]


def test_it_refuses_a_reject_without_a_label_and_a_move_without_a_queue(operator: Any) -> None:
    with pytest.raises(services.InvalidInput):
        bulk.bulk_apply(operator=operator, filters=ItemFilter(), action="reject", seen=0)
    with pytest.raises(services.InvalidInput):
        bulk.bulk_apply(operator=operator, filters=ItemFilter(), action="move", seen=0)
    with pytest.raises(services.InvalidInput):
        bulk.bulk_count(filters=ItemFilter(), action="delete")


def test_a_second_run_finds_nothing_left(operator: Any, admit_item: Any) -> None:
    admit_item()
    _apply(operator, ItemFilter(), "expire")
    assert _apply(operator, ItemFilter(), "expire").matched == 0
