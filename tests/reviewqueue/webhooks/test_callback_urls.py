"""Callback URLs read by one parser: a malformed one is a 400 naming the field
(never a 500) and a clear command error; delivery records every failure,
backs off and gives up; and the in-flight cap counts receivers, not the
spellings of their URLs. The delivery tests run real Celery workers and beat
against real receivers on loopback."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone
from hypothesis import given, settings
from hypothesis import strategies as st

from loops.spec import builtin_suite
from reviewqueue import webhooks
from reviewqueue.models import WebhookDelivery
from reviewqueue.tokens import issue_token
from reviewqueue.webhooks import CallbackRefused, parse_callback

from ..worker_helpers import wait_for
from .deployment import Deployment
from .receiver import Receiver, receiving

MALFORMED = [
    "http://[::1/",  # an unclosed IPv6 bracket
    "http://a\u2100b:8999/",  # NFKC turns the netloc's U+2100 into "a/c"
    "http://x\uff03y:8999/",  # NFKC turns a full-width number sign into "#"
    "http://127.0.0.1\uff1a8999/",  # a full-width colon
    "http://localhost..:8999/hook",  # empty labels: the dots were stripped, httpx then fails
    "http://127.0.0.1..:8999/hook",
    "http://[fe80::1%25lo]:8999/",  # a zone id
    "http://127.0.0.1:+8999/",
    "http://127.0.0.1:0/",
]


def post(client: Client, url: str, body: dict[str, Any], token: str) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    return client.post(url, data=json.dumps(body), content_type="application/json", headers=headers)


# --- finding: a malformed callback_url is a 400, not a 500 -------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", ["/api/outputs", "/api/tasks"])
@pytest.mark.parametrize("url", MALFORMED)
def test_a_malformed_callback_url_is_a_400_naming_the_field(
    client: Client, settings: Any, endpoint: str, url: str
) -> None:
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1:8999", "localhost:8999", "[::1]", "[fe80::1]:8999"]
    token = issue_token(name="acme", scopes=["outputs", "tasks"], webhook_url="http://127.0.0.1:8999/hook")[1]
    if endpoint == "/api/outputs":
        body = {"idempotency_key": "k-1", "task_description": "t", "final_output": "o", "callback_url": url}
    else:
        body = {"task": builtin_suite()[0].to_dict(), "run_id": "r-1", "callback_url": url}
    response = post(client, endpoint, body, token)
    assert response.status_code == 400, response.content[:300]
    answer = response.json()
    assert answer["error"] == "callback_url_invalid"
    assert "callback_url" in answer["fields"]


@pytest.mark.django_db
@pytest.mark.parametrize("url", MALFORMED)
def test_create_api_token_refuses_a_malformed_webhook_with_a_clear_error(settings: Any, url: str) -> None:
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1:8999", "localhost:8999", "[::1]"]
    with pytest.raises(CommandError, match="^--webhook: "):
        call_command("create_api_token", "acme", webhook=url, stdout=io.StringIO(), stderr=io.StringIO())


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.text(max_size=80),
        st.builds(
            lambda scheme, host, port, rest: f"{scheme}://{host}{port}{rest}",
            st.sampled_from(["http", "https", "HTTP", "ftp", ""]),
            st.text(alphabet="ab1.-:[]%@\u2100\uff03\uff0e\u3002\u00e9\u200b_", max_size=20),
            st.one_of(st.just(""), st.text(alphabet="0123456789:+_\u00b2", max_size=8).map(lambda p: ":" + p)),
            st.text(alphabet="/?#a.", max_size=5),
        ),
    )
)
def test_the_parser_ends_any_text_in_a_target_or_callback_url_invalid(url: str) -> None:
    """Whatever the text: a target whose host the sender can connect to as
    checked, or CallbackRefused; never another exception."""
    try:
        target = parse_callback(url)
    except CallbackRefused as refused:
        assert refused.code == "callback_url_invalid"
        return
    assert target.host.isascii() and 0 < target.port < 65536
    assert parse_callback(str(target.url)).receiver == target.receiver, "the sender's URL is the checked receiver"
    assert target.receiver == f"{target.scheme}://{target.host}:{target.port}"


def test_spellings_of_one_receiver_have_one_key() -> None:
    spellings = [
        "http://127.0.0.1:18807/hook",
        "http://127.0.0.1:018807/other",
        "http://127.0.0.1:0018807/?x=1",
        "HTTP://127.0.0.1:18807",
    ]
    assert {webhooks.receiver_key(url) for url in spellings} == {"http://127.0.0.1:18807"}
    named = ["https://Hooks.Example.com/a", "https://hooks.example.com.:443/b", "https://hooks.example.com:0443/"]
    assert {webhooks.receiver_key(url) for url in named} == {"https://hooks.example.com:443"}
    assert webhooks.receiver_key("http://[0:0::1]:80/") == webhooks.receiver_key("http://[::1]/")
    assert webhooks.receiver_key("http://127.0.0.1:18808/") != webhooks.receiver_key("http://127.0.0.1:18807/")


# --- delivery catches every failure (in this process) ------------------------------------------


@pytest.mark.django_db
def test_an_exception_from_the_http_library_is_recorded_backed_off_and_given_up(
    decided: Any, receiver: Receiver, announced: list[int], monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """httpx can raise more than httpx errors (UnicodeError from IDNA was one):
    whatever it raises is the attempt's answer, never an escaped exception."""

    def explode(*args: Any, **kwargs: Any) -> Any:
        raise UnicodeError("label empty or too long")

    monkeypatch.setattr("httpx.Client.stream", explode)
    decided()
    row = WebhookDelivery.objects.get()
    before = timezone.now()
    assert webhooks.deliver(row.pk) == "retry"
    row.refresh_from_db()
    assert row.status == "pending" and row.locked_until is None
    assert row.last_error.startswith("UnicodeError: label empty")
    assert row.next_attempt_at >= before + timedelta(seconds=1), "backed off"
    # past the give-up age, the same failure gives the event up
    WebhookDelivery.objects.filter(pk=row.pk).update(
        next_attempt_at=timezone.now(), created_at=timezone.now() - timedelta(seconds=settings.WEBHOOK_GIVE_UP_SECONDS)
    )
    assert webhooks.deliver(row.pk) == "failed"
    row.refresh_from_db()
    assert (row.status, row.attempts) == ("failed", 2)
    assert receiver.requests == []


@pytest.mark.django_db
def test_an_answer_or_error_holding_text_postgresql_refuses_is_still_recorded_and_backed_off(
    decided: Any, receiver: Receiver, announced: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A receiver's answer with NUL bytes, or an exception whose text holds a
    NUL or a lone surrogate: recording it must not fail (PostgreSQL refuses
    both in text), or the row stays leased, unrecorded and never backed off."""
    receiver.default, receiver.reply = 500, b"bad\x00gateway \xff"
    decided()
    row = WebhookDelivery.objects.get()
    before = timezone.now()
    assert webhooks.deliver(row.pk) == "retry"
    row.refresh_from_db()
    assert (row.status, row.last_status_code, row.locked_until) == ("pending", 500, None)
    assert row.last_error.startswith("HTTP 500: bad\ufffdgateway")
    assert row.next_attempt_at >= before + timedelta(seconds=1), "backed off"

    def explode(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("odd \x00 text \ud800 here")

    monkeypatch.setattr("httpx.Client.stream", explode)
    WebhookDelivery.objects.filter(pk=row.pk).update(next_attempt_at=timezone.now())
    assert webhooks.deliver(row.pk) == "retry"
    row.refresh_from_db()
    assert (row.status, row.attempts, row.locked_until) == ("pending", 2, None)
    assert row.last_error == "ValueError: odd \ufffd text \ufffd here"


# --- real workers ------------------------------------------------------------------------------


def status_of(*rows: WebhookDelivery) -> list[str]:
    by_pk = dict(WebhookDelivery.objects.filter(pk__in=[r.pk for r in rows]).values_list("pk", "status"))
    return [by_pk[r.pk] for r in rows]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_url_the_sender_cannot_use_fails_with_its_reason_and_frees_the_receivers_slots(
    deploy: Callable[..., Deployment],
) -> None:
    """The reported crash-loop: rows for ``http://localhost..:PORT/`` (taken
    in by the old check) made httpx raise UnicodeError, were retried forever
    with no last_error and held the receiver's two in-flight slots. Now the
    one parser refuses them at the attempt: failed, with the reason, and the
    receiver's real events go out."""
    with receiving() as receiver:
        allowed = f"{receiver.host},localhost:{receiver.port}"
        system = deploy(receiver, WEBHOOK_ALLOWED_HOSTS=allowed)
        bad = [system.event(f"http://localhost..:{receiver.port}/hook") for _ in range(2)]
        system.start(concurrency=2)
        wait_for(lambda: status_of(*bad) == ["failed", "failed"], timeout=60, what="the bad rows given up")
        good = system.event(receiver.url)
        wait_for(lambda: status_of(good) == ["delivered"], timeout=60, what="the receiver's real event")
        for row in bad:
            row.refresh_from_db()
            assert "not a valid host name" in row.last_error
            assert row.attempts == 1 and row.locked_until is None
        assert [r.event["id"] for r in receiver.requests] == [good.event_id]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_records_and_backs_off_an_answer_holding_a_nul_byte(
    deploy: Callable[..., Deployment],
) -> None:
    """A receiver whose error answers hold NUL bytes: the worker records each
    attempt (the error cleaned) and backs off, and the event goes out once
    the receiver answers 200. Recording used to fail on PostgreSQL: the row
    stayed leased with no last_error, and was only tried again when its lease
    ran out."""
    with receiving(default=500, reply=b"down\x00\x00") as receiver:
        system = deploy(receiver)
        row = system.event(receiver.url)
        system.start(concurrency=2)

        def recorded() -> bool:
            row.refresh_from_db()
            return row.last_error.startswith("HTTP 500: down") and row.locked_until is None

        wait_for(recorded, timeout=60, what="the 500 recorded")
        assert row.status == "pending" and row.last_status_code == 500
        assert row.last_error == "HTTP 500: down\ufffd\ufffd"
        assert row.next_attempt_at > row.last_attempt_at, "backed off"
        receiver.default = 200
        wait_for(lambda: status_of(row) == ["delivered"], timeout=90, what="the event, once answered 200")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_in_flight_cap_counts_one_receiver_however_its_port_is_spelled(
    deploy: Callable[..., Deployment],
) -> None:
    """``:PORT``, ``:0PORT``, ``:00PORT`` and ``:000PORT`` are one receiver: with
    the default cap of 2, never more than two of its attempts hang at once."""
    gate = threading.Event()
    with receiving(gate=gate) as receiver:
        system = deploy(receiver, WEBHOOK_TIMEOUT_SECONDS="8")
        urls = [f"http://127.0.0.1:{'0' * zeros}{receiver.port}/hook" for zeros in range(4)]
        rows = [system.event(url) for url in urls]
        system.start(concurrency=4)
        assert receiver.arrived.wait(30), "no attempt reached the receiver"
        time.sleep(5)  # room for every spelling's attempt to start, and a sweep to run
        held = receiver.most_inside
        gate.set()
        wait_for(lambda: status_of(*rows) == ["delivered"] * 4, timeout=90, what="all four events")
        assert held == 2, f"{held} attempts hung at one receiver at once; the cap is 2"
        assert receiver.most_inside <= 2


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_example_agents_receiver_verifies_real_deliveries_and_takes_each_signed_id_once(
    deploy: Callable[..., Deployment],
) -> None:
    """docs/examples/agent.py's receiver against a real worker: the standard
    signature verifies with the secret as issued, and a redelivery (same
    signed id) is answered 2xx without being taken twice."""
    from tests.client.test_example_agent import load_agent

    agent = load_agent()
    waiter = agent.WebhookWaiter("whsec_" + "A" * 43 + "=")
    try:
        netloc = urlsplit(waiter.callback_url).netloc
        # the allow-list and the token's default name the agent's receiver
        system = deploy(SimpleNamespace(host=netloc, url=waiter.callback_url))
        waiter.secret = webhooks.secret_for("acme")
        row = system.event(waiter.callback_url)
        system.start(concurrency=2)
        assert waiter.wait(row.item_id, timeout=60) == agent.Verdict("shed")
        wait_for(lambda: status_of(row) == ["delivered"], timeout=30, what="the delivery recorded")
        assert webhooks.redeliver([row.pk]) == 1
        wait_for(
            lambda: status_of(row) == ["delivered"] and WebhookDelivery.objects.get(pk=row.pk).attempts == 2,
            timeout=60,
            what="the redelivery",
        )
        assert waiter.events.empty(), "the redelivered event was taken twice"
        assert waiter.seen == {row.event_id}
    finally:
        waiter.close()
