"""Both clients behind one blocking face, so one test body checks both:
``Client`` as it is, and ``AsyncClient`` with each call run to completion on
an event loop of its own. A test written against ``connect(url, token)``
therefore holds the two to the same contract."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any, Self

import httpx

from reviewqueue.client import AsyncClient, Client


class Blocking:
    """An AsyncClient whose coroutine methods block until done."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self.loop = asyncio.new_event_loop()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.client, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        def run(*args: Any, **kwargs: Any) -> Any:
            return self.loop.run_until_complete(attr(*args, **kwargs))

        return run

    def close(self) -> None:
        self.loop.run_until_complete(self.client.aclose())
        self.loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_sync(url: str, token: str, *, transport: httpx.BaseTransport | None = None, **kwargs: Any) -> Client:
    if transport is not None:
        kwargs["http"] = httpx.Client(transport=transport)
    return Client(url, token, **kwargs)


def make_async(url: str, token: str, *, transport: httpx.AsyncBaseTransport | None = None, **kwargs: Any) -> Blocking:
    if transport is not None:
        kwargs["http"] = httpx.AsyncClient(transport=transport)
    sleep = kwargs.pop("sleep", None)
    if sleep is not None:
        # The test's fake clock sleeps synchronously; the client awaits its sleep.
        async def asleep(seconds: float) -> None:
            sleep(seconds)

        kwargs["sleep"] = asleep
    return Blocking(AsyncClient(url, token, **kwargs))


FLAVOURS: dict[str, Callable[..., Any]] = {"Client": make_sync, "AsyncClient": make_async}
