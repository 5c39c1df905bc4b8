"""A real Celery worker process: loops run through the broker, and a worker
killed with SIGKILL mid-loop loses nothing and duplicates nothing.

Runs against Redis when REDIS_URL is set, else the embedded SQLite broker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from reviewqueue.models import LoopRun, ReviewItem

from ..worker_helpers import SLOW_AGENT, Workers, children, finished, send, sender, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def start_worker(broker_url: str, tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen]]:
    workers = Workers(broker_url, tmp_path)
    yield workers.start
    workers.kill_all()


def test_a_real_worker_runs_the_suite_through_the_broker(start_worker: Any, broker_url: str) -> None:
    start_worker(concurrency=2)
    app = sender(broker_url)
    ids = ["is_even", "to_bin", "release_note"]
    for task_id in ids:
        send(app, task_id, run_id=f"suite-{task_id}")
    wait_for(lambda: finished(*(f"suite-{t}" for t in ids)))
    outcomes = dict(LoopRun.objects.values_list("task_id", "outcome"))
    assert outcomes == {"is_even": "auto_passed", "to_bin": "enqueued", "release_note": "enqueued"}
    assert ReviewItem.objects.count() == 2


def test_a_worker_child_killed_mid_loop_is_redelivered_without_loss_or_duplicate(
    start_worker: Any, broker_url: str
) -> None:
    worker = start_worker(concurrency=1)
    send(sender(broker_url), "to_bin", run_id="kill-1", agent="command", agent_options={"command": SLOW_AGENT})
    wait_for(lambda: LoopRun.objects.filter(run_id="kill-1", deliveries=1).exists())
    time.sleep(1.5)  # into the second attempt
    assert LoopRun.objects.get(run_id="kill-1").outcome == "running"
    killed = children(worker.pid)
    assert killed, "the prefork pool has a child process"
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: finished("kill-1"), timeout=90)
    run = LoopRun.objects.get(run_id="kill-1")
    print(f"\nkilled pool child {killed}: deliveries={run.deliveries}, outcome={run.outcome}")
    assert run.deliveries >= 2
    assert run.outcome == "enqueued"
    assert ReviewItem.objects.filter(source_run_id="kill-1").count() == 1


def test_a_regressing_loop_reaches_the_reviewers_card_as_its_best_attempt_labelled_regression(
    start_worker: Any, broker_url: str, reviewer: Any
) -> None:
    start_worker(concurrency=1)
    send(sender(broker_url), "roman", run_id="regress-1")
    wait_for(lambda: finished("regress-1"))
    run = LoopRun.objects.get(run_id="regress-1")
    assert (run.outcome, run.stop_reason, run.grades) == ("enqueued", "regression", [1, 3, 4, 1, 0])

    client = Client()
    client.force_login(reviewer)
    client.post(reverse("review:next"))  # claim, as the Start button does
    card = client.get(reverse("review:queue")).content.decode()
    assert "regression: later attempts got worse" in card
    assert "attempt 3 of 5, the best: 4 of 5 checks" in card
    assert "Error of attempt 3" in card and "AssertionError at check_5 (attempt 3)" in card
    assert "<code>check_5</code> subtractive forty" in card
    # attempt 3's output (a table of digits), not attempt 5's broken NUMERALS rewrite
    assert "digit" in card and "NUMERALS" not in card
    assert "NUMERALS" not in ReviewItem.objects.get(source_run_id="regress-1").final_output
