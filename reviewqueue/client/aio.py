"""``AsyncClient``: ``Client``'s calls for asyncio code, on httpx.AsyncClient.

The same methods, results, typed errors and backpressure values as
``Client``: both send the requests ``calls.py`` builds and read the answers
the way it reads them; only the awaiting is here.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Self, TypeVar

import httpx

from . import calls
from .calls import USER_AGENT
from .errors import ReviewqueueError
from .results import Backpressure, Item, ItemPage, Output, Run

R = TypeVar("R")


class AsyncClient:
    """A producer's asyncio connection to one reviewqueue server.

    ``async with AsyncClient(base_url, token) as rq: await rq.push_output(...)``,
    or ``await rq.aclose()``. ``sleep`` (an async function), ``clock`` and
    ``rng`` drive ``wait_for_verdict`` as in ``Client``. Share one instance
    between the tasks of one event loop, as httpx.AsyncClient is shared.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        http: httpx.AsyncClient | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient(timeout=timeout)
        self._headers = {"Authorization": f"Bearer {token}", "User-Agent": USER_AGENT}
        self._sleep = sleep
        self._clock = clock
        self._rng = rng or random.Random()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def _send(self, call: calls.Call[R]) -> R:
        url = self.base_url + call.path
        try:
            response = await self._http.request(call.method, url, json=call.body, headers=self._headers)
        except httpx.TransportError as exc:
            raise calls.connection_failed(call.method, url, exc) from exc
        return call.read(response)

    async def push_output(
        self, *, idempotency_key: str, task_description: str, final_output: str, **fields: Any
    ) -> Output | Backpressure:
        """``Client.push_output``, awaited. Safe to repeat with the same key."""
        return await self._send(
            calls.push_output(
                idempotency_key=idempotency_key, task_description=task_description, final_output=final_output, **fields
            )
        )

    async def submit_task(
        self, task: Mapping[str, Any], *, run_id: str | None = None, **fields: Any
    ) -> Run | Backpressure:
        """``Client.submit_task``, awaited. Safe to repeat with the same run id."""
        return await self._send(calls.submit_task(task, run_id=run_id, **fields))

    async def item(self, item_id: int) -> Item:
        """``Client.item``, awaited."""
        return await self._send(calls.item(item_id))

    async def items(self, **filters: Any) -> ItemPage:
        """``Client.items``, awaited: the same filters. Safe to repeat."""
        return await self._send(calls.items(**filters))

    async def run(self, run_id: str) -> Run:
        """``Client.run``, awaited."""
        return await self._send(calls.run(run_id))

    async def stats(self, queue: str | None = None) -> dict[str, Any]:
        """``Client.stats``, awaited."""
        return await self._send(calls.stats(queue))

    async def wait_for_verdict(
        self, item_id: int, timeout: float = 600.0, *, poll_interval: float = 1.0, max_interval: float = 30.0
    ) -> Item:
        """``Client.wait_for_verdict``, awaited: the same schedule, and other
        tasks of the loop run while it sleeps."""
        poll = calls.VerdictPoll(
            item_id, timeout, poll_interval=poll_interval, max_interval=max_interval, clock=self._clock, rng=self._rng
        )
        while True:
            try:
                answer: Item | ReviewqueueError = await self.item(item_id)
            except poll.RETRIED as exc:
                answer = exc
            pause = poll.after(answer)
            if pause is None:
                return answer  # type: ignore[return-value]  # after() returns None only for a decided Item
            await self._sleep(pause)
