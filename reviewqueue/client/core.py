"""The producer's side of the JSON API over httpx: push an output, submit a
task, read an item or a run, wait for a verdict. ``Client`` blocks; its twin
``AsyncClient`` (``aio.py``) awaits. Both send the requests ``calls.py``
builds and read the answers the way it reads them.

Nothing here imports Django or Celery (tests/test_layers.py checks it), so a
producer installs httpx and this package, not the server's dependencies.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from typing import Any, Self, TypeVar

import httpx

from . import calls
from .calls import DEFAULT_RETRY_AFTER, USER_AGENT, retry_after
from .errors import ReviewqueueError
from .results import Backpressure, Item, ItemPage, Output, Run

__all__ = ["DEFAULT_RETRY_AFTER", "Client", "retry_after"]

R = TypeVar("R")


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

    def _send(self, call: calls.Call[R]) -> R:
        url = self.base_url + call.path
        try:
            response = self._http.request(call.method, url, json=call.body, headers=self._headers)
        except httpx.TransportError as exc:
            raise calls.connection_failed(call.method, url, exc) from exc
        return call.read(response)

    # --- the API ----------------------------------------------------------------------------

    def push_output(
        self, *, idempotency_key: str, task_description: str, final_output: str, **fields: Any
    ) -> Output | Backpressure:
        """Push one cut-off output for review (``POST /api/outputs``).

        Returns ``Output`` when the server stored it (check ``backoff`` and
        ``outcome``), or ``Backpressure`` when it asks to be asked again later:
        wait ``retry_after`` seconds and repeat with the same idempotency key.
        Safe to repeat: the key makes a second push a ``duplicate`` of the
        first. The other fields the API takes (``cutoff_reason``,
        ``last_error``, ``attempt_count``, ``priority``, ``callback_url``,
        ``queue``, ``task_id``, ``failing_checks``, ...) are sent as given;
        None leaves a field to the server's default. ``metadata``, a JSON
        object of yours (a thread id, a trace id), comes back on the ``Item``
        and in the item's webhook events, and no reviewer sees it.
        """
        return self._send(
            calls.push_output(
                idempotency_key=idempotency_key, task_description=task_description, final_output=final_output, **fields
            )
        )

    def submit_task(self, task: Mapping[str, Any], *, run_id: str | None = None, **fields: Any) -> Run | Backpressure:
        """Submit a task for a worker to run (``POST /api/tasks``); ``agent``,
        ``callback_url`` and ``queue`` among ``fields``.

        Without ``run_id`` one is chosen here, not by the server, so that a
        ``Backpressure`` answer (the run is recorded but not yet queued) names
        the run id to repeat the call with. Safe to repeat with the same run id:
        the server starts the run once.
        """
        return self._send(calls.submit_task(task, run_id=run_id, **fields))

    def item(self, item_id: int) -> Item:
        """An item's status and verdict (``GET /api/items/{id}``). Raises
        ``NotFound`` for another producer's item, ``Unavailable`` (with
        ``retry_after``) when the server asks to be asked later."""
        return self._send(calls.item(item_id))

    def items(self, **filters: Any) -> ItemPage:
        """One page of your items, newest first (``GET /api/items``), filtered
        as the operators' item list is: ``queue``, ``status``, ``decision``,
        ``label``, ``run``, ``version``, ``since`` and ``until`` (a ``date`` or
        YYYY-MM-DD), ``q``; pass the page's ``next`` as ``after`` for the
        following one. A bad filter raises ``InvalidRequest`` naming each, an
        unknown one TypeError. Safe to repeat: it only reads."""
        return self._send(calls.items(**filters))

    def run(self, run_id: str) -> Run:
        """A submitted run's outcome and item (``GET /api/tasks/{run_id}``)."""
        return self._send(calls.run(run_id))

    def stats(self, queue: str | None = None) -> dict[str, Any]:
        """A queue's statistics (``GET /api/stats``, any token), as the server
        sends them; the default queue unless ``queue`` names one."""
        return self._send(calls.stats(queue))

    def wait_for_verdict(
        self, item_id: int, timeout: float = 600.0, *, poll_interval: float = 1.0, max_interval: float = 30.0
    ) -> Item:
        """Poll the item until it is decided (approved, rejected, filtered, shed
        or sent back) and return it; raise ``VerdictTimeout`` after ``timeout``
        seconds. The schedule (jittered doubling, Retry-After honoured,
        dropped connections retried, other errors raised at once) is
        ``calls.VerdictPoll``'s.
        """
        poll = calls.VerdictPoll(
            item_id, timeout, poll_interval=poll_interval, max_interval=max_interval, clock=self._clock, rng=self._rng
        )
        while True:
            try:
                answer: Item | ReviewqueueError = self.item(item_id)
            except poll.RETRIED as exc:
                answer = exc
            pause = poll.after(answer)
            if pause is None:
                return answer  # type: ignore[return-value]  # after() returns None only for a decided Item
            self._sleep(pause)
