"""Checking a webhook's ``Reviewqueue-Signature`` header.

The header is ``t=<unix seconds>,v1=<hex>[,v1=<hex>...]``: each ``v1`` is the
HMAC-SHA256, keyed with a webhook secret, of ``"<t>.<raw body>"``. While a
secret is being rotated the server signs with the old and the new secret, so
any one matching ``v1`` is enough. The timestamp is inside the signed text,
so an old request replayed later fails the tolerance check, and a changed
timestamp fails the HMAC.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time

from .errors import InvalidEvent, SignatureError
from .results import Event

SIGNATURE_HEADER = "Reviewqueue-Signature"
EVENT_ID_HEADER = "Reviewqueue-Event-Id"
DEFAULT_TOLERANCE = 300


def _parse(header: str) -> tuple[str, list[str]]:
    """The timestamp as sent (it is signed as text) and every v1 signature.
    Other schemes (a future v2) are skipped, so a newer server's header still
    verifies here by its v1 entries."""
    timestamps: list[str] = []
    signatures: list[str] = []
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            continue
        if key == "t":
            timestamps.append(value.strip())
        elif key == "v1":
            signatures.append(value.strip())
    if len(timestamps) != 1 or not timestamps[0].isdigit():
        raise SignatureError("the signature header needs exactly one numeric t=", code="malformed_signature")
    if not signatures:
        raise SignatureError("the signature header has no v1= signature", code="malformed_signature")
    return timestamps[0], signatures


def verify_signature(
    secret: str | bytes,
    header: str | None,
    body: bytes | str,
    tolerance: float = DEFAULT_TOLERANCE,
    *,
    now: float | None = None,
) -> Event:
    """Check that ``body`` (the request's raw bytes, before any JSON parsing)
    was signed with ``secret`` less than ``tolerance`` seconds from ``now``,
    and return the event it carries.

    Raises ``SignatureError`` (code ``malformed_signature``,
    ``stale_timestamp`` or ``signature_mismatch``) when it was not: answer the
    request with 400 and act on nothing. Raises ``InvalidEvent`` when a
    correctly signed body is not a JSON object. Pure: safe to call again.
    """
    if not header:
        raise SignatureError(f"no {SIGNATURE_HEADER} header", code="malformed_signature")
    timestamp, signatures = _parse(header)
    current = time.time() if now is None else now
    if abs(current - int(timestamp)) > tolerance:
        raise SignatureError(f"the signature's timestamp is more than {tolerance:g} s from now", code="stale_timestamp")
    key = secret.encode() if isinstance(secret, str) else secret
    raw = body.encode() if isinstance(body, str) else body
    expected = hmac.new(key, timestamp.encode() + b"." + raw, hashlib.sha256).hexdigest()
    # Every entry is compared, in constant time each, so the time taken says
    # nothing about which entry or how much of it matched.
    matched = [hmac.compare_digest(expected.encode(), c.lower().encode()) for c in signatures]
    if not any(matched):
        raise SignatureError("no signature matches this body and secret", code="signature_mismatch")
    return _event(raw)


def _event(raw: bytes) -> Event:
    try:
        parsed = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise InvalidEvent("the signed body is not JSON") from None
    if not isinstance(parsed, dict):
        raise InvalidEvent("the signed body is not a JSON object")
    return Event.from_json(parsed)
