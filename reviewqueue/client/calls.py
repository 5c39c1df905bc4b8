"""Each API call as data: what to send, and how to read the answer.

``Client`` (blocking) and ``AsyncClient`` (asyncio) differ only in how they
put a request on the wire and how they sleep; everything else (the request
each call builds, the backpressure rule, the typed errors, the polling
schedule of ``wait_for_verdict``) lives here once, so the two cannot drift.
Nothing here does any I/O.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote, urlencode

import httpx

from .errors import ApiError, ConnectionFailed, ReviewqueueError, Unavailable, VerdictTimeout, api_error
from .results import Backpressure, Item, ItemPage, Output, Run

log = logging.getLogger("reviewqueue.client.core")

# What a 503 or 429 that names no Retry-After is taken to mean; the server's
# own answers (a lost database, an unreachable broker) say 5 s.
DEFAULT_RETRY_AFTER = 5.0
USER_AGENT = "reviewqueue-client/1"

R = TypeVar("R")


def retry_after(response: httpx.Response) -> float | None:
    """The Retry-After header in seconds: a number, or an HTTP date from now.
    None when absent or unreadable."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _json(response: httpx.Response) -> dict[str, Any]:
    """The body as a dict; an empty dict when it is not a JSON object (a
    proxy's HTML error page, say), so the status still decides what happens."""
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _backpressure(response: httpx.Response, *, run_id: str | None = None) -> Backpressure | None:
    """A 503 or 429 that asks to be repeated later (it names a Retry-After, or
    says ``backoff``), as a value. Other refusals are errors: a 503 naming no
    time (``sandbox_unavailable``) will not change by waiting."""
    if response.status_code not in (429, 503):
        return None
    body = _json(response)
    wait = retry_after(response)
    if wait is None and not body.get("backoff"):
        return None
    return Backpressure(
        retry_after=DEFAULT_RETRY_AFTER if wait is None else wait,
        error=str(body.get("error") or ""),
        detail=str(body.get("detail") or ""),
        status_code=response.status_code,
        run_id=str(body.get("run_id") or "") or run_id,
        raw=body,
    )


def ok(response: httpx.Response) -> dict[str, Any]:
    """The JSON of a 2xx answer; any other answer raises its typed ApiError."""
    body = _json(response)
    if 200 <= response.status_code < 300:
        return body
    raise api_error(response.status_code, body, retry_after=retry_after(response))


def _parsed(parse: Callable[[dict[str, Any]], R]) -> Callable[[httpx.Response], R]:
    """A reader for a 2xx body as its result type. One that lacks what the
    API always sends (a proxy's page answered in the server's place, say) is
    an ApiError, not a KeyError from deep inside the client."""

    def read(response: httpx.Response) -> R:
        body = ok(response)
        try:
            return parse(body)
        except (KeyError, TypeError, ValueError) as exc:
            detail = f"the answer is not what {response.request.url.path} sends: {exc!r}"
            raise ApiError(response.status_code, {"error": "unexpected_answer", "detail": detail}) from None

    return read


def _or_backpressure(
    read: Callable[[httpx.Response], R], *, run_id: str | None = None, key: str | None = None
) -> Callable[[httpx.Response], R | Backpressure]:
    def answer(response: httpx.Response) -> R | Backpressure:
        pressure = _backpressure(response, run_id=run_id)
        if pressure is None:
            return read(response)
        if key is not None:
            log.info("output held back", extra={"idempotency_key": key, "retry_after": pressure.retry_after})
        return pressure

    return answer


def _present(**fields: Any) -> dict[str, Any]:
    """Only the fields the caller gave: the server's defaults apply to the rest."""
    return {name: value for name, value in fields.items() if value is not None}


@dataclass(frozen=True)
class Call(Generic[R]):
    """One request (``method``, ``path`` below the base URL, JSON ``body``)
    and the function that turns its answer into the call's result."""

    method: str
    path: str
    body: dict[str, Any] | None
    read: Callable[[httpx.Response], R]


def push_output(
    *,
    idempotency_key: str,
    task_description: str,
    final_output: str,
    cutoff_reason: str | None = None,
    last_error: str | None = None,
    attempt_count: int | None = None,
    priority: int | None = None,
    callback_url: str | None = None,
    queue: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    **fields: Any,
) -> Call[Output | Backpressure]:
    payload = _present(
        idempotency_key=idempotency_key,
        task_description=task_description,
        final_output=final_output,
        cutoff_reason=cutoff_reason,
        last_error=last_error,
        attempt_count=attempt_count,
        priority=priority,
        callback_url=callback_url,
        queue=queue,
        metadata=dict(metadata) if metadata is not None else None,
        **fields,
    )
    read = _or_backpressure(_parsed(Output.from_json), key=idempotency_key)
    return Call("POST", "/api/outputs", payload, read)


def submit_task(task: Mapping[str, Any], *, run_id: str | None = None, **fields: Any) -> Call[Run | Backpressure]:
    # The run id is chosen here, not by the server, so that a Backpressure
    # answer (the run is recorded but not yet queued) names the id to repeat with.
    chosen = run_id or f"client-{uuid.uuid4().hex}"
    payload = _present(task=dict(task), run_id=chosen, **fields)
    return Call("POST", "/api/tasks", payload, _or_backpressure(_parsed(Run.from_json), run_id=chosen))


def item(item_id: int) -> Call[Item]:
    return Call("GET", f"/api/items/{int(item_id)}", None, _parsed(Item.from_json))


# What GET /api/items filters on; a name outside these is a typo, refused
# here rather than sent and silently ignored.
ITEM_FILTERS = ("queue", "status", "decision", "label", "run", "version", "since", "until", "q", "after")


def items(**filters: Any) -> Call[ItemPage]:
    """``filters`` as the query string; None leaves one out, a date is sent
    as YYYY-MM-DD. An unknown filter raises TypeError."""
    unknown = sorted(set(filters) - set(ITEM_FILTERS))
    if unknown:
        raise TypeError(f"items() has no filter {', '.join(unknown)}; it filters on {', '.join(ITEM_FILTERS)}")
    given = {
        name: value.isoformat() if hasattr(value, "isoformat") else value for name, value in _present(**filters).items()
    }
    return Call("GET", "/api/items" + (f"?{urlencode(given)}" if given else ""), None, _parsed(ItemPage.from_json))


def run(run_id: str) -> Call[Run]:
    return Call("GET", f"/api/tasks/{quote(run_id, safe='')}", None, _parsed(Run.from_json))


def stats(queue: str | None = None) -> Call[dict[str, Any]]:
    path = "/api/stats" + (f"?{urlencode({'queue': queue})}" if queue else "")
    return Call("GET", path, None, ok)


def connection_failed(method: str, url: str, exc: Exception) -> ConnectionFailed:
    return ConnectionFailed(f"{method} {url}: {exc}")


class VerdictPoll:
    """The schedule of ``wait_for_verdict``: after each poll, how long to
    wait before the next, or the decided item to return, or the error to raise.

    Between polls it waits ``poll_interval``, doubling up to
    ``max_interval``, each wait jittered (half fixed, half random) so many
    producers do not poll in step. A 503 or 429 is waited out for exactly
    its Retry-After (bounded by the time left), and a dropped connection is
    retried like a slow answer; any other error is raised at once.
    """

    RETRIED = (Unavailable, ConnectionFailed)

    def __init__(
        self,
        item_id: int,
        timeout: float,
        *,
        poll_interval: float,
        max_interval: float,
        clock: Callable[[], float],
        rng: random.Random,
    ) -> None:
        self.item_id = item_id
        self.timeout = timeout
        self.interval = poll_interval
        self.max_interval = max_interval
        self.clock = clock
        self.rng = rng
        self.deadline = clock() + timeout
        self.last_status: str | None = None

    def after(self, answer: Item | ReviewqueueError) -> float | None:
        """None when ``answer`` is the decided item; else the seconds to sleep."""
        if isinstance(answer, Unavailable) and answer.retry_after is not None:
            pause = answer.retry_after
        elif isinstance(answer, self.RETRIED):
            pause = self._jitter(self.interval)
        elif isinstance(answer, ReviewqueueError):
            raise answer
        elif answer.decided:
            return None
        else:
            self.last_status = answer.status
            pause = self._jitter(self.interval)
        self.interval = min(self.interval * 2, self.max_interval)
        remaining = self.deadline - self.clock()
        if remaining <= 0:
            raise VerdictTimeout(self.item_id, self.timeout, self.last_status)
        return min(pause, remaining)

    def _jitter(self, interval: float) -> float:
        return interval / 2 + self.rng.uniform(0, interval / 2)
