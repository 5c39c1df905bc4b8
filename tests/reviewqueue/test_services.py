"""admit / claim / release / renew / decide / undo, called directly."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from reviewqueue import services
from reviewqueue.models import (
    CircuitBreakerEntry,
    FilterRule,
    LabelCount,
    ModeChange,
    QueuePolicy,
    ReviewItem,
    StepLimitChange,
    Verdict,
)

pytestmark = pytest.mark.django_db


def small_queue(capacity: int = 10, **fields: Any) -> QueuePolicy:
    return services.policy_update(user=None, changes={"capacity": capacity, **fields})


# --- admit ------------------------------------------------------------------------------


def test_it_enqueues_an_output_as_pending_and_unverified(admit_item: Any) -> None:
    result = admit_item()
    assert result.outcome == "enqueued"
    assert result.item.status == ReviewItem.Status.PENDING
    assert result.item.label == ReviewItem.Label.UNVERIFIED
    assert result.mode == "normal"


def test_it_answers_duplicate_for_a_repeated_key_and_stores_nothing_new(admit_item: Any) -> None:
    first = admit_item(idempotency_key="run-1")
    again = admit_item(idempotency_key="run-1", final_output="something else")
    assert again.outcome == "duplicate"
    assert again.item.pk == first.item.pk
    assert ReviewItem.objects.count() == 1
    assert ReviewItem.objects.get().final_output == first.item.final_output


def test_it_turns_draft_above_the_high_watermark_and_logs_the_change(admit_item: Any) -> None:
    small_queue(10)  # high watermark at depth 8
    modes = [admit_item().mode for _ in range(9)]
    assert modes[7] == "normal" and modes[8] == "draft"
    change = ModeChange.objects.get()
    assert (change.previous, change.mode, change.depth) == ("normal", "draft", 9)


def test_it_sheds_the_lowest_priority_waiting_item_at_capacity(admit_item: Any) -> None:
    small_queue(3)
    low = admit_item(priority=1).item
    admit_item(priority=2)
    admit_item(priority=2)
    result = admit_item(priority=3)
    assert result.outcome == "enqueued"
    assert result.shed_item is not None and result.shed_item.pk == low.pk
    low.refresh_from_db()
    assert low.status == ReviewItem.Status.SHED
    entry = CircuitBreakerEntry.objects.get()
    assert entry.item_id == low.pk and entry.priority == 1 and not entry.incoming
    assert entry.displaced_by_id == result.item.pk
    assert result.mode == "shedding"


def test_it_sheds_the_incoming_item_when_it_is_lowest_and_keeps_it(admit_item: Any) -> None:
    small_queue(2)
    admit_item(priority=5)
    admit_item(priority=5)
    result = admit_item(priority=1, final_output="kept for the record")
    assert result.outcome == "shed"
    assert result.item.status == ReviewItem.Status.SHED
    assert ReviewItem.objects.get(pk=result.item.pk).final_output == "kept for the record"
    assert CircuitBreakerEntry.objects.get().incoming


def test_it_never_sheds_an_item_under_review(admit_item: Any, reviewer: Any) -> None:
    small_queue(1)
    held = admit_item(priority=0).item
    services.claim(reviewer=reviewer)
    result = admit_item(priority=9)
    assert result.outcome == "shed"  # nothing pending to displace
    held.refresh_from_db()
    assert held.status == ReviewItem.Status.CLAIMED


def test_it_accounts_for_every_output(admit_item: Any) -> None:
    small_queue(5)
    outcomes = [admit_item(idempotency_key=f"k{i % 15}", priority=i % 3).outcome for i in range(20)]
    produced = 15  # distinct keys
    enqueued = (
        ReviewItem.objects.exclude(status=ReviewItem.Status.SHED).count()
        + ReviewItem.objects.filter(status=ReviewItem.Status.SHED, shed_entries__incoming=False).count()
    )
    shed_incoming = outcomes.count("shed")
    assert outcomes.count("duplicate") == 5
    assert outcomes.count("enqueued") + shed_incoming == produced
    assert ReviewItem.objects.count() == produced
    assert enqueued + shed_incoming == produced
    assert services.queue_depth() == 5


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"idempotency_key": ""}, "idempotency_key"),
        ({"cutoff_reason": "bored"}, "cutoff_reason"),
        ({"priority": "high"}, "priority"),
        ({"label": "trusted"}, "label"),
        ({"task_description": "  "}, "task_description"),
        ({"attempt_count": -1}, "attempt_count"),
    ],
)
def test_it_refuses_bad_input_naming_the_field(admit_item: Any, overrides: dict, field: str) -> None:
    with pytest.raises(services.InvalidInput) as err:
        admit_item(**overrides)
    assert err.value.field == field
    assert ReviewItem.objects.count() == 0


def test_it_stores_binary_and_invalid_utf8_output_with_replacement_characters(admit_item: Any) -> None:
    result = admit_item(final_output=b"ok \xff\xfe bad \x00 nul", last_error="lone \ud800 surrogate")
    item = ReviewItem.objects.get(pk=result.item.pk)
    assert item.final_output == "ok \ufffd\ufffd bad \ufffd nul"
    assert "\ufffd" in item.last_error


def test_it_truncates_huge_output_with_a_visible_marker(admit_item: Any, settings: Any) -> None:
    settings.REVIEWQUEUE_MAX_OUTPUT_CHARS = 1000
    result = admit_item(final_output="x" * 5000)
    item = ReviewItem.objects.get(pk=result.item.pk)
    assert item.output_truncated
    assert item.final_output.startswith("x" * 1000)
    assert "4000 of 5000 characters omitted" in item.final_output


def test_it_filters_output_that_fails_an_enabled_gate(admit_item: Any) -> None:
    FilterRule.objects.create(
        label="code_error", gate="python_syntax", description="parses", status=FilterRule.Status.ENABLED
    )
    bad = admit_item(final_output="def broken(:\n    pass")
    good = admit_item()
    assert bad.outcome == "filtered" and bad.item.status == ReviewItem.Status.FILTERED
    assert bad.item.filter_reason
    assert good.outcome == "enqueued"


# --- claim / release / renew ------------------------------------------------------------


def test_it_claims_by_priority_then_age(admit_item: Any, reviewer: Any, make_user: Any) -> None:
    now = timezone.now()
    old_low = admit_item(priority=1, now=now - timedelta(minutes=5)).item
    young_high = admit_item(priority=3, now=now).item
    old_high = admit_item(priority=3, now=now - timedelta(minutes=1)).item
    order = []
    for name in ("a", "b", "c"):
        item = services.claim(reviewer=make_user(name, "reviewer"))
        order.append(item.pk)
    assert order == [old_high.pk, young_high.pk, old_low.pk]


def test_it_gives_a_reviewer_back_the_item_they_hold(admit_item: Any, reviewer: Any) -> None:
    admit_item()
    admit_item()
    first = services.claim(reviewer=reviewer)
    assert services.claim(reviewer=reviewer).pk == first.pk
    assert ReviewItem.objects.filter(status=ReviewItem.Status.CLAIMED).count() == 1


def test_it_answers_none_on_an_empty_queue(reviewer: Any) -> None:
    assert services.claim(reviewer=reviewer) is None


def test_it_lets_another_reviewer_take_an_expired_lease(admit_item: Any, reviewer: Any, make_user: Any) -> None:
    admit_item()
    item = services.claim(reviewer=reviewer)
    later = timezone.now() + timedelta(seconds=QueuePolicy.current().lease_seconds + 1)
    other = make_user("olga", "reviewer")
    again = services.claim(reviewer=other, now=later)
    assert again.pk == item.pk and again.lease_holder_id == other.pk
    assert again.lease_expiries == 1


def test_it_refuses_the_late_holders_verdict_with_a_clear_error(admit_item: Any, reviewer: Any, make_user: Any) -> None:
    admit_item()
    item = services.claim(reviewer=reviewer)
    later = timezone.now() + timedelta(seconds=QueuePolicy.current().lease_seconds + 1)
    services.claim(reviewer=make_user("olga", "reviewer"), now=later)
    with pytest.raises(services.LeaseExpired, match="expired"):
        services.decide(item_id=item.pk, reviewer=reviewer, approve=True, now=later)
    assert not Verdict.objects.exists()


def test_it_refuses_a_verdict_after_expiry_even_before_anyone_reclaims(admit_item: Any, reviewer: Any) -> None:
    admit_item()
    item = services.claim(reviewer=reviewer)
    later = timezone.now() + timedelta(seconds=QueuePolicy.current().lease_seconds + 1)
    with pytest.raises(services.LeaseExpired):
        services.decide(item_id=item.pk, reviewer=reviewer, approve=True, now=later)


def test_it_releases_an_item_back_to_the_queue(admit_item: Any, reviewer: Any, make_user: Any) -> None:
    admit_item()
    item = services.claim(reviewer=reviewer)
    services.release(item_id=item.pk, reviewer=reviewer)
    assert services.claim(reviewer=make_user("olga", "reviewer")).pk == item.pk


def test_it_renews_a_live_lease(admit_item: Any, reviewer: Any) -> None:
    admit_item()
    item = services.claim(reviewer=reviewer)
    soon = timezone.now() + timedelta(seconds=100)
    renewed = services.renew(item_id=item.pk, reviewer=reviewer, now=soon)
    assert renewed.lease_expires_at > item.lease_expires_at


def test_it_refuses_release_and_renew_by_someone_else(admit_item: Any, reviewer: Any, make_user: Any) -> None:
    admit_item()
    item = services.claim(reviewer=reviewer)
    other = make_user("olga", "reviewer")
    with pytest.raises(services.NotLeaseHolder):
        services.release(item_id=item.pk, reviewer=other)
    with pytest.raises(services.NotLeaseHolder):
        services.renew(item_id=item.pk, reviewer=other)


# --- decide -----------------------------------------------------------------------------


def test_it_records_an_approval(admit_item: Any, reviewer: Any) -> None:
    admit_item()
    item = services.claim(reviewer=reviewer)
    verdict = services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    item.refresh_from_db()
    assert verdict.approved and item.status == ReviewItem.Status.APPROVED and item.decided_at


def test_it_decides_only_once(admit_item: Any, reviewer: Any) -> None:
    admit_item()
    item = services.claim(reviewer=reviewer)
    services.decide(item_id=item.pk, reviewer=reviewer, approve=False, reason_label="logic_error")
    with pytest.raises(services.AlreadyDecided):
        services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    assert Verdict.objects.get().decision == "reject"


def test_it_refuses_a_verdict_from_a_non_holder(admit_item: Any, reviewer: Any, make_user: Any) -> None:
    admit_item()
    item = services.claim(reviewer=reviewer)
    with pytest.raises(services.NotLeaseHolder):
        services.decide(item_id=item.pk, reviewer=make_user("olga", "reviewer"), approve=True)


def test_it_requires_a_known_label_to_reject(admit_item: Any, reviewer: Any) -> None:
    admit_item()
    item = services.claim(reviewer=reviewer)
    for label in ("", "meh"):
        with pytest.raises(services.InvalidInput) as err:
            services.decide(item_id=item.pk, reviewer=reviewer, approve=False, reason_label=label)
        assert err.value.field == "reason_label"
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.CLAIMED


def decide_many(admit_item: Any, reviewer: Any, decisions: list[bool], label: str = "code_error") -> None:
    for approve in decisions:
        admit_item()
        item = services.claim(reviewer=reviewer)
        services.decide(item_id=item.pk, reviewer=reviewer, approve=approve, reason_label="" if approve else label)


def test_it_raises_the_step_limit_after_a_window_of_approvals(admit_item: Any, reviewer: Any) -> None:
    decide_many(admit_item, reviewer, [True] * 9)
    assert QueuePolicy.current().step_limit == 5  # partial window
    decide_many(admit_item, reviewer, [True])
    assert QueuePolicy.current().step_limit == 6
    change = StepLimitChange.objects.get()
    assert (change.previous, change.step_limit, change.approve_rate) == (5, 6, 1.0)


def test_it_lowers_the_step_limit_after_a_window_of_rejections(admit_item: Any, reviewer: Any) -> None:
    decide_many(admit_item, reviewer, [False] * 10, label="unclear")
    assert QueuePolicy.current().step_limit == 4


def test_it_ignores_sampled_auto_passes_when_tuning(admit_item: Any, reviewer: Any) -> None:
    for _ in range(10):
        admit_item(label="sampled", cutoff_reason="sampled")
        item = services.claim(reviewer=reviewer)
        services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    assert QueuePolicy.current().step_limit == 5


def test_it_counts_labels_and_proposes_a_filter_rule_past_the_threshold(admit_item: Any, reviewer: Any) -> None:
    decide_many(admit_item, reviewer, [False] * 3)
    assert LabelCount.objects.get(label="code_error").count == 3
    assert not FilterRule.objects.exists()
    decide_many(admit_item, reviewer, [False])
    rule = FilterRule.objects.get()
    assert (rule.label, rule.gate, rule.status) == ("code_error", "python_syntax", "proposed")


def test_it_returns_to_normal_once_verdicts_drain_below_the_low_watermark(admit_item: Any, reviewer: Any) -> None:
    small_queue(10)  # high 8, low 3
    for _ in range(9):
        admit_item()
    assert QueuePolicy.current().mode == "draft"
    for expected in ["draft"] * 6 + ["normal"]:
        item = services.claim(reviewer=reviewer)
        services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
        assert QueuePolicy.current().mode == expected


# --- undo -------------------------------------------------------------------------------


def test_it_undoes_the_last_verdict_and_its_step_limit_change(admit_item: Any, reviewer: Any) -> None:
    decide_many(admit_item, reviewer, [True] * 10)
    assert QueuePolicy.current().step_limit == 6
    item = services.undo(reviewer=reviewer)
    assert item.status == ReviewItem.Status.CLAIMED and item.lease_holder_id == reviewer.pk
    assert QueuePolicy.current().step_limit == 5
    assert Verdict.objects.count() == 9
    assert not StepLimitChange.objects.exists()


def test_it_refuses_undo_after_the_window(admit_item: Any, reviewer: Any, settings: Any) -> None:
    decide_many(admit_item, reviewer, [False])
    later = timezone.now() + timedelta(seconds=settings.REVIEWQUEUE_UNDO_SECONDS + 1)
    with pytest.raises(services.NothingToUndo):
        services.undo(reviewer=reviewer, now=later)
    assert LabelCount.objects.get(label="code_error").count == 1


def test_it_undoes_a_rejection_label_count(admit_item: Any, reviewer: Any) -> None:
    decide_many(admit_item, reviewer, [False])
    services.undo(reviewer=reviewer)
    assert LabelCount.objects.get(label="code_error").count == 0


# --- policy settings --------------------------------------------------------------------


def test_it_audits_a_policy_change(operator: Any) -> None:
    services.policy_update(user=operator, changes={"capacity": 80, "lease_seconds": 300})
    from reviewqueue.models import PolicyAudit

    audit = PolicyAudit.objects.get()
    assert audit.user == operator and audit.changes == {"capacity": [50, 80]}


def test_it_refuses_an_invalid_policy_and_changes_nothing(operator: Any) -> None:
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as err:
        services.policy_update(user=operator, changes={"low_watermark": 0.9, "high_watermark": 0.8})
    assert "low_watermark" in err.value.message_dict
    with pytest.raises(ValidationError) as err:
        services.policy_update(user=operator, changes={"step_limit": 20})
    assert "step_limit" in err.value.message_dict
    assert QueuePolicy.current().low_watermark == 0.3


def test_it_ignores_draft_verdicts_when_tuning(admit_item: Any, reviewer: Any) -> None:
    for _ in range(10):
        admit_item(draft=True, cutoff_reason="draft", attempt_count=1)
        item = services.claim(reviewer=reviewer)
        services.decide(item_id=item.pk, reviewer=reviewer, approve=False, reason_label="unclear")
    assert QueuePolicy.current().step_limit == 5


def test_it_refuses_a_key_with_control_characters(admit_item: Any) -> None:
    with pytest.raises(services.InvalidInput) as err:
        admit_item(idempotency_key="run\x00one")
    assert err.value.field == "idempotency_key"


def test_it_cleans_nul_from_the_short_fields(admit_item: Any) -> None:
    item = admit_item(task_id="t\x00", producer="p\x00", source_run_id="r\x00").item
    item.refresh_from_db()
    assert (item.task_id, item.producer, item.source_run_id) == ("t\ufffd", "p\ufffd", "r\ufffd")


# --- the reviewed attempt's grade ----------------------------------------------------


def test_admit_keeps_the_reviewed_attempt_its_grade_and_failing_checks(admit_item):
    item = admit_item(
        attempt_count=5,
        reviewed_attempt=3,
        checks_passed=4,
        checks_total=5,
        failing_checks=[{"id": "check_5", "about": "subtractive forty"}],
    ).item
    item.refresh_from_db()
    assert (item.reviewed_attempt, item.checks_passed, item.checks_total) == (3, 4, 5)
    assert item.failing_check_list() == [{"id": "check_5", "about": "subtractive forty"}]
    assert item.reviewed_is_earlier


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"reviewed_attempt": 6}, "reviewed_attempt"),
        ({"reviewed_attempt": -1}, "reviewed_attempt"),
        ({"checks_passed": 2}, "checks_passed"),
        ({"checks_passed": 6, "checks_total": 5}, "checks_passed"),
        ({"checks_passed": 0, "checks_total": 0}, "checks_total"),
        ({"failing_checks": "check_1"}, "failing_checks"),
        ({"failing_checks": [{"about": "no id"}]}, "failing_checks"),
        ({"failing_checks": [{"id": "c", "about": 3}]}, "failing_checks"),
        ({"reviewed_score": 1.5}, "reviewed_score"),
        ({"reviewed_score": "high"}, "reviewed_score"),
    ],
)
def test_admit_refuses_a_grade_that_does_not_add_up_and_stores_nothing(admit_item, fields, field):
    with pytest.raises(services.InvalidInput) as caught:
        admit_item(attempt_count=5, **fields)
    assert caught.value.field == field
    assert not ReviewItem.objects.exists()


def test_an_item_without_a_grade_reads_as_before(admit_item):
    item = admit_item().item
    assert (item.reviewed_attempt, item.checks_passed, item.checks_total) == (0, None, None)
    assert item.failing_check_list() == [] and not item.reviewed_is_earlier
