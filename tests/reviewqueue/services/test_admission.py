"""admit(), called directly: enqueueing, duplicates, watermarks and shedding,
refusing and cleaning input, filter gates, the reviewed attempt's grade.

Hostile payloads are in test_admission_hostile.py, the PostgreSQL
one-statement path in test_admission_pg.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reviewqueue import services
from reviewqueue.models import CircuitBreakerEntry, FilterRule, ModeChange, Queue, ReviewItem

pytestmark = pytest.mark.django_db


# --- enqueue, duplicates, watermarks, shedding ---------------------------------------------


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


def test_it_turns_draft_above_the_high_watermark_and_logs_the_change(
    admit_item: Any, small_queue: Callable[..., Queue]
) -> None:
    small_queue(10)  # high watermark at depth 8
    modes = [admit_item().mode for _ in range(9)]
    assert modes[7] == "normal" and modes[8] == "draft"
    change = ModeChange.objects.get()
    assert (change.previous, change.mode, change.depth) == ("normal", "draft", 9)


def test_it_sheds_the_lowest_priority_waiting_item_at_capacity(
    admit_item: Any, small_queue: Callable[..., Queue]
) -> None:
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


def test_it_sheds_the_incoming_item_when_it_is_lowest_and_keeps_it(
    admit_item: Any, small_queue: Callable[..., Queue]
) -> None:
    small_queue(2)
    admit_item(priority=5)
    admit_item(priority=5)
    result = admit_item(priority=1, final_output="kept for the record")
    assert result.outcome == "shed"
    assert result.item.status == ReviewItem.Status.SHED
    assert ReviewItem.objects.get(pk=result.item.pk).final_output == "kept for the record"
    assert CircuitBreakerEntry.objects.get().incoming


def test_it_never_sheds_an_item_under_review(admit_item: Any, reviewer: Any, small_queue: Callable[..., Queue]) -> None:
    small_queue(1)
    held = admit_item(priority=0).item
    services.claim(reviewer=reviewer)
    result = admit_item(priority=9)
    assert result.outcome == "shed"  # nothing pending to displace
    held.refresh_from_db()
    assert held.status == ReviewItem.Status.CLAIMED


def test_it_accounts_for_every_output(admit_item: Any, small_queue: Callable[..., Queue]) -> None:
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


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_admission_outside_a_transaction_keeps_every_rule(db: None) -> None:
    """The path producers take (no enclosing transaction; on PostgreSQL the
    pipelined one) admits, turns draft, sheds and refuses duplicates exactly
    as the policy says."""
    services.policy_update(user=None, changes={"capacity": 5})  # high watermark at depth 4
    outcomes = [
        services.admit(
            idempotency_key=f"p{i}", task_description="t", final_output="o", cutoff_reason="stuck", priority=i
        )
        for i in range(7)
    ]
    assert [o.outcome for o in outcomes] == ["enqueued"] * 7
    assert [o.mode for o in outcomes] == ["normal"] * 4 + ["shedding"] * 3
    assert outcomes[0].item.pk == ReviewItem.objects.get(idempotency_key="p0").pk
    again = services.admit(idempotency_key="p3", task_description="t", final_output="x", cutoff_reason="stuck")
    assert again.outcome == "duplicate" and again.item.pk == outcomes[3].item.pk
    assert list(ReviewItem.objects.filter(status="shed").values_list("idempotency_key", flat=True).order_by("pk")) == [
        "p0",
        "p1",
    ]
    assert [(m.previous, m.mode) for m in ModeChange.objects.order_by("pk")] == [("normal", "shedding")]


# --- refusing and cleaning input -----------------------------------------------------------


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


def test_it_refuses_a_key_with_control_characters(admit_item: Any) -> None:
    with pytest.raises(services.InvalidInput) as err:
        admit_item(idempotency_key="run\x00one")
    assert err.value.field == "idempotency_key"


def test_it_stores_binary_and_invalid_utf8_output_with_replacement_characters(admit_item: Any) -> None:
    result = admit_item(final_output=b"ok \xff\xfe bad \x00 nul", last_error="lone \ud800 surrogate")
    item = ReviewItem.objects.get(pk=result.item.pk)
    assert item.final_output == "ok \ufffd\ufffd bad \ufffd nul"
    assert "\ufffd" in item.last_error


def test_it_cleans_nul_from_the_short_fields(admit_item: Any) -> None:
    item = admit_item(task_id="t\x00", producer="p\x00", source_run_id="r\x00").item
    item.refresh_from_db()
    assert (item.task_id, item.producer, item.source_run_id) == ("t\ufffd", "p\ufffd", "r\ufffd")


def test_it_truncates_huge_output_with_a_visible_marker(admit_item: Any, settings: Any) -> None:
    settings.REVIEWQUEUE_MAX_OUTPUT_CHARS = 1000
    result = admit_item(final_output="x" * 5000)
    item = ReviewItem.objects.get(pk=result.item.pk)
    assert item.output_truncated
    assert item.final_output.startswith("x" * 1000)
    assert "4000 of 5000 characters omitted" in item.final_output


# --- filter gates --------------------------------------------------------------------------


def test_it_filters_output_that_fails_an_enabled_gate(admit_item: Any) -> None:
    FilterRule.objects.create(
        label="code_error", gate="python_syntax", description="parses", status=FilterRule.Status.ENABLED
    )
    bad = admit_item(final_output="def broken(:\n    pass")
    good = admit_item()
    assert bad.outcome == "filtered" and bad.item.status == ReviewItem.Status.FILTERED
    assert bad.item.filter_reason
    assert good.outcome == "enqueued"


# --- the reviewed attempt's grade ----------------------------------------------------------


def test_admit_keeps_the_reviewed_attempt_its_grade_and_failing_checks(admit_item: Any) -> None:
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
def test_admit_refuses_a_grade_that_does_not_add_up_and_stores_nothing(
    admit_item: Any, fields: dict, field: str
) -> None:
    with pytest.raises(services.InvalidInput) as caught:
        admit_item(attempt_count=5, **fields)
    assert caught.value.field == field
    assert not ReviewItem.objects.exists()


def test_an_item_without_a_grade_reads_as_before(admit_item: Any) -> None:
    item = admit_item().item
    assert (item.reviewed_attempt, item.checks_passed, item.checks_total) == (0, None, None)
    assert item.failing_check_list() == [] and not item.reviewed_is_earlier
