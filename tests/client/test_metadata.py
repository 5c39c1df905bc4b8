"""Both clients carry an item's metadata: pushed with the output, read back on
``Item.metadata`` (and after the verdict), refused as ``InvalidRequest``
naming the field when it is not a small JSON object."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reviewqueue.client import Event, InvalidRequest, Item

from .test_live_round_trip import push, wait_while_deciding

pytestmark = pytest.mark.slow

ROUTING = {"thread_id": "graph-thread-1", "checkpoint": {"ns": "review:9"}}


def test_the_metadata_pushed_is_read_back_before_and_after_the_verdict(
    connect: Callable[..., Any], live_url: str, issue: Callable[..., str], decide_as_reviewer: Callable[..., None]
) -> None:
    token = issue()
    with connect(live_url, token) as client:
        pushed = push(client, "with-metadata", metadata=ROUTING)
        assert client.item(pushed.item_id).metadata == ROUTING
    item = wait_while_deciding(
        connect, live_url, token, pushed.item_id, lambda: decide_as_reviewer(pushed.item_id, approve=True)
    )
    assert (item.status, item.metadata) == ("approved", ROUTING)


def test_metadata_the_server_refuses_is_an_invalid_request_naming_it(
    connect: Callable[..., Any], live_url: str, issue: Callable[..., str]
) -> None:
    with connect(live_url, issue()) as client, pytest.raises(InvalidRequest) as caught:
        push(client, "too-big", metadata={"blob": "x" * 9000})
    assert list(caught.value.fields) == ["metadata"]


def test_results_without_metadata_read_as_an_empty_object() -> None:
    assert Item.from_json({"item_id": 1, "status": "pending"}).metadata == {}
    assert Item.from_json({"item_id": 1, "status": "pending", "metadata": "not an object"}).metadata == {}
    assert Event.from_json({"id": "evt_1", "type": "run.finished", "data": {}}).metadata == {}
    assert Event.from_json({"id": "evt_1", "type": "item.shed", "data": {"metadata": {"a": 1}}}).metadata == {"a": 1}
