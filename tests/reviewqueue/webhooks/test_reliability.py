"""Webhook delivery end to end: verdicts made in this process, real Celery
worker processes and beat delivering them, real HTTP receivers on loopback.

Runs against Redis when REDIS_URL is set, else the embedded SQLite broker; the
two-minute outage runs only on PostgreSQL + Redis (see its skip reason).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from reviewqueue import webhooks
from reviewqueue.models import LoopRun, WebhookDelivery
from reviewqueue.tokens import issue_token

from ..worker_helpers import children, finished, publishing_to, send, sender, wait_for
from .deployment import Deployment
from .receiver import Receiver, receiving

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def deploy(broker_url: str, tmp_path: Path, reviewer: Any, settings: Any) -> Iterator[Callable[..., Deployment]]:
    made: list[Deployment] = []

    def make(*receivers: Receiver, **env: str) -> Deployment:
        settings.WEBHOOK_ALLOWED_HOSTS = [r.host for r in receivers]
        issue_token(name="acme", scopes=["outputs"], webhook_url=receivers[0].url)
        deployment = Deployment(broker_url, tmp_path, reviewer, list(receivers), **env)
        made.append(deployment)
        return deployment

    with publishing_to(broker_url):
        yield make
    for deployment in made:
        deployment.stop()


def delivered(*rows: WebhookDelivery) -> bool:
    return WebhookDelivery.objects.filter(pk__in=[r.pk for r in rows], status="delivered").count() == len(rows)


def test_a_verdict_reaches_the_receiver_with_a_valid_signature(deploy: Callable[..., Deployment]) -> None:
    with receiving() as receiver:
        system = deploy(receiver)
        system.start(concurrency=2)
        row = system.verdict(receiver.url, approve=False)
        wait_for(lambda: delivered(row), timeout=60, what="the verdict's event")
        (request,) = receiver.requests
        secret = webhooks.secret_for("acme")
        assert webhooks.verify(secret, request.headers, request.body)
        assert request.event["type"] == "item.decided" and request.event["data"]["decision"] == "reject"
        assert request.headers["webhook-id"] == request.event["id"] == row.event_id


def test_five_500s_then_a_200_is_one_success_with_the_retries_logged(deploy: Callable[..., Deployment]) -> None:
    with receiving(statuses=[500] * 5) as receiver:
        system = deploy(receiver)
        system.start(concurrency=2)
        row = system.verdict(receiver.url)
        wait_for(lambda: delivered(row), timeout=120, what="the sixth attempt")
        time.sleep(2)  # room for a wrongful extra attempt to show
        assert [r.status for r in receiver.requests] == [500] * 5 + [200]
        assert len({r.headers["webhook-id"] for r in receiver.requests}) == 1
        row.refresh_from_db()
        assert (row.status, row.attempts, row.last_status_code) == ("delivered", 6, 200)
        attempts = [line for line in system.log_lines() if line.get("message") == "webhook attempt"]
        outcomes = [line["outcome"] for line in sorted(attempts, key=lambda line: line["attempt"])]
        assert outcomes == ["retry"] * 5 + ["delivered"], outcomes
        assert all(line["event_id"] == row.event_id and line["next_attempt_at"] for line in attempts[:5])


def test_a_hanging_receiver_stalls_neither_the_workers_nor_other_receivers(
    deploy: Callable[..., Deployment], broker_url: str
) -> None:
    with receiving(hang=30) as hanging, receiving() as healthy:
        system = deploy(hanging, healthy, WEBHOOK_TIMEOUT_SECONDS="2")
        system.start(concurrency=4)
        stuck = [system.verdict(hanging.url) for _ in range(10)]
        fine = [system.verdict(healthy.url) for _ in range(10)]
        send(sender(broker_url), "is_even", run_id="beside-hooks")
        wait_for(lambda: delivered(*fine), timeout=90, what="the healthy receiver's events")
        wait_for(lambda: finished("beside-hooks"), timeout=60, what="a loop run beside the hanging receiver")
        # ordering, not wall time: all of these while every hanging event is still pending
        assert WebhookDelivery.objects.filter(pk__in=[r.pk for r in stuck], status="pending").count() == 10
        assert LoopRun.objects.get(run_id="beside-hooks").outcome == "auto_passed"
        assert sorted(e["id"] for e in healthy.events()) == sorted(r.event_id for r in fine)
        assert hanging.arrived.is_set() and hanging.events() == [], "attempts reached it and timed out"


def test_a_worker_killed_mid_delivery_leads_to_redelivery_and_nothing_lost(deploy: Callable[..., Deployment]) -> None:
    gate = threading.Event()
    with receiving(gate=gate) as receiver:
        system = deploy(receiver)
        worker = system.start(concurrency=1)
        row = system.verdict(receiver.url)
        assert receiver.arrived.wait(60), "the first attempt reached the receiver"
        killed = children(worker.pid)
        assert killed, "the prefork pool has a child process"
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        receiver.gate = None  # later attempts are answered at once
        gate.set()
        wait_for(lambda: delivered(row), timeout=120, what="the redelivery after the lease lapsed")
        row.refresh_from_db()
        ids = Counter(r.headers["webhook-id"] for r in receiver.requests)
        print(f"\nkilled pool child {killed}: attempts={row.attempts}, requests={dict(ids)}")
        assert set(ids) == {row.event_id} and ids[row.event_id] >= 2
        assert row.attempts >= 2, "the killed attempt counted"


@pytest.mark.skipif(
    not os.environ.get("REDIS_URL") or not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="the two-minute outage with 100 verdicts runs on PostgreSQL + Redis (the embedded broker and "
    "SQLite serialise the workers and this test's writers, which makes it a test of SQLite's locking)",
)
def test_a_receiver_down_for_two_minutes_gets_all_100_verdicts_once_back(deploy: Callable[..., Deployment]) -> None:
    receiver = Receiver()  # not started: connections to its port are refused
    system = deploy(receiver, WEBHOOK_RETRY_MAX_SECONDS="15")
    system.start(concurrency=4)
    down_since = time.monotonic()
    rows = []
    for _ in range(100):
        rows.append(system.verdict(receiver.url))
        time.sleep(0.5)  # verdicts spread over the outage, as reviewers make them
    wait_for(lambda: time.monotonic() - down_since >= 120, timeout=130, what="two minutes of outage")
    assert WebhookDelivery.objects.filter(status="delivered").count() == 0
    assert WebhookDelivery.objects.filter(attempts__gt=1).count() > 50, "the events were being retried"
    receiver.start()
    try:
        wait_for(lambda: delivered(*rows), timeout=180, what="all 100 events after the outage")
        received = {e["id"] for e in receiver.events()}
        assert received == {r.event_id for r in rows}
        duplicates = receiver.count() - len(received)
        print(f"\n100 events after a 2-minute outage: {receiver.count()} requests, {duplicates} duplicates")
    finally:
        receiver.stop()
    assert connection.vendor == "postgresql"


def test_a_verdict_made_while_the_broker_is_down_is_delivered_once_it_is_back(
    broker_url: str, tmp_path: Path, reviewer: Any, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The outbox row commits with the verdict; the lost announcement costs
    only time: the sweep (beat, once the broker is back) sends it."""
    from ..worker_helpers import RedisServer

    broker = RedisServer(tmp_path)  # not started yet: the broker is down
    with receiving() as receiver, publishing_to(broker.url):
        settings.WEBHOOK_ALLOWED_HOSTS = [receiver.host]
        issue_token(name="acme", scopes=["outputs"], webhook_url=receiver.url)
        system = Deployment(broker.url, tmp_path, reviewer, [receiver])
        started = time.monotonic()
        row = system.verdict(receiver.url)
        print(f"\nverdict with the broker down took {time.monotonic() - started:.2f} s")
        assert "webhook announcement failed" in caplog.text
        assert WebhookDelivery.objects.get(pk=row.pk).status == "pending"
        broker.start()
        try:
            system.start(concurrency=1)
            wait_for(lambda: delivered(row), timeout=90, what="the sweep to send the event")
        finally:
            system.stop()
            broker.stop()
    assert [e["id"] for e in receiver.events()] == [row.event_id]
