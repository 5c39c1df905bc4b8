"""The client's exceptions: one base class, and one subclass per answer a
caller may want to handle on its own. Each carries the API's error code
(the ``error`` key of its JSON body) so a caller can branch on the code the
server documents rather than on a message.

Backpressure is deliberately not here: a full queue is a normal answer a
producer acts on, so ``push_output`` and ``submit_task`` return it as a value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class ReviewqueueError(Exception):
    """Anything the client could not do; ``code`` says what, in the API's words."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


class ApiError(ReviewqueueError):
    """The API answered with an error status, or with a 2xx that is not what
    the API sends (code ``unexpected_answer``). ``body`` is its JSON as sent
    (unknown keys included); ``fields`` names the offending fields of a 400."""

    def __init__(self, status_code: int, body: Mapping[str, Any], *, retry_after: float | None = None) -> None:
        code = str(body.get("error") or f"http_{status_code}")
        detail = str(body.get("detail") or "")
        raw_fields = body.get("fields")
        fields = {str(k): str(v) for k, v in raw_fields.items()} if isinstance(raw_fields, Mapping) else {}
        # The message names every refused field and what is wrong with it, so a
        # logged exception is enough to fix the request.
        said = "; ".join(f"{name}: {message}" for name, message in fields.items())
        said = "; ".join(part for part in (said, detail if detail not in fields.values() else "") if part)
        super().__init__(f"{status_code} {code}" + (f": {said}" if said else ""), code=code)
        self.status_code = status_code
        self.detail = detail
        self.body: dict[str, Any] = dict(body)
        self.fields: dict[str, str] = fields
        self.retry_after = retry_after


class InvalidRequest(ApiError):
    """400: the request named a field the server refused (see ``fields``)."""


class Unauthorized(ApiError):
    """401: the token is missing, wrong or revoked."""


class Forbidden(ApiError):
    """403: the token lacks a scope; ``missing_scope`` names the one to ask an operator for."""

    @property
    def missing_scope(self) -> str:
        return str(self.body.get("missing_scope") or "")


class NotFound(ApiError):
    """404: no such item or run, or it is another producer's (the API does not say which)."""


class PayloadTooLarge(ApiError):
    """413: the body is over the server's limit; nothing was stored."""


class Unavailable(ApiError):
    """503 or 429 from a read: the server asks to be asked again after
    ``retry_after`` seconds (None when it did not say)."""


class ConnectionFailed(ReviewqueueError):
    """No answer at all: the server could not be reached or the connection broke."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="connection_failed")


class VerdictTimeout(ReviewqueueError):
    """``wait_for_verdict`` ran out of time before the item was decided.
    ``last_status`` is the status seen last (None if no poll got an answer)."""

    def __init__(self, item_id: int, timeout: float, last_status: str | None) -> None:
        super().__init__(
            f"item {item_id} not decided within {timeout:g} s (last status: {last_status or 'unknown'})",
            code="verdict_timeout",
        )
        self.item_id = item_id
        self.last_status = last_status


class SignatureError(ReviewqueueError):
    """A webhook did not prove it came from the server: reject the request.
    ``code`` is ``malformed_signature``, ``stale_timestamp`` or ``signature_mismatch``."""


class InvalidEvent(ReviewqueueError):
    """A correctly signed webhook body that is not an event object."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="invalid_event")


_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    413: PayloadTooLarge,
    429: Unavailable,
    503: Unavailable,
}


def api_error(status_code: int, body: Mapping[str, Any], *, retry_after: float | None = None) -> ApiError:
    """The exception for an error answer: the subclass its status names, else ApiError."""
    return _BY_STATUS.get(status_code, ApiError)(status_code, body, retry_after=retry_after)
