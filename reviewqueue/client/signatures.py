"""Checking a webhook's signature: the Standard Webhooks scheme.

Every delivery carries three headers:

- ``webhook-id``: the event's id (the body's ``id``), the same on every retry;
- ``webhook-timestamp``: when this attempt was signed, in unix seconds;
- ``webhook-signature``: ``v1,<base64>``, a space-separated list while a
  secret is being rotated; each is the base64 HMAC-SHA256, keyed with the
  secret's bytes, of ``"<webhook-id>.<webhook-timestamp>.<raw body>"``.

The id and the timestamp are inside the signed text, so a captured delivery
cannot be replayed later (the timestamp), nor passed off as a new event with
another id (the id): a receiver deduplicates on the id it verified.

A secret is ``whsec_`` and the base64 of the key bytes. Secrets issued before
this scheme are URL-safe base64 without padding; both alphabets are read, so
an old secret keeps its key. ``standard_secret`` spells it the way other
Standard Webhooks libraries read it.

Every malformed header (missing, repeated, non-ASCII, absurdly long, not a
number) ends in ``SignatureError`` with one of the three documented codes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import time
from collections.abc import Mapping
from typing import Any

from .errors import InvalidEvent, SignatureError
from .results import Event

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
# Still name the old header, so code importing it keeps working for a release.
EVENT_ID_HEADER = ID_HEADER
SECRET_PREFIX = "whsec_"
DEFAULT_TOLERANCE = 300
# Bounds that keep a hostile header cheap to refuse: an id, a timestamp that
# fits a float exactly, and a handful of signatures (two during a rotation).
MAX_ID_LENGTH = 256
MAX_SIGNATURE_HEADER = 4096
_TIMESTAMP = re.compile(r"[0-9]{1,12}", re.ASCII)
_URLSAFE_TO_STANDARD = str.maketrans("-_", "+/")


def signing_key(secret: str | bytes) -> bytes:
    """The HMAC key a secret stands for: bytes are used as they are; text is
    ``whsec_`` (optional) and base64, standard or URL-safe, padding optional.
    Raises ValueError for text that is not base64."""
    if isinstance(secret, bytes):
        return secret
    text = secret.strip()
    text = text.removeprefix(SECRET_PREFIX).rstrip("=").translate(_URLSAFE_TO_STANDARD)
    if not text or len(text) % 4 == 1 or not text.isascii():
        raise ValueError("a webhook secret is whsec_ followed by base64")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a webhook secret is whsec_ followed by base64") from None


def standard_secret(secret: str | bytes) -> str:
    """The same secret as other Standard Webhooks libraries spell it:
    ``whsec_`` and standard, padded base64 of the same key."""
    return SECRET_PREFIX + base64.b64encode(signing_key(secret)).decode("ascii")


def sign(secret: str | bytes, event_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` signature of ``"<id>.<timestamp>.<body>"``."""
    signed = f"{event_id}.{timestamp}.".encode() + body
    digest = hmac.new(signing_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def _header(headers: Mapping[str, Any], name: str) -> str:
    """The one value of header ``name`` (any case), as text; SignatureError
    when it is missing, repeated or not text."""
    found: list[Any] = []
    items = headers.items()
    for key, value in items:
        key_text = key.decode("latin-1") if isinstance(key, bytes) else key
        if isinstance(key_text, str) and key_text.strip().lower() == name:
            found.append(value)
    if not found:
        raise SignatureError(f"no {name} header", code="malformed_signature")
    if len(found) > 1:
        raise SignatureError(f"more than one {name} header", code="malformed_signature")
    value = found[0]
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if not isinstance(value, str):
        raise SignatureError(f"the {name} header is not text", code="malformed_signature")
    return value.strip()


def _read(headers: Mapping[str, Any] | None) -> tuple[str, int, list[bytes]]:
    """The signed id, the timestamp and every v1 signature (base64, as bytes).
    Other versions (a future v2) are skipped, so a newer server's header
    still verifies here by its v1 entries."""
    if headers is None:
        raise SignatureError("no webhook headers", code="malformed_signature")
    if isinstance(headers, (str, bytes)) or not hasattr(headers, "items"):
        raise TypeError("pass the request's headers (a mapping of names to values), not one header")
    event_id = _header(headers, ID_HEADER)
    if not event_id or len(event_id) > MAX_ID_LENGTH or not event_id.isascii() or not event_id.isprintable():
        raise SignatureError("the webhook-id header is not a printable ASCII id", code="malformed_signature")
    stamp = _header(headers, TIMESTAMP_HEADER)
    if not _TIMESTAMP.fullmatch(stamp):
        raise SignatureError("the webhook-timestamp header is not unix seconds", code="malformed_signature")
    raw = _header(headers, SIGNATURE_HEADER)
    if len(raw) > MAX_SIGNATURE_HEADER:
        raise SignatureError("the webhook-signature header is too long", code="malformed_signature")
    signatures = []
    for entry in raw.split():
        version, sep, value = entry.partition(",")
        if sep and version == "v1" and value.isascii():
            signatures.append(value.encode("ascii"))
    if not signatures:
        raise SignatureError("the webhook-signature header has no v1 signature", code="malformed_signature")
    return event_id, int(stamp), signatures


def verify_signature(
    secret: str | bytes,
    headers: Mapping[str, Any] | None,
    body: bytes | str,
    tolerance: float = DEFAULT_TOLERANCE,
    *,
    now: float | None = None,
) -> Event:
    """Check that ``body`` (the request's raw bytes, before any JSON parsing)
    was signed with ``secret``, under the id and timestamp its ``headers``
    name (any mapping; names in any case), less than ``tolerance`` seconds
    from ``now``; return the event it carries. ``Event.id`` is the signed id:
    deduplicate on it.

    Raises ``SignatureError`` (code ``malformed_signature``,
    ``stale_timestamp`` or ``signature_mismatch``) when it was not: answer the
    request with 400 and act on nothing. Raises ``InvalidEvent`` when a
    correctly signed body is not an event object. Pure: safe to call again.
    """
    event_id, timestamp, signatures = _read(headers)
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise SignatureError(f"the signature's timestamp is more than {tolerance:g} s from now", code="stale_timestamp")
    raw = body.encode() if isinstance(body, str) else body
    expected = sign(secret, event_id, timestamp, raw).removeprefix("v1,").encode("ascii")
    # Every entry is compared, in constant time each, so the time taken says
    # nothing about which entry or how much of it matched.
    matched = [hmac.compare_digest(expected, candidate) for candidate in signatures]
    if not any(matched):
        raise SignatureError("no signature matches this body and secret", code="signature_mismatch")
    event = _event(raw)
    if event.id != event_id:
        raise InvalidEvent("the body's id is not the signed webhook-id")
    return event


def _event(raw: bytes) -> Event:
    try:
        parsed = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise InvalidEvent("the signed body is not JSON") from None
    if not isinstance(parsed, dict):
        raise InvalidEvent("the signed body is not a JSON object")
    return Event.from_json(parsed)
