"""``items()``: a producer lists its own items (``GET /api/items``) from the
client, filtered and paged as the API pages them, with ``Client`` and
``AsyncClient`` alike; the live round trip is in test_live_round_trip."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from reviewqueue.client import InvalidRequest, ItemPage
from tests.client.stub import Answer, scripted

ROW = {"item_id": 42, "queue": "default", "status": "pending", "version": 1, "metadata": {}, "verdict": None}


def test_a_page_of_items_and_the_cursor_of_the_next(connect: Callable[..., Any]) -> None:
    pages = [Answer(200, {"items": [ROW], "next": "abc"}), Answer(200, {"items": [], "next": None})]
    with scripted(*pages) as server, connect(server.url, "t") as client:
        first = client.items(status="pending", since=date(2026, 12, 1), version=2)
        last = client.items(after=first.next)
    assert isinstance(first, ItemPage) and [item.item_id for item in first.items] == [42]
    assert first.items[0].status == "pending" and first.next == "abc"
    assert last.items == [] and last.next is None
    asked = [parse_qs(urlsplit(request.path).query) for request in server.requests]
    assert asked == [{"status": ["pending"], "since": ["2026-12-01"], "version": ["2"]}, {"after": ["abc"]}]
    assert all(urlsplit(request.path).path == "/api/items" for request in server.requests)


def test_a_bad_filter_raises_naming_each(connect: Callable[..., Any]) -> None:
    refused = {"status": "Select a valid choice.", "version": "Enter a whole number."}
    answer = Answer(400, {"error": "invalid", "fields": refused})
    with scripted(answer) as server, connect(server.url, "t") as client, pytest.raises(InvalidRequest) as caught:
        client.items(status="nope")
    assert caught.value.fields == refused


def test_an_unknown_filter_is_refused_before_anything_is_sent(connect: Callable[..., Any]) -> None:
    with scripted() as server, connect(server.url, "t") as client, pytest.raises(TypeError) as caught:
        client.items(stauts="pending")
    assert "stauts" in str(caught.value) and server.requests == []
