"""Hostile payloads for admit(), called directly.

Whatever a producer sends, admit() either refuses it with InvalidInput naming
the field, or stores an item whose every text is valid UTF-8 without NUL,
no longer than the documented limit plus the visible truncation marker, with
the marker present exactly when the text was cut. No other exception. The same
payloads through POST /api/outputs are in test_bad_input_admit.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reviewqueue import services
from reviewqueue.models import ReviewItem

from ..hostile_inputs import (
    ERROR_LIMIT,
    FIELDS,
    HYPOTHESIS,
    LIMIT,
    STORED_TEXT,
    anything,
    assert_clean,
    expected_text,
    integers,
    raw,
    reasons,
    text,
    unique,
    valid_label,
    valid_reason,
)


def admit_or_refuse(**fields: Any) -> ReviewItem | None:
    try:
        result = services.admit(**fields)
    except services.InvalidInput as exc:
        assert exc.field in FIELDS, exc.field
        assert str(exc).startswith(f"{exc.field}: ")
        return None
    item = ReviewItem.objects.get(pk=result.item.pk)
    assert result.outcome in ("enqueued", "shed", "duplicate", "filtered")
    return item


@pytest.fixture
def small_limit(settings: Any) -> None:
    settings.REVIEWQUEUE_MAX_OUTPUT_CHARS = LIMIT


printable_key = st.text(st.characters(categories=["L", "N", "P", "S"]), max_size=30)
odd_key = st.one_of(st.text(max_size=30), st.sampled_from(["k\x00", "k\n", "k\ud800", "k\x1b"]))
description = st.one_of(text.map(lambda s: "d" + s), raw.map(lambda b: b"d" + b), anything)


def test_admit_stores_clean_text_or_names_the_bad_field(db: None, small_limit: None) -> None:
    stored: list[int] = []

    @HYPOTHESIS
    @given(
        key=st.one_of(printable_key, printable_key, odd_key),
        description=description,
        output=anything,
        error=anything,
        reason=valid_reason,
        label=valid_label,
        priority=st.integers(-1000, 1000),
        attempts=st.integers(0, 10_000),
        short=anything,
    )
    def check(
        key: str,
        description: Any,
        output: Any,
        error: Any,
        reason: str,
        label: str,
        priority: int,
        attempts: int,
        short: Any,
    ) -> None:
        item = admit_or_refuse(
            # A unique suffix keeps every example from being a duplicate of an earlier one;
            # control characters and surrogates in the fuzzed part still reach the check.
            idempotency_key=f"{key}-{next(unique)}",
            task_description=description,
            final_output=output,
            last_error=error,
            cutoff_reason=reason,
            label=label,
            priority=priority,
            attempt_count=attempts,
            task_id=short,
            task_kind=short,
            producer=short,
            source_run_id=short,
        )
        if item is None:
            return
        stored.append(item.pk)
        for name in STORED_TEXT:
            assert_clean(getattr(item, name), limit=ERROR_LIMIT if name == "last_error" else LIMIT)
        cut = assert_clean(item.final_output, limit=LIMIT)
        assert item.output_truncated == cut == (len(expected_text(output)) > LIMIT)
        if not cut:
            assert item.final_output == expected_text(output)
        assert assert_clean(item.task_description, limit=LIMIT) == (len(expected_text(description)) > LIMIT)
        assert item.last_error == expected_text(error)  # far below its own 20 000 limit here
        assert item.idempotency_key.isprintable()

    check()
    # A strategy that only produced refusals would have tested nothing about what is stored.
    assert len(stored) >= 20, len(stored)


@HYPOTHESIS
@given(reason=reasons, label=st.one_of(valid_label, text), priority=integers, attempts=integers)
def test_admit_refuses_bad_scalars_by_name(db: None, reason: Any, label: Any, priority: Any, attempts: Any) -> None:
    item = admit_or_refuse(
        idempotency_key=f"scalar-{next(unique)}",
        task_description="t",
        final_output="o",
        cutoff_reason=reason,
        label=label,
        priority=priority,
        attempt_count=attempts,
    )
    if item is not None:
        assert item.cutoff_reason == reason and item.label == label
        assert item.priority == priority and -1000 <= item.priority <= 1000
        assert 0 <= item.attempt_count <= 10_000


def test_a_huge_output_is_kept_up_to_the_limit_with_a_visible_marker(db: None, small_limit: None) -> None:
    item = admit_or_refuse(
        idempotency_key="huge", task_description="t", final_output="a" * 10 * LIMIT, cutoff_reason="external"
    )
    assert item is not None and item.output_truncated
    assert item.final_output.startswith("a" * LIMIT)
    assert item.final_output.endswith(
        f"[reviewqueue: output truncated, {9 * LIMIT} of {10 * LIMIT} characters omitted]"
    )


def test_a_huge_last_error_is_cut_at_its_own_limit(db: None) -> None:
    item = admit_or_refuse(
        idempotency_key="long-error",
        task_description="t",
        final_output="",
        last_error="e" * (ERROR_LIMIT + 5),
        cutoff_reason="stuck",
    )
    assert item is not None
    assert assert_clean(item.last_error, limit=ERROR_LIMIT)


def test_the_default_limit_is_the_documented_one() -> None:
    from django.conf import settings as django_settings

    assert django_settings.REVIEWQUEUE_MAX_OUTPUT_CHARS == 500_000  # docs/API.md and docs/SECURITY.md say so


@pytest.mark.parametrize("key", ["", "   ", "k" * 201, "a\x00b", "a\nb", "a\ud800b", None])
def test_it_names_a_bad_idempotency_key(db: None, key: Any) -> None:
    with pytest.raises(services.InvalidInput) as caught:
        services.admit(idempotency_key=key, task_description="t", final_output="o", cutoff_reason="external")
    assert caught.value.field == "idempotency_key"
