"""The producer's side of the JSON API over httpx: push an output, submit a
task, read an item or a run, wait for a verdict.

Nothing here imports Django or Celery (tests/test_layers.py checks it), so a
producer installs httpx and this package, not the server's dependencies.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Self, TypeVar
from urllib.parse import quote

import httpx

from .errors import ApiError, ConnectionFailed, Unavailable, VerdictTimeout, api_error
from .results import Backpressure, Item, Output, Run

log = logging.getLogger(__name__)

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


def _parsed(parse: Callable[[dict[str, Any]], R], body: dict[str, Any], response: httpx.Response) -> R:
    """A 2xx body as its result type; one that lacks what the API always sends
    (a proxy's page answered in the server's place, say) is an ApiError, not
    a KeyError from deep inside the client."""
    try:
        return parse(body)
    except (KeyError, TypeError, ValueError) as exc:
        detail = f"the answer is not what {response.request.url.path} sends: {exc!r}"
        raise ApiError(response.status_code, {"error": "unexpected_answer", "detail": detail}) from None


def _present(**fields: Any) -> dict[str, Any]:
    """Only the fields the caller gave: the server's defaults apply to the rest."""
    return {name: value for name, value in fields.items() if value is not None}


class Client:
    """A producer's connection to one reviewqueue server.

    ``Client(base_url, token)``; use it as a context manager, or call
    ``close()``. ``sleep``, ``clock`` and ``rng`` are what ``wait_for_verdict``
    waits, times and jitters with; pass your own to run it under another
    scheduler. Safe to share between threads as httpx.Client is.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        http: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        # A caller's own httpx.Client (proxies, TLS, transports) stays theirs to close.
        self._owns_http = http is None
        self._http = http or httpx.Client(timeout=timeout)
        self._headers = {"Authorization": f"Bearer {token}", "User-Agent": USER_AGENT}
        self._sleep = sleep
        self._clock = clock
        self._rng = rng or random.Random()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    # --- transport --------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> httpx.Response:
        url = self.base_url + path
        try:
            return self._http.request(method, url, json=body, headers=self._headers)
        except httpx.TransportError as exc:
            raise ConnectionFailed(f"{method} {url}: {exc}") from exc

    @staticmethod
    def _ok(response: httpx.Response) -> dict[str, Any]:
        """The JSON of a 2xx answer; any other answer raises its typed ApiError."""
        body = _json(response)
        if 200 <= response.status_code < 300:
            return body
        raise api_error(response.status_code, body, retry_after=retry_after(response))

    # --- the API ----------------------------------------------------------------------------

    def push_output(
        self,
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
        **fields: Any,
    ) -> Output | Backpressure:
        """Push one cut-off output for review (``POST /api/outputs``).

        Returns ``Output`` when the server stored it (check ``backoff`` and
        ``outcome``), or ``Backpressure`` when it asks to be asked again later:
        wait ``retry_after`` seconds and repeat with the same idempotency key.
        Safe to repeat: the key makes a second push a ``duplicate`` of the
        first. Other fields the API takes (``priority``, ``task_id``,
        ``failing_checks``, ...) pass through ``fields`` as sent.
        """
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
            **fields,
        )
        response = self._request("POST", "/api/outputs", payload)
        pressure = _backpressure(response)
        if pressure is not None:
            log.info(
                "output held back", extra={"idempotency_key": idempotency_key, "retry_after": pressure.retry_after}
            )
            return pressure
        return _parsed(Output.from_json, self._ok(response), response)

    def submit_task(
        self,
        task: Mapping[str, Any],
        *,
        run_id: str | None = None,
        agent: str | None = None,
        callback_url: str | None = None,
        queue: str | None = None,
        **fields: Any,
    ) -> Run | Backpressure:
        """Submit a task for a worker to run (``POST /api/tasks``).

        Without ``run_id`` one is chosen here, not by the server, so that a
        ``Backpressure`` answer (the run is recorded but not yet queued) names
        the run id to repeat the call with. Safe to repeat with the same run id:
        the server starts the run once.
        """
        chosen = run_id or f"client-{uuid.uuid4().hex}"
        payload = _present(
            task=dict(task), run_id=chosen, agent=agent, callback_url=callback_url, queue=queue, **fields
        )
        response = self._request("POST", "/api/tasks", payload)
        pressure = _backpressure(response, run_id=chosen)
        if pressure is not None:
            return pressure
        return _parsed(Run.from_json, self._ok(response), response)

    def item(self, item_id: int) -> Item:
        """An item's status and verdict (``GET /api/items/{id}``). Raises
        ``NotFound`` for another producer's item, ``Unavailable`` (with
        ``retry_after``) when the server asks to be asked later."""
        response = self._request("GET", f"/api/items/{int(item_id)}")
        return _parsed(Item.from_json, self._ok(response), response)

    def run(self, run_id: str) -> Run:
        """A submitted run's outcome and item (``GET /api/tasks/{run_id}``)."""
        response = self._request("GET", f"/api/tasks/{quote(run_id, safe='')}")
        return _parsed(Run.from_json, self._ok(response), response)

    def stats(self) -> dict[str, Any]:
        """The queue's statistics (``GET /api/stats``), as the server sends them."""
        return self._ok(self._request("GET", "/api/stats"))

    def wait_for_verdict(
        self, item_id: int, timeout: float = 600.0, *, poll_interval: float = 1.0, max_interval: float = 30.0
    ) -> Item:
        """Poll the item until it is decided (approved, rejected, filtered, shed
        or sent back) and return it; raise ``VerdictTimeout`` after ``timeout``
        seconds.

        Between polls it waits ``poll_interval``, doubling up to
        ``max_interval``, each wait jittered (half fixed, half random) so many
        producers do not poll in step. A 503 or 429 is waited out for exactly
        its Retry-After (bounded by the time left), and a dropped connection is
        retried like a slow answer; any other error (``NotFound``,
        ``Unauthorized``) is raised at once, since waiting will not change it.
        """
        deadline = self._clock() + timeout
        interval = poll_interval
        last_status: str | None = None
        while True:
            try:
                item = self.item(item_id)
            except Unavailable as exc:
                pause = exc.retry_after if exc.retry_after is not None else self._jitter(interval)
            except ConnectionFailed:
                pause = self._jitter(interval)
            else:
                if item.decided:
                    return item
                last_status = item.status
                pause = self._jitter(interval)
            interval = min(interval * 2, max_interval)
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise VerdictTimeout(item_id, timeout, last_status)
            self._sleep(min(pause, remaining))

    def _jitter(self, interval: float) -> float:
        return interval / 2 + self._rng.uniform(0, interval / 2)
