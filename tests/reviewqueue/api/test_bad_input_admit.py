"""Hostile payloads for admit() through POST /api/outputs.

Whatever a producer sends, the API answers 201/200 with an item whose every
text is clean (see hostile_inputs.assert_clean), or 400 naming the fields:
never a 5xx. The same payloads sent to admit() directly are in
services/test_admission_hostile.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from hypothesis import given
from hypothesis import strategies as st

from reviewqueue.models import ReviewItem
from reviewqueue.tokens import issue_token

from ..hostile_inputs import ERROR_LIMIT, HYPOTHESIS, LIMIT, STORED_TEXT, assert_clean, integers, reasons, text, unique


@pytest.fixture
def api(db: None, settings: Any) -> tuple[Client, str]:
    """A producer's client and token, with the output limit set small."""
    settings.REVIEWQUEUE_MAX_OUTPUT_CHARS = LIMIT
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
        payload["idempotency_key"] += f"-{next(unique)}"
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
