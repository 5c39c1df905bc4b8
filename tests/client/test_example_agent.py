"""The example agent (docs/examples/agent.py): in polling mode against the
live server, its revision loop against a scripted server speaking the
send-back answer, and its webhook receiver against deliveries signed here."""

from __future__ import annotations

import base64
import http.client
import importlib.util
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import standardwebhooks
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewqueue.client import Client
from tests.client.stub import Answer, scripted
from tests.reviewqueue.worker_helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "docs" / "examples" / "agent.py"


def load_agent() -> ModuleType:
    """The example as a module; it is a script, not part of a package."""
    if "example_agent" in sys.modules:
        return sys.modules["example_agent"]
    spec = importlib.util.spec_from_file_location("example_agent", AGENT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["example_agent"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


# --- polling mode, live ---------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(("approve", "status", "exit_code"), [(True, "approved", 0), (False, "rejected", 1)])
def test_the_agent_polls_the_live_server_for_its_verdict(
    live_url: str,
    issue: Callable[..., str],
    decide_as_reviewer: Callable[..., None],
    approve: bool,
    status: str,
    exit_code: int,
) -> None:
    from reviewqueue.models import ReviewItem

    env = {**os.environ, "PYTHONPATH": str(ROOT), "REVIEWQUEUE_TOKEN": issue()}
    command = [sys.executable, str(AGENT), "--url", live_url, "--key", "example", "--timeout", "60"]
    agent = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: ReviewItem.objects.filter(idempotency_key="example-v1").exists(), 30, "the agent's push")
        item = ReviewItem.objects.get(idempotency_key="example-v1")
        decide_as_reviewer(item.pk, approve=approve, reason_label="" if approve else "logic_error")
        stdout, stderr = agent.communicate(timeout=60)
    finally:
        agent.kill()
    steps = lines(stdout)
    assert agent.returncode == exit_code, stderr
    assert [s["event"] for s in steps] == ["pushed", "verdict", "done"]
    assert (steps[0]["item_id"], steps[0]["outcome"]) == (item.pk, "enqueued")
    assert (steps[1]["status"], steps[2]["status"]) == (status, status)
    assert ReviewItem.objects.filter(producer="agent-runner").count() == 1


@pytest.mark.slow
def test_the_agents_revision_is_version_2_of_the_sent_back_item(
    live_url: str, issue: Callable[..., str], reviewer_user: Any
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from reviewqueue import services
    from reviewqueue.models import ReviewItem

    env = {**os.environ, "PYTHONPATH": str(ROOT), "REVIEWQUEUE_TOKEN": issue()}
    command = [sys.executable, str(AGENT), "--url", live_url, "--key", "revised", "--timeout", "60", "--rounds", "2"]
    agent = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: ReviewItem.objects.filter(idempotency_key="revised-v1").exists(), 30, "the agent's push")
        first = ReviewItem.objects.get(idempotency_key="revised-v1")
        # Decided a minute ago, so the send-back is final (past the undo window) at once.
        earlier = timezone.now() - timedelta(minutes=1)
        assert services.claim(reviewer=reviewer_user, now=earlier).pk == first.pk
        services.send_back(item_id=first.pk, reviewer=reviewer_user, note="handle n < 0", now=earlier)
        wait_for(lambda: ReviewItem.objects.filter(idempotency_key="revised-v2").exists(), 60, "the revision")
        revision = ReviewItem.objects.get(idempotency_key="revised-v2")
        assert revision.previous_version_id == first.pk
        assert revision.version == 2
        assert "handle n < 0" in revision.final_output
    finally:
        agent.kill()
        agent.communicate()


# --- the revision loop ----------------------------------------------------------------------

CREATED = {
    "outcome": "enqueued",
    "status": "pending",
    "mode": "normal",
    "depth": 1,
    "capacity": 50,
    "backoff": False,
    "truncated": False,
    "shed_item_id": None,
}


def sent_back(item_id: int, note: str) -> Answer:
    verdict = {"decision": None, "reason_label": "", "note": note, "edited_output": None}
    return Answer(200, {"item_id": item_id, "status": "sent_back", "decision": None, "verdict": verdict})


def test_a_sent_back_output_is_revised_with_the_note_and_pushed_again() -> None:
    agent = load_agent()
    approved = Answer(200, {"item_id": 8, "status": "approved", "decision": "approve"})
    script = [
        Answer(201, {**CREATED, "item_id": 7}),
        sent_back(7, "handle n < 0"),
        Answer(201, {**CREATED, "item_id": 8}),
        approved,
    ]

    def revise(output: str, note: str) -> str:
        return f"{output}# {note.upper()}\n"

    with scripted(*script) as server, Client(server.url, "t") as client:
        verdict = agent.run_agent(client, agent.PollingWaiter(client), task="t", output="v1\n", revise=revise, key="k")
    assert verdict == agent.Verdict("approved", "")
    pushes = [r.json() for r in server.requests if r.method == "POST"]
    assert [p["idempotency_key"] for p in pushes] == ["k-v1", "k-v2"]
    assert [p.get("previous_item") for p in pushes] == [None, 7], "the revision names the item it revises"
    assert [p["final_output"] for p in pushes] == ["v1\n", "v1\n# HANDLE N < 0\n"]
    assert [r.path for r in server.requests if r.method == "GET"] == ["/api/items/7", "/api/items/8"]


def test_it_stops_after_its_rounds_while_still_sent_back() -> None:
    agent = load_agent()
    script = [
        Answer(201, {**CREATED, "item_id": 7}),
        sent_back(7, "again"),
        Answer(201, {**CREATED, "item_id": 8}),
        sent_back(8, "again"),
    ]
    with scripted(*script) as server, Client(server.url, "t") as client:
        verdict = agent.run_agent(client, agent.PollingWaiter(client), task="t", output="o", rounds=2, key="k")
    assert verdict.status == "sent_back"
    assert len(server.requests) == 4


def test_a_held_back_push_is_repeated_with_the_same_key_after_the_wait() -> None:
    agent = load_agent()
    held = Answer(503, {"error": "queue_full", "backoff": True}, {"Retry-After": "0"})
    script = [held, Answer(201, {**CREATED, "item_id": 7}), Answer(200, {"item_id": 7, "status": "rejected"})]
    with scripted(*script) as server, Client(server.url, "t") as client:
        verdict = agent.run_agent(client, agent.PollingWaiter(client), task="t", output="o", key="k")
    assert verdict.status == "rejected"
    assert [r.json()["idempotency_key"] for r in server.requests if r.method == "POST"] == ["k-v1", "k-v1"]


# --- the webhook receiver -------------------------------------------------------------------

SECRET = "whsec_" + base64.b64encode(b"example agent's key").decode()


def signed(event: dict[str, Any], *, secret: str = SECRET, age: int = 0) -> tuple[bytes, dict[str, str]]:
    """A delivery as a Standard Webhooks sender makes it (the library, not ours)."""
    body = json.dumps(event).encode()
    stamp = int(time.time()) - age
    signature = standardwebhooks.Webhook(secret).sign(event["id"], datetime.fromtimestamp(stamp, UTC), body.decode())
    return body, {"webhook-id": event["id"], "webhook-timestamp": str(stamp), "webhook-signature": signature}


def post(url: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return int(refused.code)


def deliver(url: str, event: dict[str, Any], *, secret: str = SECRET, age: int = 0) -> int:
    return post(url, *signed(event, secret=secret, age=age))


def decided(event_id: str, item_id: int, decision: str) -> dict[str, Any]:
    data = {"decision": decision, "edited": False, "edited_output": None, "reason_label": "", "note": "ok"}
    return {
        "id": event_id,
        "type": "item.decided",
        "created": "2026-01-01T00:00:00Z",
        "item_id": item_id,
        "run_id": None,
        "data": data,
    }


def test_the_receiver_takes_only_signed_fresh_events_and_each_once() -> None:
    agent = load_agent()
    waiter = agent.WebhookWaiter(SECRET)
    try:
        url = waiter.callback_url
        assert deliver(url, decided("evt_forged", 5, "approve"), secret="whsec_Z3Vlc3M=") == 400
        assert deliver(url, decided("evt_old", 5, "approve"), age=3600) == 400
        assert deliver(url, decided("evt_other", 4, "approve")) == 200
        assert deliver(url, decided("evt_1", 5, "reject")) == 200
        assert deliver(url, decided("evt_1", 5, "reject")) == 200  # a repeated delivery
        assert waiter.wait(5, timeout=10) == agent.Verdict("rejected", "ok")
        assert waiter.events.empty(), "the repeated delivery was not queued twice"
        with pytest.raises(TimeoutError):
            waiter.wait(5, timeout=0.2)
    finally:
        waiter.close()


def test_a_captured_delivery_replayed_under_new_ids_is_taken_once() -> None:
    """The reported replay: the same body and signature sent again with other
    id headers (the old unsigned one, or a new webhook-id) is not a new event."""
    agent = load_agent()
    waiter = agent.WebhookWaiter(SECRET)
    try:
        body, headers = signed(decided("evt_1", 5, "reject"))
        assert post(waiter.callback_url, body, headers) == 200
        for n in range(4):
            assert post(waiter.callback_url, body, {**headers, "Reviewqueue-Event-Id": f"evt_new{n}"}) == 200
            assert post(waiter.callback_url, body, {**headers, "webhook-id": f"evt_new{n}"}) == 400
        assert waiter.wait(5, timeout=10).status == "rejected"
        assert waiter.events.empty(), "a replay was taken as a new event"
    finally:
        waiter.close()


@pytest.fixture(scope="module")
def standing_waiter() -> Iterator[Any]:
    waiter = load_agent().WebhookWaiter(SECRET)
    yield waiter
    waiter.close()


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["webhook-id", "webhook-timestamp", "webhook-signature"]),
        st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=450),
        max_size=3,
    ),
    st.sampled_from([None, "abc", "-1", "\u00b2", "99999999999", "1e3"]),
)
def test_the_receiver_answers_400_to_any_malformed_header(
    standing_waiter: Any, fuzzed: dict[str, str], length: str | None
) -> None:
    """Fuzzed headers (and Content-Length), sent over HTTP: the receiver
    always answers 400 and never dies; a good delivery afterwards gets through."""
    body = json.dumps(decided("evt_f", 1, "approve")).encode()
    port = urllib.parse.urlsplit(standing_waiter.callback_url).port
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest("POST", "/reviewqueue", skip_accept_encoding=True)
        for name, value in fuzzed.items():
            connection.putheader(name, value.encode("latin-1"))
        connection.putheader("Content-Length", (length or str(len(body))).encode("latin-1"))
        connection.endheaders(b"" if length else body)
        assert connection.getresponse().status == 400
    finally:
        connection.close()
    assert deliver(standing_waiter.callback_url, decided("evt_ok", 2, "approve")) == 200
