"""Answers no reviewqueue server gives but something in front of one may:
the client says what went wrong in its own typed error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from reviewqueue.client import ApiError, AsyncClient, Client, ReviewqueueError
from tests.client.flavours import run_async
from tests.client.stub import Answer, scripted


def test_a_2xx_without_the_fields_the_api_sends_is_an_api_error(connect: Callable[..., Any]) -> None:
    proxy_page = Answer(200, {"hello": "proxy"})
    with scripted(proxy_page) as server, connect(server.url, "t") as client, pytest.raises(ApiError) as caught:
        client.item(7)
    assert (caught.value.code, caught.value.status_code) == ("unexpected_answer", 200)
    assert isinstance(caught.value, ReviewqueueError)


def test_an_error_without_a_json_body_is_coded_by_its_status(connect: Callable[..., Any]) -> None:
    with scripted(Answer(502)) as server, connect(server.url, "t") as client, pytest.raises(ApiError) as caught:
        client.run("r-1")
    assert (caught.value.code, caught.value.status_code) == ("http_502", 502)


def test_a_run_id_is_sent_as_one_path_segment(connect: Callable[..., Any]) -> None:
    body = {"run_id": "a/b c", "task_id": "t", "outcome": "running", "item_id": None}
    with scripted(Answer(200, body)) as server, connect(server.url, "t") as client:
        assert client.run("a/b c").run_id == "a/b c"
    assert server.requests[0].path == "/api/tasks/a%2Fb%20c"


def test_a_callers_own_http_client_is_left_open() -> None:
    mine = httpx.Client()
    with scripted(Answer(200, {"depth": 0})) as server:
        with Client(server.url, "t", http=mine) as client:
            assert client.stats() == {"depth": 0}
        assert not mine.is_closed
    mine.close()


def test_an_async_callers_own_http_client_is_left_open() -> None:
    async def use(url: str) -> httpx.AsyncClient:
        mine = httpx.AsyncClient()
        async with AsyncClient(url, "t", http=mine) as client:
            assert await client.stats() == {"depth": 0}
        return mine

    with scripted(Answer(200, {"depth": 0})) as server:
        mine = run_async(use(server.url))
    assert not mine.is_closed
