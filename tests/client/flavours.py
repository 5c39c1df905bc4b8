"""Both clients behind one blocking face, so one test body checks both:
``Client`` as it is, and ``AsyncClient`` with each call run to completion on
an event loop of its own. A test written against ``connect(url, token)``
therefore holds the two to the same contract."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Self, TypeVar

import httpx

from reviewqueue.client import AsyncClient, Client

T = TypeVar("T")


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` in a thread of its own: a test process may already
    have an event loop running in its main thread (Playwright's, in a run
    that includes the browser tests)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


class Blocking:
    """An AsyncClient whose coroutine methods block until done, run on an
    event loop in a thread of its own (see ``run_async``)."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.client, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        def run(*args: Any, **kwargs: Any) -> Any:
            return asyncio.run_coroutine_threadsafe(attr(*args, **kwargs), self.loop).result()

        return run

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.client.aclose(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
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
