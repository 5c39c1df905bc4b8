"""verify_signature against signatures made by the ``standardwebhooks`` library
(independent of this project), and the other way round; and every malformed
header, fuzzed, ends in a documented SignatureError."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

import pytest
import standardwebhooks
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reviewqueue.client import Event, InvalidEvent, SignatureError, standard_secret, verify_signature
from reviewqueue.client.signatures import sign, signing_key

SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()
# A secret issued before the standard scheme: URL-safe base64 without padding.
OLD_SECRET = "whsec_" + base64.urlsafe_b64encode(bytes(range(200, 232))).decode().rstrip("=")
NOW = 1_780_000_000
BODY = json.dumps(
    {
        "id": "evt_1",
        "type": "item.decided",
        "created": "2026-05-28T20:26:40Z",
        "item_id": 42,
        "run_id": None,
        "data": {
            "decision": "reject",
            "edited": False,
            "edited_output": None,
            "reason_label": "logic_error",
            "note": "off by one",
            "extra": 1,
        },
    }
).encode()
CODES = {"malformed_signature", "stale_timestamp", "signature_mismatch"}


def library_signature(secret: str, event_id: str, timestamp: int, body: bytes) -> str:
    """What any Standard Webhooks sender would put in webhook-signature."""
    return standardwebhooks.Webhook(secret).sign(event_id, datetime.fromtimestamp(timestamp, UTC), body.decode())


def headers(timestamp: int = NOW, *signatures: str, event_id: str = "evt_1", body: bytes = BODY) -> dict[str, str]:
    sigs = signatures or (library_signature(SECRET, event_id, timestamp, body),)
    return {"webhook-id": event_id, "webhook-timestamp": str(timestamp), "webhook-signature": " ".join(sigs)}


def test_a_standard_webhooks_signature_returns_the_event() -> None:
    event = verify_signature(SECRET, headers(), BODY, now=NOW)
    assert isinstance(event, Event)
    assert (event.id, event.type, event.item_id, event.run_id) == ("evt_1", "item.decided", 42, None)
    assert event.data["decision"] == "reject" and event.data["extra"] == 1
    assert event.raw["created"] == "2026-05-28T20:26:40Z"


def test_our_signature_verifies_in_the_standard_library() -> None:
    stamp = int(datetime.now(UTC).timestamp())
    ours = {
        "webhook-id": "evt_1",
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(SECRET, "evt_1", stamp, BODY),
    }
    assert standardwebhooks.Webhook(SECRET).verify(BODY, ours)["id"] == "evt_1"
    forged = {**ours, "webhook-id": "evt_2"}
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        standardwebhooks.Webhook(SECRET).verify(BODY, forged)


def test_an_old_url_safe_secret_keeps_its_key_and_has_a_standard_spelling() -> None:
    stamp = int(datetime.now(UTC).timestamp())
    ours = {
        "webhook-id": "evt_1",
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(OLD_SECRET, "evt_1", stamp, BODY),
    }
    assert signing_key(OLD_SECRET) == bytes(range(200, 232))
    assert verify_signature(OLD_SECRET, ours, BODY).id == "evt_1"
    assert standardwebhooks.Webhook(standard_secret(OLD_SECRET)).verify(BODY, ours)["id"] == "evt_1"


def test_header_names_are_matched_in_any_case() -> None:
    shouted = {k.upper(): v for k, v in headers().items()}
    assert verify_signature(SECRET, shouted, BODY, now=NOW).id == "evt_1"


def test_the_secret_may_be_key_bytes_and_the_body_text() -> None:
    assert verify_signature(signing_key(SECRET), headers(), BODY.decode(), now=NOW).id == "evt_1"


def test_a_replay_under_another_id_is_refused() -> None:
    """The id is signed: a captured delivery sent again with a new webhook-id
    does not verify, so a receiver deduplicating on it cannot be fooled."""
    captured = headers()
    with pytest.raises(SignatureError) as caught:
        verify_signature(SECRET, {**captured, "webhook-id": "evt_fresh"}, BODY, now=NOW)
    assert caught.value.code == "signature_mismatch"


def test_a_signed_id_that_is_not_the_bodys_is_invalid() -> None:
    with pytest.raises(InvalidEvent):
        verify_signature(SECRET, headers(event_id="evt_9"), BODY, now=NOW)


def test_a_tampered_body_is_refused() -> None:
    tampered = BODY.replace(b'"reject"', b'"approve"')
    with pytest.raises(SignatureError) as caught:
        verify_signature(SECRET, headers(), tampered, now=NOW)
    assert caught.value.code == "signature_mismatch"


def test_another_secret_is_refused() -> None:
    with pytest.raises(SignatureError) as caught:
        verify_signature(standard_secret(b"other"), headers(), BODY, now=NOW)
    assert caught.value.code == "signature_mismatch"


def test_a_changed_timestamp_is_refused_even_within_the_tolerance() -> None:
    signed_at_now = library_signature(SECRET, "evt_1", NOW, BODY)
    with pytest.raises(SignatureError) as caught:
        verify_signature(SECRET, headers(NOW + 1, signed_at_now), BODY, now=NOW)
    assert caught.value.code == "signature_mismatch"


@pytest.mark.parametrize("age", [301, -301, 10_000])
def test_a_timestamp_outside_the_tolerance_is_stale(age: int) -> None:
    with pytest.raises(SignatureError) as caught:
        verify_signature(SECRET, headers(NOW - age), BODY, now=NOW)
    assert caught.value.code == "stale_timestamp"


def test_the_tolerance_is_inclusive_and_settable() -> None:
    assert verify_signature(SECRET, headers(NOW - 300), BODY, now=NOW).id == "evt_1"
    with pytest.raises(SignatureError):
        verify_signature(SECRET, headers(NOW - 60), BODY, tolerance=30, now=NOW)


def test_during_rotation_any_one_v1_matches() -> None:
    other = standard_secret(b"old key")
    old, new = library_signature(other, "evt_1", NOW, BODY), library_signature(SECRET, "evt_1", NOW, BODY)
    assert verify_signature(SECRET, headers(NOW, old, new), BODY, now=NOW).id == "evt_1"
    assert verify_signature(other, headers(NOW, old, new), BODY, now=NOW).id == "evt_1"
    with pytest.raises(SignatureError):
        verify_signature(standard_secret(b"neither"), headers(NOW, old, new), BODY, now=NOW)


def test_unknown_versions_are_ignored_beside_v1() -> None:
    good = library_signature(SECRET, "evt_1", NOW, BODY)
    assert verify_signature(SECRET, headers(NOW, "v0,deadbeef", good, "v1a,cafe"), BODY, now=NOW).id == "evt_1"


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        (None, "malformed_signature"),
        ({}, "malformed_signature"),
        ({"webhook-id": "evt_1", "webhook-timestamp": str(NOW)}, "malformed_signature"),
        ({"webhook-timestamp": str(NOW), "webhook-signature": "v1,abc"}, "malformed_signature"),
        ({"webhook-id": "evt_1", "webhook-timestamp": "soon", "webhook-signature": "v1,abc"}, "malformed_signature"),
        # the crashes reported: a superscript digit, 400 digits, a non-ASCII signature
        ({"webhook-id": "evt_1", "webhook-timestamp": "\u00b2", "webhook-signature": "v1,abc"}, "malformed_signature"),
        ({"webhook-id": "evt_1", "webhook-timestamp": "9" * 400, "webhook-signature": "v1,a"}, "malformed_signature"),
        (
            {"webhook-id": "evt_1", "webhook-timestamp": str(NOW), "webhook-signature": "v1,\u00e9"},
            "malformed_signature",
        ),
        (
            {"webhook-id": "evt_1", "webhook-timestamp": str(NOW), "webhook-signature": "v1\u00e9"},
            "malformed_signature",
        ),
        (
            {"webhook-id": "evt_1", "webhook-timestamp": str(NOW), "webhook-signature": "v1,\u00e9 v1,abc"},
            "signature_mismatch",
        ),
        ({"webhook-id": "é", "webhook-timestamp": str(NOW), "webhook-signature": "v1,abc"}, "malformed_signature"),
        ({"webhook-id": 5, "webhook-timestamp": str(NOW), "webhook-signature": "v1,abc"}, "malformed_signature"),
    ],
)
def test_a_malformed_header_is_refused(bad: Any, code: str) -> None:
    with pytest.raises(SignatureError) as caught:
        verify_signature(SECRET, bad, BODY, now=NOW)
    assert caught.value.code == code


def test_a_single_header_string_is_a_programming_error() -> None:
    with pytest.raises(TypeError, match="headers"):
        verify_signature(SECRET, "v1,abc", BODY, now=NOW)  # type: ignore[arg-type]


def test_a_signed_body_that_is_not_an_event_object_is_invalid() -> None:
    for body in (b"[1, 2]", b"not json", b"\xff"):
        signed = {
            "webhook-id": "evt_1",
            "webhook-timestamp": str(NOW),
            "webhook-signature": sign(SECRET, "evt_1", NOW, body),
        }
        with pytest.raises(InvalidEvent):
            verify_signature(SECRET, signed, body, now=NOW)


def test_without_now_the_current_time_is_used() -> None:
    import time

    fresh = int(time.time())
    assert verify_signature(SECRET, headers(fresh), BODY).id == "evt_1"
    with pytest.raises(SignatureError):
        verify_signature(SECRET, headers(NOW - 86_400), BODY)


# --- fuzzing: whatever the headers, a documented error ----------------------------------------

header_text = st.one_of(
    st.text(max_size=60),
    st.text(alphabet="0123456789\u00b2\u0663\uff11 .-+e", max_size=500),
    st.builds(lambda n: "9" * n, st.integers(0, 600)),
    st.builds(
        lambda parts: " ".join(parts), st.lists(st.text(alphabet="v1,=+/abcAB\u00e9\u200b ", max_size=20), max_size=5)
    ),
    st.binary(max_size=30),
    st.none(),
    st.integers(),
)
names = st.sampled_from(["webhook-id", "Webhook-Timestamp", "WEBHOOK-SIGNATURE", "webhook-id ", "x-other"])
fuzzed_headers = st.one_of(
    st.dictionaries(names, header_text, max_size=4),
    st.builds(
        lambda i, t, s: {"webhook-id": i, "webhook-timestamp": t, "webhook-signature": s},
        header_text,
        header_text,
        header_text,
    ),
    st.builds(
        lambda s: {"webhook-id": "evt_1", "webhook-timestamp": str(NOW), "webhook-signature": s},
        header_text,
    ),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fuzzed_headers, st.binary(max_size=50))
def test_fuzzed_headers_end_in_a_documented_error(fuzzed: dict[str, Any], body: bytes) -> None:
    try:
        verify_signature(SECRET, fuzzed, body, now=NOW)
    except SignatureError as refused:
        assert refused.code in CODES
    except InvalidEvent:
        pytest.fail("an unsigned body was parsed")
    else:
        pytest.fail("a fuzzed header verified")
