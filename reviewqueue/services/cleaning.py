"""Input hygiene: text and JSON safe to store in every database.

Pure functions over values; no database access, no lock.
"""

from __future__ import annotations

from typing import Any

TRUNCATION_MARKER = "\n\n[reviewqueue: output truncated, {omitted} of {total} characters omitted]"


def clean_text(value: str | bytes | None, *, limit: int | None = None) -> tuple[str, bool]:
    """Text safe to store: bytes and invalid UTF-8 (lone surrogates) become
    U+FFFD, NUL (which PostgreSQL refuses) too; longer than ``limit`` is cut
    with a visible marker. Returns (text, truncated)."""
    if value is None:
        return "", False
    if isinstance(value, bytes):
        text = value.decode("utf-8", errors="replace")
    else:
        text = str(value)
        if not text.isascii():  # O(1) for str: most text needs no further look
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                # Lone surrogates (invalid UTF-8 smuggled through JSON escapes) become U+FFFD.
                text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    if limit is not None and len(text) > limit:
        marker = TRUNCATION_MARKER.format(omitted=len(text) - limit, total=len(text))
        return text[:limit] + marker, True
    return text, False


def clean_json(value: Any) -> Any:
    """A JSON-like value with every string (keys too) passed through clean_text:
    PostgreSQL's jsonb refuses NUL and lone surrogates."""
    if isinstance(value, str):
        return clean_text(value)[0]
    if isinstance(value, dict):
        return {clean_text(str(k))[0]: clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    return value


def short_text(value: object, limit: int) -> str:
    """A short identifying field (a task id, a producer name): cleaned, then cut
    at ``limit`` without a marker."""
    return clean_text(str(value))[0][:limit]
