"""verify_signature against signatures computed here, independently of the
client, the way the server signs: HMAC-SHA256 of "<t>.<raw body>"."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from reviewqueue.client import Event, InvalidEvent, SignatureError, verify_signature

SECRET = "whsec_test_0123456789"
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


def sign(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def header(timestamp: int = NOW, *signatures: str) -> str:
    return ",".join([f"t={timestamp}", *(f"v1={s}" for s in signatures or [sign(SECRET, timestamp, BODY)])])


def test_a_correct_signature_returns_the_event() -> None:
    event = verify_signature(SECRET, header(), BODY, now=NOW)
    assert isinstance(event, Event)
    assert (event.id, event.type, event.item_id, event.run_id) == ("evt_1", "item.decided", 42, None)
    assert event.data["decision"] == "reject" and event.data["extra"] == 1
    assert event.raw["created"] == "2026-05-28T20:26:40Z"


def test_the_secret_may_be_bytes_and_the_body_text() -> None:
    assert verify_signature(SECRET.encode(), header(), BODY.decode(), now=NOW).id == "evt_1"


def test_a_tampered_body_is_refused() -> None:
    tampered = BODY.replace(b'"reject"', b'"approve"')
    with pytest.raises(SignatureError) as caught:
        verify_signature(SECRET, header(), tampered, now=NOW)
    assert caught.value.code == "signature_mismatch"


def test_another_secret_is_refused() -> None:
    with pytest.raises(SignatureError) as caught:
        verify_signature("whsec_other", header(), BODY, now=NOW)
    assert caught.value.code == "signature_mismatch"


def test_a_changed_timestamp_is_refused_even_within_the_tolerance() -> None:
    signed_at_now = sign(SECRET, NOW, BODY)
    with pytest.raises(SignatureError) as caught:
        verify_signature(SECRET, header(NOW + 1, signed_at_now), BODY, now=NOW)
    assert caught.value.code == "signature_mismatch"


@pytest.mark.parametrize("age", [301, -301, 10_000])
def test_a_timestamp_outside_the_tolerance_is_stale(age: int) -> None:
    with pytest.raises(SignatureError) as caught:
        verify_signature(SECRET, header(NOW - age), BODY, now=NOW)
    assert caught.value.code == "stale_timestamp"


def test_the_tolerance_is_inclusive_and_settable() -> None:
    assert verify_signature(SECRET, header(NOW - 300), BODY, now=NOW).id == "evt_1"
    with pytest.raises(SignatureError):
        verify_signature(SECRET, header(NOW - 60), BODY, tolerance=30, now=NOW)


def test_during_rotation_any_one_v1_matches() -> None:
    old, new = sign("whsec_old", NOW, BODY), sign(SECRET, NOW, BODY)
    assert verify_signature(SECRET, header(NOW, old, new), BODY, now=NOW).id == "evt_1"
    assert verify_signature("whsec_old", header(NOW, old, new), BODY, now=NOW).id == "evt_1"
    with pytest.raises(SignatureError):
        verify_signature("whsec_neither", header(NOW, old, new), BODY, now=NOW)


def test_unknown_schemes_are_ignored_beside_v1() -> None:
    mixed = f"t={NOW},v0=deadbeef,v1={sign(SECRET, NOW, BODY)},v2=cafe"
    assert verify_signature(SECRET, mixed, BODY, now=NOW).id == "evt_1"


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        (None, "malformed_signature"),
        ("", "malformed_signature"),
        ("v1=abc", "malformed_signature"),
        (f"t={NOW}", "malformed_signature"),
        ("t=soon,v1=abc", "malformed_signature"),
        (f"t={NOW},t={NOW},v1=abc", "malformed_signature"),
        ("garbage", "malformed_signature"),
        (f"t={NOW},v1=\u00e9", "signature_mismatch"),
    ],
)
def test_a_malformed_header_is_refused(bad: str | None, code: str) -> None:
    with pytest.raises(SignatureError) as caught:
        verify_signature(SECRET, bad, BODY, now=NOW)
    assert caught.value.code == code


def test_a_signed_body_that_is_not_an_event_object_is_invalid() -> None:
    for body in (b"[1, 2]", b"not json", b"\xff"):
        with pytest.raises(InvalidEvent):
            verify_signature(SECRET, header(NOW, sign(SECRET, NOW, body)), body, now=NOW)


def test_without_now_the_current_time_is_used() -> None:
    import time

    fresh = int(time.time())
    assert verify_signature(SECRET, header(fresh, sign(SECRET, fresh, BODY)), BODY).id == "evt_1"
    with pytest.raises(SignatureError):
        verify_signature(SECRET, header(NOW - 86_400, sign(SECRET, NOW - 86_400, BODY)), BODY)
