"""The age watermark in the pure policy: draft mode on age alone, normal
again only when both age and depth allow it."""

from __future__ import annotations

import pytest

from reviewqueue.policy import Candidate, Mode, PolicyError, Watermarks, next_mode, plan_admission

AGED = Watermarks(capacity=50, high=0.8, low=0.3, age_high=20, age_low=5)  # depth marks 40 / 15


def test_an_old_item_turns_on_draft_far_below_the_depth_watermark() -> None:
    assert next_mode(Mode.NORMAL, 2, AGED, oldest_minutes=21) is Mode.DRAFT
    assert next_mode(Mode.NORMAL, 2, AGED, oldest_minutes=20) is Mode.NORMAL  # exactly the mark: not above


def test_without_an_age_watermark_age_changes_nothing() -> None:
    plain = Watermarks(capacity=50, high=0.8, low=0.3)
    assert next_mode(Mode.NORMAL, 2, plain, oldest_minutes=10_000) is Mode.NORMAL


def test_draft_holds_until_both_age_and_depth_are_low() -> None:
    assert next_mode(Mode.DRAFT, 2, AGED, oldest_minutes=10) is Mode.DRAFT  # depth low, age between marks
    assert next_mode(Mode.DRAFT, 20, AGED, oldest_minutes=1) is Mode.DRAFT  # age low, depth between marks
    assert next_mode(Mode.DRAFT, 2, AGED, oldest_minutes=4) is Mode.NORMAL
    assert next_mode(Mode.DRAFT, 0, AGED, oldest_minutes=None) is Mode.NORMAL  # nothing waits


def test_capacity_still_sheds_whatever_the_age() -> None:
    assert next_mode(Mode.NORMAL, 50, AGED, oldest_minutes=0) is Mode.SHEDDING


def test_an_admission_plan_reads_the_oldest_age() -> None:
    plan = plan_admission(mode=Mode.NORMAL, depth=3, marks=AGED, incoming=Candidate(1, 0.0, "x"), oldest_minutes=30)
    assert plan.enqueue and plan.mode is Mode.DRAFT


@pytest.mark.parametrize(
    ("high", "low", "field"),
    [
        (20, None, "age_low_minutes"),
        (None, 5, "age_low_minutes"),
        (0, 0, "age_high_minutes"),
        (10, 10, "age_low_minutes"),
    ],
)
def test_it_refuses_a_broken_age_watermark_naming_the_field(high: float | None, low: float | None, field: str) -> None:
    with pytest.raises(PolicyError) as caught:
        Watermarks(age_high=high, age_low=low)
    assert caught.value.field == field
