"""The clients' contract against a live server, each test run once with
``Client`` and once with ``AsyncClient`` (the ``connect`` fixture): push an
output, a reviewer decides it, ``wait_for_verdict`` sees the verdict; errors
arrive as typed exceptions carrying the API's code; a busy queue arrives as
a value."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from reviewqueue.client import (
    Backpressure,
    Forbidden,
    InvalidRequest,
    Item,
    NotFound,
    Output,
    ReviewqueueError,
    Unauthorized,
    VerdictTimeout,
)

pytestmark = pytest.mark.slow


def push(client: Any, key: str, **fields: Any) -> Output:
    pushed = client.push_output(
        idempotency_key=key,
        task_description="Write is_even(n) that returns True for even integers.",
        final_output="def is_even(n):\n    return n % 2 == 0\n",
        cutoff_reason="step_limit",
        last_error="AssertionError:check_2",
        attempt_count=5,
        **fields,
    )
    assert isinstance(pushed, Output), pushed
    return pushed


class Waiter(threading.Thread):
    """``wait_for_verdict`` in a thread of its own (it needs no database), so
    the test can decide the item while it polls. ``polled`` is set once it
    has seen the item undecided and gone to sleep."""

    def __init__(self, connect: Callable[..., Any], url: str, token: str, item_id: int) -> None:
        super().__init__(daemon=True)
        self.polled = threading.Event()
        self.client = connect(url, token, sleep=self._sleep)
        self.item_id = item_id
        self.result: Item | ReviewqueueError | None = None

    def _sleep(self, seconds: float) -> None:
        self.polled.set()
        time.sleep(min(seconds, 0.1))

    def run(self) -> None:
        try:
            self.result = self.client.wait_for_verdict(self.item_id, timeout=60, poll_interval=0.05)
        except ReviewqueueError as exc:  # handed to the test thread
            self.result = exc
        finally:
            self.client.close()


def wait_while_deciding(
    connect: Callable[..., Any], url: str, token: str, item_id: int, decide: Callable[[], None]
) -> Item:
    waiter = Waiter(connect, url, token, item_id)
    waiter.start()
    assert waiter.polled.wait(30), "the waiter never saw the item undecided"
    decide()
    waiter.join(30)
    assert isinstance(waiter.result, Item), waiter.result
    return waiter.result


def test_an_approved_output_comes_back_approved(
    connect: Callable[..., Any], live_url: str, issue: Callable[..., str], decide_as_reviewer: Callable[..., None]
) -> None:
    token = issue()
    with connect(live_url, token) as client:
        pushed = push(client, "round-trip-1")
        assert (pushed.outcome, pushed.status, pushed.accepted) == ("enqueued", "pending", True)
        assert client.item(pushed.item_id).status == "pending"

    item = wait_while_deciding(
        connect, live_url, token, pushed.item_id, lambda: decide_as_reviewer(pushed.item_id, approve=True)
    )
    assert (item.item_id, item.status, item.decision, item.decided) == (pushed.item_id, "approved", "approve", True)
    assert item.raw["status"] == "approved"


def test_a_rejected_output_comes_back_rejected(
    connect: Callable[..., Any], live_url: str, issue: Callable[..., str], decide_as_reviewer: Callable[..., None]
) -> None:
    token = issue()
    with connect(live_url, token) as client:
        pushed = push(client, "round-trip-2")

    def reject() -> None:
        decide_as_reviewer(pushed.item_id, approve=False, reason_label="logic_error", note="off by one")

    item = wait_while_deciding(connect, live_url, token, pushed.item_id, reject)
    assert (item.status, item.decision) == ("rejected", "reject")


def test_a_repeated_key_answers_the_first_item(
    connect: Callable[..., Any], live_url: str, issue: Callable[..., str]
) -> None:
    with connect(live_url, issue()) as client:
        first = push(client, "same-key")
        again = push(client, "same-key")
    assert again.outcome == "duplicate"
    assert again.item_id == first.item_id


def test_a_producer_lists_its_own_items_and_filters_them(
    connect: Callable[..., Any], live_url: str, issue: Callable[..., str]
) -> None:
    with connect(live_url, issue("lister")) as other:
        push(other, "not-mine")
    with connect(live_url, issue()) as client:
        mine = [push(client, f"listed-{n}").item_id for n in range(2)]
        page = client.items()
        pending = client.items(status="pending", q="is_even")
        with pytest.raises(InvalidRequest) as caught:
            client.items(status="nope", version=0)
    assert [item.item_id for item in page.items] == mine[::-1] and page.next is None
    assert {item.item_id for item in pending.items} == set(mine)
    assert set(caught.value.fields) == {"status", "version"}


def test_waiting_on_an_undecided_item_times_out_with_its_status(
    connect: Callable[..., Any], live_url: str, issue: Callable[..., str]
) -> None:
    with connect(live_url, issue()) as client:
        pushed = push(client, "nobody-decides")
        with pytest.raises(VerdictTimeout) as caught:
            client.wait_for_verdict(pushed.item_id, timeout=0.3, poll_interval=0.05)
    assert caught.value.code == "verdict_timeout"
    assert caught.value.last_status == "pending"


def test_a_bad_token_is_unauthorized(connect: Callable[..., Any], live_url: str, issue: Callable[..., str]) -> None:
    issue()
    with connect(live_url, "rq_0000_not-a-token") as client, pytest.raises(Unauthorized) as caught:
        push(client, "k")
    assert (caught.value.status_code, caught.value.code) == (401, "unauthorized")


def test_a_token_without_the_scope_is_forbidden_and_named(
    connect: Callable[..., Any], live_url: str, issue: Callable[..., str]
) -> None:
    with connect(live_url, issue("scraper", ("metrics",))) as client, pytest.raises(Forbidden) as caught:
        push(client, "k")
    assert (caught.value.status_code, caught.value.code) == (403, "forbidden")
    assert caught.value.missing_scope == "outputs"


def test_a_bad_payload_is_invalid_and_names_the_field(
    connect: Callable[..., Any], live_url: str, issue: Callable[..., str]
) -> None:
    with connect(live_url, issue()) as client, pytest.raises(InvalidRequest) as caught:
        push(client, "k", priority=5000)
    assert (caught.value.status_code, caught.value.code) == (400, "invalid")
    assert set(caught.value.fields) == {"priority"}


def test_an_unknown_item_or_another_producers_is_not_found(
    connect: Callable[..., Any], live_url: str, issue: Callable[..., str]
) -> None:
    with connect(live_url, issue("producer-a")) as mine, connect(live_url, issue("producer-b")) as theirs:
        pushed = push(mine, "private")
        with pytest.raises(NotFound) as caught:
            theirs.item(pushed.item_id)
        assert (caught.value.status_code, caught.value.code) == (404, "not_found")
        with pytest.raises(NotFound):
            mine.item(pushed.item_id + 1000)
        with pytest.raises(NotFound):
            mine.run("no-such-run")
        assert mine.item(pushed.item_id).status == "pending"


def test_a_queue_past_its_high_watermark_says_back_off_without_raising(
    connect: Callable[..., Any], live_url: str, issue: Callable[..., str]
) -> None:
    from reviewqueue.models import Queue

    Queue.current()
    Queue.objects.update(capacity=4)  # high watermark at 0.8: draft mode from the fourth item
    with connect(live_url, issue()) as client:
        answers = [push(client, f"busy-{n}", priority=1) for n in range(6)]
    assert [a.backoff for a in answers[:3]] == [False, False, False]
    assert all(a.backoff and a.mode != "normal" for a in answers[3:])
    assert {a.outcome for a in answers} <= {"enqueued", "shed"}
    assert not any(isinstance(a, Backpressure) for a in answers)


def test_a_submitted_task_is_read_back_by_its_run_id(
    connect: Callable[..., Any], live_url: str, issue: Callable[..., str]
) -> None:
    task = {"id": "say-hello", "description": "Write a haiku about queues.", "kind": "open"}
    with connect(live_url, issue()) as client:
        run = client.submit_task(task, run_id="client-run-1")
        assert not isinstance(run, Backpressure)
        assert (run.run_id, run.task_id, run.created) == ("client-run-1", "say-hello", True)
        again = client.submit_task(task, run_id="client-run-1")
        assert not isinstance(again, Backpressure)
        assert again.created is False
        assert client.run("client-run-1").run_id == "client-run-1"


def test_stats_read_a_named_queue_with_an_outputs_token(
    connect: Callable[..., Any], live_url: str, issue: Callable[..., str]
) -> None:
    # What an MCP tool with an outputs-only token can read about a queue.
    with connect(live_url, issue("pusher", ("outputs",))) as client:
        assert client.stats()["queue"] == "default"
        assert client.stats("default")["capacity"] > 0
        with pytest.raises(InvalidRequest) as caught:
            client.stats("no-such-queue")
    assert set(caught.value.fields) == {"queue"}


def test_an_undone_approval_never_reaches_wait_for_verdict(
    connect: Callable[..., Any],
    live_url: str,
    issue: Callable[..., str],
    decide_as_reviewer: Callable[..., None],
    reviewer_user: Any,
) -> None:
    """The reviewer approves, takes it back inside the undo window and
    rejects: the producer's client sees only the rejection, once final."""
    from reviewqueue import services

    token = issue()
    with connect(live_url, token) as client:
        pushed = push(client, "undone-approval")
        decide_as_reviewer(pushed.item_id, approve=True)
        seen = client.item(pushed.item_id)
        assert (seen.status, seen.decision, seen.decided) == ("claimed", None, False)
        services.undo(reviewer=reviewer_user)
        services.decide(item_id=pushed.item_id, reviewer=reviewer_user, approve=False, reason_label="logic_error")

    waiter = Waiter(connect, live_url, token, pushed.item_id)
    waiter.start()
    waiter.join(60)
    assert isinstance(waiter.result, Item), waiter.result
    assert (waiter.result.status, waiter.result.decision) == ("rejected", "reject")
