"""A Python client for reviewqueue's JSON API, and the check for its webhooks.

    from reviewqueue.client import Client, Backpressure, verify_signature

    with Client("https://reviewqueue.example", token) as rq:
        pushed = rq.push_output(idempotency_key="run-17", task_description=..., final_output=...)
        if isinstance(pushed, Backpressure):
            ...  # wait pushed.retry_after seconds, push again with the same key
        else:
            item = rq.wait_for_verdict(pushed.item_id, timeout=3600)

``AsyncClient`` has the same calls for asyncio code (``await rq.push_output(...)``).
It needs httpx and nothing else of the server's: no Django, no Celery.
docs/API.md ("Python client") describes every call, result and error.
"""

from __future__ import annotations

from .aio import AsyncClient
from .core import DEFAULT_RETRY_AFTER, Client
from .errors import (
    ApiError,
    ConnectionFailed,
    Forbidden,
    InvalidEvent,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    ReviewqueueError,
    SignatureError,
    Unauthorized,
    Unavailable,
    VerdictTimeout,
)
from .results import DECIDED_STATUSES, Backpressure, Event, Item, ItemPage, Output, Run, Verdict
from .signatures import (
    DEFAULT_TOLERANCE,
    EVENT_ID_HEADER,
    ID_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    standard_secret,
    verify_signature,
)

__all__ = [
    "DECIDED_STATUSES",
    "DEFAULT_RETRY_AFTER",
    "DEFAULT_TOLERANCE",
    "EVENT_ID_HEADER",
    "ID_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "ApiError",
    "AsyncClient",
    "Backpressure",
    "Client",
    "ConnectionFailed",
    "Event",
    "Forbidden",
    "InvalidEvent",
    "InvalidRequest",
    "Item",
    "ItemPage",
    "NotFound",
    "Output",
    "PayloadTooLarge",
    "ReviewqueueError",
    "Run",
    "SignatureError",
    "Unauthorized",
    "Unavailable",
    "Verdict",
    "VerdictTimeout",
    "standard_secret",
    "verify_signature",
]
