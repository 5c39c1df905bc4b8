"""decide / undo and what verdicts feed back (the step-limit tuner, label
counts, proposed filter rules, the queue's mode), called directly."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from reviewqueue import services
from reviewqueue.models import FilterRule, LabelCount, Queue, ReviewItem, StepLimitChange, Verdict

pytestmark = pytest.mark.django_db


# --- decide --------------------------------------------------------------------------------


def test_it_records_an_approval(claimed: ReviewItem, reviewer: Any) -> None:
    verdict = services.decide(item_id=claimed.pk, reviewer=reviewer, approve=True)
    claimed.refresh_from_db()
    assert verdict.approved and claimed.status == ReviewItem.Status.APPROVED and claimed.decided_at


def test_it_decides_only_once(claimed: ReviewItem, reviewer: Any) -> None:
    services.decide(item_id=claimed.pk, reviewer=reviewer, approve=False, reason_label="logic_error")
    with pytest.raises(services.AlreadyDecided):
        services.decide(item_id=claimed.pk, reviewer=reviewer, approve=True)
    assert Verdict.objects.get().decision == "reject"


def test_it_refuses_a_verdict_from_a_non_holder(claimed: ReviewItem, make_user: Any) -> None:
    with pytest.raises(services.NotLeaseHolder):
        services.decide(item_id=claimed.pk, reviewer=make_user("olga", "reviewer"), approve=True)


def test_it_requires_a_known_label_to_reject(claimed: ReviewItem, reviewer: Any) -> None:
    for label in ("", "meh"):
        with pytest.raises(services.InvalidInput) as err:
            services.decide(item_id=claimed.pk, reviewer=reviewer, approve=False, reason_label=label)
        assert err.value.field == "reason_label"
    claimed.refresh_from_db()
    assert claimed.status == ReviewItem.Status.CLAIMED


def test_it_returns_to_normal_once_verdicts_drain_below_the_low_watermark(
    admit_item: Any, reviewer: Any, small_queue: Callable[..., Queue]
) -> None:
    small_queue(10)  # high 8, low 3
    for _ in range(9):
        admit_item()
    assert Queue.current().mode == "draft"
    for expected in ["draft"] * 6 + ["normal"]:
        item = services.claim(reviewer=reviewer)
        services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
        assert Queue.current().mode == expected


# --- the step-limit tuner ------------------------------------------------------------------


def test_it_raises_the_step_limit_after_a_window_of_approvals(decide_many: Callable[..., None]) -> None:
    decide_many([True] * 9)
    assert Queue.current().step_limit == 5  # partial window
    decide_many([True])
    assert Queue.current().step_limit == 6
    change = StepLimitChange.objects.get()
    assert (change.previous, change.step_limit, change.approve_rate) == (5, 6, 1.0)


def test_it_lowers_the_step_limit_after_a_window_of_rejections(decide_many: Callable[..., None]) -> None:
    decide_many([False] * 10, label="unclear")
    assert Queue.current().step_limit == 4


def test_it_ignores_sampled_auto_passes_when_tuning(admit_item: Any, reviewer: Any) -> None:
    for _ in range(10):
        admit_item(label="sampled", cutoff_reason="sampled")
        item = services.claim(reviewer=reviewer)
        services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    assert Queue.current().step_limit == 5


def test_it_ignores_draft_verdicts_when_tuning(admit_item: Any, reviewer: Any) -> None:
    for _ in range(10):
        admit_item(draft=True, cutoff_reason="draft", attempt_count=1)
        item = services.claim(reviewer=reviewer)
        services.decide(item_id=item.pk, reviewer=reviewer, approve=False, reason_label="unclear")
    assert Queue.current().step_limit == 5


# --- label counts and proposed filter rules ------------------------------------------------


def test_it_counts_labels_and_proposes_a_filter_rule_past_the_threshold(decide_many: Callable[..., None]) -> None:
    decide_many([False] * 3)
    assert LabelCount.objects.get(label="code_error").count == 3
    assert not FilterRule.objects.exists()
    decide_many([False])
    rule = FilterRule.objects.get()
    assert (rule.label, rule.gate, rule.status) == ("code_error", "python_syntax", "proposed")


# --- undo ----------------------------------------------------------------------------------


def test_it_undoes_the_last_verdict_and_its_step_limit_change(decide_many: Callable[..., None], reviewer: Any) -> None:
    decide_many([True] * 10)
    assert Queue.current().step_limit == 6
    item = services.undo(reviewer=reviewer)
    assert item.status == ReviewItem.Status.CLAIMED and item.lease_holder_id == reviewer.pk
    assert Queue.current().step_limit == 5
    assert Verdict.objects.count() == 9
    assert not StepLimitChange.objects.exists()


def test_it_refuses_undo_after_the_window(decide_many: Callable[..., None], reviewer: Any, settings: Any) -> None:
    decide_many([False])
    later = timezone.now() + timedelta(seconds=settings.REVIEWQUEUE_UNDO_SECONDS + 1)
    with pytest.raises(services.NothingToUndo):
        services.undo(reviewer=reviewer, now=later)
    assert LabelCount.objects.get(label="code_error").count == 1


def test_it_undoes_a_rejection_label_count(decide_many: Callable[..., None], reviewer: Any) -> None:
    decide_many([False])
    services.undo(reviewer=reviewer)
    assert LabelCount.objects.get(label="code_error").count == 0
