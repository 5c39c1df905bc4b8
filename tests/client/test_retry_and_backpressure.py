"""What the client does with answers that say "not now": a 503 or 429 with
Retry-After is waited out for exactly as long as it says, backpressure comes
back as a value, and fields a later server adds pass through. The server
here is a scripted loopback server (tests/client/stub.py)."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from reviewqueue.client import (
    DEFAULT_RETRY_AFTER,
    Backpressure,
    ConnectionFailed,
    NotFound,
    Output,
    Run,
    Unavailable,
    VerdictTimeout,
)
from reviewqueue.client.core import retry_after
from tests.client.stub import Answer, FakeTime, scripted

PENDING = Answer(200, {"item_id": 7, "status": "pending", "decision": None, "label": "unverified"})
APPROVED = Answer(200, {"item_id": 7, "status": "approved", "decision": "approve", "label": "unverified"})
OUTPUT = {"idempotency_key": "k-1", "task_description": "Write is_even", "final_output": "def is_even(n): ..."}


def client_for(connect: Callable[..., Any], url: str, fake: FakeTime, seed: int = 0) -> Any:
    return connect(url, "rq_test_token", sleep=fake.sleep, clock=fake.clock, rng=random.Random(seed))


def test_wait_for_verdict_waits_exactly_as_long_as_retry_after_says(connect: Callable[..., Any]) -> None:
    fake = FakeTime()
    busy = Answer(503, {"error": "database_unavailable", "backoff": True}, {"Retry-After": "3"})
    limited = Answer(429, {"error": "rate_limited"}, {"Retry-After": "1"})
    with scripted(busy, limited, PENDING, APPROVED) as server, client_for(connect, server.url, fake) as client:
        item = client.wait_for_verdict(7, timeout=60, poll_interval=0.5)
    assert item.status == "approved"
    assert [(r.method, r.path) for r in server.requests] == [("GET", "/api/items/7")] * 4
    assert server.requests[0].headers["Authorization"] == "Bearer rq_test_token"
    # Retry-After as told, then one jittered poll interval (the third wait:
    # the interval has doubled twice from 0.5, and half of it is fixed).
    assert fake.sleeps[:2] == [3.0, 1.0]
    assert 1.0 <= fake.sleeps[2] <= 2.0


def test_polling_backs_off_with_jitter_up_to_its_cap(connect: Callable[..., Any]) -> None:
    fake = FakeTime()
    with scripted(*[PENDING] * 8, APPROVED) as server, client_for(connect, server.url, fake, seed=3) as client:
        client.wait_for_verdict(7, timeout=600, poll_interval=1, max_interval=4)
    assert len(server.requests) == 9
    caps = [1, 2, 4, 4, 4, 4, 4, 4]
    assert all(cap / 2 <= slept <= cap for slept, cap in zip(fake.sleeps, caps, strict=True)), fake.sleeps
    assert len(set(fake.sleeps)) == len(fake.sleeps), "each wait is jittered"


def test_a_retry_after_longer_than_the_time_left_is_cut_to_it_and_then_times_out(connect: Callable[..., Any]) -> None:
    fake = FakeTime()
    busy = Answer(503, {"error": "database_unavailable"}, {"Retry-After": "120"})
    with (
        scripted(PENDING, busy, PENDING) as server,
        client_for(connect, server.url, fake) as client,
        pytest.raises(VerdictTimeout) as caught,
    ):
        client.wait_for_verdict(7, timeout=10, poll_interval=1)
    assert caught.value.last_status == "pending"
    assert len(server.requests) == 3
    assert sum(fake.sleeps) == pytest.approx(10)


def test_a_dropped_connection_is_polled_again_but_a_404_is_raised_at_once(connect: Callable[..., Any]) -> None:
    fake = FakeTime()
    gone = Answer(404, {"error": "not_found", "detail": "no item 7"})
    with scripted(gone) as server, client_for(connect, server.url, fake) as client, pytest.raises(NotFound):
        client.wait_for_verdict(7, timeout=60)
    assert len(server.requests) == 1 and fake.sleeps == []

    flaky = FlakyTransport([httpx.ConnectError("refused"), APPROVED])
    with connect("http://rq.invalid", "t", transport=flaky, sleep=fake.sleep, clock=fake.clock) as client:
        assert client.wait_for_verdict(7, timeout=60).status == "approved"
    assert flaky.calls == 2


class FlakyTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Raises or answers from a list: a connection that drops, then recovers.
    It serves either client (httpx calls the blocking or the async hook)."""

    def __init__(self, steps: list[Exception | Answer]) -> None:
        self.steps = steps
        self.calls = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        step = self.steps[self.calls]
        self.calls += 1
        if isinstance(step, Exception):
            raise step
        return httpx.Response(step.status, json=step.body, headers=step.headers)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return self.handle_request(request)


def test_nothing_listening_is_a_connection_failed_error(connect: Callable[..., Any]) -> None:
    with scripted() as server:
        url = server.url
    with connect(url, "t") as client, pytest.raises(ConnectionFailed) as caught:
        client.item(1)
    assert caught.value.code == "connection_failed"


def test_a_503_asking_to_back_off_is_a_value_not_an_exception(connect: Callable[..., Any]) -> None:
    held = Answer(503, {"error": "queue_full", "detail": "at capacity", "backoff": True}, {"Retry-After": "7"})
    with scripted(held) as server, connect(server.url, "t") as client:
        answer = client.push_output(**OUTPUT)
    assert isinstance(answer, Backpressure)
    assert (answer.accepted, answer.retry_after, answer.error, answer.status_code) == (False, 7.0, "queue_full", 503)
    assert len(server.requests) == 1, "the client does not repeat on its own: the caller decides"
    assert server.requests[0].json() == OUTPUT, "fields left out are left to the server's defaults"


def test_backoff_without_retry_after_takes_the_default_wait(connect: Callable[..., Any]) -> None:
    with scripted(Answer(503, {"error": "queue_full", "backoff": True})) as server, connect(server.url, "t") as client:
        answer = client.push_output(**OUTPUT)
    assert isinstance(answer, Backpressure) and answer.retry_after == DEFAULT_RETRY_AFTER


def test_a_task_held_back_names_the_run_id_to_repeat_with(connect: Callable[..., Any]) -> None:
    unqueued = Answer(503, {"error": "unavailable", "detail": "recorded but not queued"}, {"Retry-After": "5"})
    created = Answer(201, {"run_id": "?", "task_id": "t", "outcome": "running", "created": True})
    with scripted(unqueued, created) as server, connect(server.url, "t") as client:
        answer = client.submit_task({"id": "t", "description": "d"})
        assert isinstance(answer, Backpressure) and answer.retry_after == 5.0
        sent = server.requests[0].json()["run_id"]
        assert answer.run_id == sent and sent.startswith("client-")
        assert isinstance(client.submit_task({"id": "t", "description": "d"}, run_id=answer.run_id), Run)
    assert server.requests[1].json()["run_id"] == sent


def test_a_503_that_names_no_time_is_raised_with_its_code(connect: Callable[..., Any]) -> None:
    refused = Answer(503, {"error": "sandbox_unavailable", "detail": "no bubblewrap"})
    with scripted(refused) as server, connect(server.url, "t") as client, pytest.raises(Unavailable) as caught:
        client.submit_task({"id": "t", "checks": [{"id": "c", "code": "assert True"}]})
    assert (caught.value.code, caught.value.status_code, caught.value.retry_after) == ("sandbox_unavailable", 503, None)


def test_fields_a_later_server_adds_pass_through(connect: Callable[..., Any]) -> None:
    later = {
        "item_id": 7,
        "status": "sent_back",
        "decision": None,
        "label": "unverified",
        "verdict": {"decision": None, "reason_label": "", "note": "handle n < 0", "edited_output": None},
        "version": 2,
        "previous_item": 6,
        "queue": "default",
    }
    fake = FakeTime()
    with scripted(Answer(200, later)) as server, client_for(connect, server.url, fake) as client:
        item = client.wait_for_verdict(7)
    assert (item.status, item.sent_back, item.decided, item.note) == ("sent_back", True, True, "handle n < 0")
    assert (item.version, item.previous_item, item.raw["queue"]) == (2, 6, "default")
    assert fake.sleeps == []


def test_an_output_answer_keeps_unknown_fields(connect: Callable[..., Any]) -> None:
    body = {
        "outcome": "enqueued",
        "item_id": 3,
        "status": "pending",
        "mode": "normal",
        "depth": 1,
        "capacity": 50,
        "backoff": False,
        "truncated": False,
        "shed_item_id": None,
        "queue": "default",
    }
    with scripted(Answer(201, body)) as server, connect(server.url, "t") as client:
        answer = client.push_output(**OUTPUT, queue="default", callback_url="https://agent.example/hook")
    assert isinstance(answer, Output) and answer.raw["queue"] == "default"
    assert server.requests[0].json()["callback_url"] == "https://agent.example/hook"


def test_retry_after_reads_seconds_and_http_dates() -> None:
    def header(value: str) -> float | None:
        return retry_after(httpx.Response(503, headers={"Retry-After": value}))

    assert header("12") == 12.0
    later = datetime.now(UTC) + timedelta(seconds=90)
    assert 80 <= (header(format_datetime(later, usegmt=True)) or 0) <= 90
    assert header("soon") is None
    assert retry_after(httpx.Response(503)) is None
