"""Faults: Redis (broker and cache) stops for REVIEWQUEUE_REDIS_OUTAGE_SECONDS
(30 s by default) while producers submit loops and a worker runs them.

The web UI keeps serving, producers back off and retry, and once Redis is
back every submitted run finishes exactly once. The Redis is a private
redis-server the test starts and stops, so this runs in every configuration.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from reviewqueue.models import LoopRun, ReviewItem
from reviewqueue.services.runs import PUBLISH_FAILED, BrokerUnavailable, submit_loop

from ..worker_helpers import SUITE, Workers, finished, private_redis, publishing_to, resubmit_stale, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

OUTAGE_SECONDS = float(os.environ.get("REVIEWQUEUE_REDIS_OUTAGE_SECONDS", "30"))
PRODUCERS = 3
PRODUCE_EVERY = 0.3  # seconds between two submissions of one producer
BACKOFF_START, BACKOFF_MAX = 0.25, 4.0
WORKER_ENV = {"CELERY_VISIBILITY_TIMEOUT": "15", "CELERY_TASK_SOFT_TIME_LIMIT": "8", "CELERY_TASK_TIME_LIMIT": "10"}
RESTORE_SWEEP = {"unacked_restore_interval": 5, "unacked_restore_throttle": 1}
QUICK_TASKS = ["is_even", "fizzbuzz", "to_bin", "release_note", "slugify"]


class Producer(threading.Thread):
    """Submits loops until told to stop; on BrokerUnavailable it sleeps with
    exponential backoff and submits the same run id again."""

    def __init__(self, number: int, stop: threading.Event) -> None:
        super().__init__(name=f"producer-{number}", daemon=True)
        self.number = number
        self.stop_event = stop
        self.submitted: list[str] = []
        self.failures = 0
        self.waits: list[float] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            n = 0
            while not self.stop_event.is_set():
                run_id = f"p{self.number}-{n:04d}"
                task = SUITE[QUICK_TASKS[n % len(QUICK_TASKS)]].to_dict()
                backoff = BACKOFF_START
                while True:
                    try:
                        submit_loop(task=task, run_id=run_id)
                        break
                    except BrokerUnavailable:
                        self.failures += 1
                        self.waits.append(backoff)
                        time.sleep(backoff)
                        backoff = min(backoff * 2, BACKOFF_MAX)
                self.submitted.append(run_id)
                n += 1
                time.sleep(PRODUCE_EVERY)
        except Exception as exc:  # noqa: BLE001 - reported by the test, not lost in the thread
            self.error = exc
        finally:
            connection.close()


def serves(client: Client, reviewer_client: Client) -> dict[str, int]:
    """One round of the UI a reviewer and a load balancer touch."""
    return {
        "health": client.get("/health/").status_code,
        "login": client.post("/login/", {"username": "rita", "password": "pw-for-tests-1"}).status_code,
        "review page": reviewer_client.get("/review/").status_code,
        "claim": reviewer_client.post("/review/next/").status_code,
    }


@pytest.mark.slow
def test_it_keeps_serving_and_loses_no_run_while_redis_is_down(tmp_path: Path, settings: Any, reviewer: Any) -> None:
    started = time.monotonic()
    with private_redis(tmp_path, persist=True) as redis, publishing_to(redis.url):
        # The login rate limiter's cache is on the same Redis, as in production.
        settings.CACHES = {
            "default": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": redis.url.rsplit("/", 1)[0] + "/1",
            }
        }
        for n in range(5):  # something to claim during the outage
            submit_loop(task=SUITE["release_note"].to_dict(), run_id=f"seed-{n}")
        workers = Workers(redis.url, tmp_path, transport_options=RESTORE_SWEEP, **WORKER_ENV)
        stop = threading.Event()
        producers = [Producer(n, stop) for n in range(PRODUCERS)]
        try:
            workers.start(concurrency=2)
            wait_for(lambda: ReviewItem.objects.count() >= 5, what="the seed runs")
            for producer in producers:
                producer.start()
            time.sleep(3)
            before = sum(len(p.submitted) for p in producers)

            client, reviewer_client = Client(), Client()
            reviewer_client.force_login(reviewer)
            redis.stop()
            down_at = time.monotonic()
            answers: Counter[str] = Counter()
            while time.monotonic() - down_at < OUTAGE_SECONDS:
                for page, status in serves(client, reviewer_client).items():
                    answers[f"{page} {status}"] += 1
                time.sleep(1)
            failures_during_outage = sum(p.failures for p in producers)
            redis.start()
            up_at = time.monotonic()

            time.sleep(BACKOFF_MAX + 4)  # producers get past their last backoff and carry on
            stop.set()
            for producer in producers:
                producer.join(timeout=30)
            submitted = [run_id for p in producers for run_id in p.submitted]
            # What beat's resubmit_stale_runs does every minute: resend runs
            # older than the outage that never started (a message that was in
            # flight when the connection broke). Idempotent for the rest.
            resent = resubmit_stale(redis.url, stale_seconds=int(OUTAGE_SECONDS))
            wait_for(lambda: finished(*submitted), timeout=90, what="the worker to drain after the outage")
            drained = time.monotonic() - up_at
        finally:
            stop.set()
            workers.kill_all()

    errors = [p.error for p in producers if p.error is not None]
    assert not errors, errors
    waits = [w for p in producers for w in p.waits]
    runs = LoopRun.objects.filter(run_id__in=submitted)
    outcomes = Counter(runs.values_list("outcome", flat=True))
    print(
        f"\nRedis down {OUTAGE_SECONDS:.0f} s: UI answers {dict(answers)}; {len(submitted)} runs submitted "
        f"({before} before the outage), {sum(p.failures for p in producers)} failed publishes retried "
        f"(longest wait {max(waits, default=0):.2f} s), {resent} resent by the stale-run sweep, "
        f"drained {drained:.0f} s after Redis returned, "
        f"outcomes {dict(outcomes)}, wall time {time.monotonic() - started:.0f} s"
    )
    # The web UI kept serving: health, sign-in (rate limiter fails open), the page, a claim.
    assert set(answers) == {"health 200", "login 302", "review page 200", "claim 302"}, answers
    # Producers met the outage, backed off (waits grew), and carried on afterwards.
    assert failures_during_outage > 0
    assert max(waits) > BACKOFF_START
    assert len(submitted) > before + PRODUCERS, "producers carried on after the outage"
    # Nothing lost, nothing twice.
    assert runs.count() == len(submitted) == len(set(submitted))
    assert not runs.filter(outcome=LoopRun.Outcome.RUNNING).exists()
    assert set(outcomes) <= {"auto_passed", "enqueued", "shed"}, outcomes
    assert not runs.filter(error__startswith=PUBLISH_FAILED).exists()
    assert ReviewItem.objects.filter(source_run_id__in=submitted).count() == len(
        set(ReviewItem.objects.filter(source_run_id__in=submitted).values_list("source_run_id", flat=True))
    )


def test_it_answers_503_and_sends_the_run_when_the_api_client_repeats_it(
    tmp_path: Path, django_user_model: Any
) -> None:
    from reviewqueue.tokens import issue_token

    _, token = issue_token(name="producer", scopes=["tasks"])
    client = Client(headers={"authorization": f"Bearer {token}"})
    body = {"run_id": "api-outage-1", "task": SUITE["is_even"].to_dict()}
    with private_redis(tmp_path) as redis, publishing_to(redis.url):
        redis.stop()
        refused = client.post("/api/tasks", body, content_type="application/json")
        assert LoopRun.objects.get(producer="producer", run_id="api-outage-1").error.startswith(PUBLISH_FAILED)
        redis.start()
        accepted = client.post("/api/tasks", body, content_type="application/json")
        queued = redis_queue_length(redis.url)
    assert refused.status_code == 503
    assert refused["Retry-After"]
    assert "api-outage-1" in refused.json()["detail"]
    assert accepted.status_code == 200
    assert queued == 1, "the repeated request sent the run"
    assert LoopRun.objects.get(producer="producer", run_id="api-outage-1").error == ""


def redis_queue_length(url: str) -> int:
    """Messages waiting in Celery's default queue on that Redis."""
    import redis

    return int(redis.Redis.from_url(url).llen("celery"))


def test_a_channel_whose_connection_is_gone_raises_a_connection_error(tmp_path: Path) -> None:
    # The kombu 5.7 failure reviewqueue.broker works around: after Celery
    # replaces a lost connection, the old channel still acknowledges or
    # restores messages. kombu's own transport then fails with AttributeError,
    # which kills the worker; ours raises the connection error Celery logs and survives.
    from kombu import Connection
    from kombu.transport.redis import Transport as KombuTransport
    from redis.exceptions import ConnectionError as RedisConnectionError

    from reviewqueue.broker import Transport

    with private_redis(tmp_path) as redis:
        for transport, error in [(KombuTransport, AttributeError), (Transport, RedisConnectionError)]:
            conn = Connection(redis.url, transport=transport)
            channel = conn.channel()
            channel.client.ping()  # a working channel first
            conn.transport.client = None  # what closing the lost connection leaves behind
            with pytest.raises(error):
                channel.basic_ack("a-delivery-tag")
            conn.transport.client = conn
            conn.release()
