"""What a producer reads of a refusal: every refused field and its message in
the exception's text, and the queue an output went to on ``Output``, from
the sync Client and the AsyncClient alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reviewqueue.client import InvalidRequest
from tests.client.stub import Answer, scripted

CREATED = {
    "outcome": "enqueued",
    "item_id": 7,
    "queue": "payments",
    "status": "pending",
    "mode": "normal",
    "depth": 1,
    "capacity": 50,
    "backoff": False,
    "truncated": False,
    "shed_item_id": None,
}


def test_an_invalid_request_says_every_field_and_what_is_wrong(connect: Callable[..., Any]) -> None:
    refused = {"queue": "unknown queue 'paymnets'", "previous_item": "no item 9 from this producer"}
    answer = Answer(400, {"error": "invalid", "fields": refused})
    with scripted(answer) as server, connect(server.url, "t") as client, pytest.raises(InvalidRequest) as caught:
        client.push_output(idempotency_key="k", task_description="t", final_output="o", queue="paymnets")
    said = str(caught.value)
    assert said.startswith("400 invalid: ")
    assert "queue: unknown queue 'paymnets'" in said
    assert "previous_item: no item 9 from this producer" in said
    assert caught.value.fields == refused


def test_an_output_says_which_queue_it_went_to(connect: Callable[..., Any]) -> None:
    with scripted(Answer(201, CREATED)) as server, connect(server.url, "t") as client:
        pushed = client.push_output(idempotency_key="k", task_description="t", final_output="o")
    assert pushed.queue == "payments"
