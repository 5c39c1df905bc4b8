"""Hostile payloads for admit(), directly and through POST /api/outputs.

Whatever a producer sends, admit() either refuses it with InvalidInput naming
the field, or stores an item whose every text is valid UTF-8 without NUL,
no longer than the documented limit plus the visible truncation marker, with
the marker present exactly when the text was cut. No other exception, and
through the API never a 5xx.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reviewqueue import services
from reviewqueue.models import ReviewItem
from reviewqueue.tokens import issue_token

LIMIT = 200  # small, so huge inputs stay cheap; the shipped default is 500 000
ERROR_LIMIT = 20_000
MARKER = re.compile(r"\n\n\[reviewqueue: output truncated, (\d+) of (\d+) characters omitted\]\Z")
MARKER_ROOM = 100  # the marker with two numbers of up to 40 digits each fits in this
FIELDS = {"idempotency_key", "task_description", "cutoff_reason", "label", "priority", "attempt_count"}
STORED_TEXT = ("task_description", "final_output", "last_error", "task_id", "task_kind", "producer", "source_run_id")

SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
LONE_SURROGATE = re.compile("[\ud800-\udfff]")

_unique = itertools.count()

HUGE = 3 * LIMIT
nasty_chars = st.sampled_from(["\x00", "\ud800", "\udfff", "\ufffe", "\u202e", "\x1b[31m", "\r", "é", "𝔘", "\u200b"])
text = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=()), max_size=HUGE),
    st.lists(nasty_chars, max_size=40).map("".join),
    st.builds(lambda c, n: c * n, st.sampled_from(["x", "\x00", "\ud83d", "ü", "<b>"]), st.integers(0, HUGE)),
)
raw = st.one_of(st.binary(max_size=HUGE), st.binary(max_size=8).map(lambda b: b * 100))
anything = st.one_of(text, raw, st.none(), st.integers(), st.lists(st.integers(), max_size=3))
reasons = st.one_of(st.sampled_from(["step_limit", "stuck", "external", "draft"]), text)
integers = st.one_of(st.integers(-2000, 12_000), st.booleans(), st.none(), text)
# Mostly valid, so most examples get as far as storing the text fields.
valid_reason = st.sampled_from(["step_limit", "stuck", "oscillation", "external", "draft", "sampled"])
valid_label = st.sampled_from(["unverified", "sampled"])


def expected_text(value: Any) -> str:
    """What a field should read after cleaning, computed without admit's own helper."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        decoded = value.decode("utf-8", errors="replace")
    else:
        # A high+low surrogate pair is what a JSON "\\ud83d\\ude00" escape means: one character.
        paired = SURROGATE_PAIR.sub(
            lambda m: chr(0x10000 + ((ord(m[0][0]) - 0xD800) << 10) + ord(m[0][1]) - 0xDC00), str(value)
        )
        decoded = LONE_SURROGATE.sub("\ufffd", paired)
    return decoded.replace("\x00", "\ufffd")


def assert_clean(value: str, *, limit: int) -> bool:
    """Valid UTF-8, no NUL, within the limit plus marker; returns whether it was cut."""
    assert "\x00" not in value
    value.encode("utf-8")  # raises on a lone surrogate
    assert len(value) <= limit + MARKER_ROOM
    marker = MARKER.search(value)
    if marker is not None:
        assert len(value) - len(marker.group(0)) == limit
        assert int(marker.group(2)) - int(marker.group(1)) == limit
    return marker is not None


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


HYPOTHESIS = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


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
            idempotency_key=f"{key}-{next(_unique)}",
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
        idempotency_key=f"scalar-{next(_unique)}",
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


# --- the same through the API -------------------------------------------------------------


@pytest.fixture
def api(db: None, small_limit: None) -> tuple[Client, str]:
    _, token = issue_token(name="fuzz", scopes=["outputs"])
    return Client(), token


json_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), text),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=5,
)
payloads = st.fixed_dictionaries(
    {},
    optional={
        "idempotency_key": st.one_of(st.text(min_size=1, max_size=30), json_value),
        "task_description": st.one_of(text, json_value),
        "final_output": st.one_of(text, json_value),
        "cutoff_reason": st.one_of(reasons, json_value),
        "last_error": st.one_of(text, json_value),
        "attempt_count": integers,
        "priority": integers,
        "draft": json_value,
        "label": json_value,
        "task_id": st.one_of(text, json_value),
        "producer": json_value,  # not an API field: must be ignored or refused, never trusted
    },
)


def _body(payload: dict[str, Any]) -> bytes:
    # ensure_ascii turns lone surrogates into \udXXX escapes, as a JSON producer would send them.
    return json.dumps(payload, ensure_ascii=True).encode()


@HYPOTHESIS
@given(payload=payloads, suffix=st.integers())
def test_the_api_never_answers_a_payload_with_a_server_error(
    api: tuple[Client, str], payload: dict[str, Any], suffix: int
) -> None:
    client, token = api
    if isinstance(payload.get("idempotency_key"), str):
        payload["idempotency_key"] += f"-{next(_unique)}"
    response = client.post(
        "/api/outputs", _body(payload), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert response.status_code in (200, 201, 400), (response.status_code, response.content[:300])
    body = response.json()
    if response.status_code == 400:
        assert body["error"] == "invalid" and body["fields"]
        return
    item = ReviewItem.objects.get(pk=body["item_id"])
    assert item.producer == "fuzz"
    for name in STORED_TEXT:
        assert_clean(getattr(item, name), limit=ERROR_LIMIT if name == "last_error" else LIMIT)
    assert body["truncated"] == item.output_truncated


@HYPOTHESIS
@given(body=st.one_of(st.binary(max_size=300), st.binary(max_size=20).map(lambda b: b'{"final_output": "' + b + b'"}')))
def test_the_api_never_answers_raw_bytes_with_a_server_error(api: tuple[Client, str], body: bytes) -> None:
    client, token = api
    response = client.post("/api/outputs", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 400, (response.status_code, response.content[:300])


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""]
)
def test_the_api_refuses_other_content_types_without_a_server_error(api: tuple[Client, str], content_type: str) -> None:
    client, token = api
    body = _body({"idempotency_key": "ct", "task_description": "t", "final_output": "o"})
    response = client.post("/api/outputs", body, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code < 500


def test_the_api_stores_a_lone_surrogate_and_nul_as_replacement_characters(api: tuple[Client, str]) -> None:
    client, token = api
    body = b'{"idempotency_key": "s", "task_description": "t\\u0000", "final_output": "a\\ud800b\\u0000c"}'
    response = client.post("/api/outputs", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 201
    item = ReviewItem.objects.get(pk=response.json()["item_id"])
    assert item.final_output == "a\ufffdb\ufffdc"
    assert item.task_description == "t\ufffd"
