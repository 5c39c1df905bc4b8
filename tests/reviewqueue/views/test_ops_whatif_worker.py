"""A large what-if runs on a real Celery prefork worker, as in production.

A prefork pool child is a daemonic process, and a daemonic process may not
start a process pool of its own: the simulation must stay in the child.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from reviewqueue.models import SimulationRun

from ..worker_helpers import Workers, publishing_to, wait_for
from .test_ops_whatif import _preset_form

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def start_worker(broker_url: str, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    # The simulation task sets its own time limits; the worker's defaults stay.
    workers = Workers(broker_url, tmp_path, CELERY_TASK_SOFT_TIME_LIMIT="300", CELERY_TASK_TIME_LIMIT="360")
    yield workers.start
    workers.kill_all()


def test_300_replications_finish_on_a_prefork_worker(
    client: Any, operator: Any, start_worker: Any, broker_url: str
) -> None:
    start_worker(concurrency=1)
    client.force_login(operator)
    with publishing_to(broker_url):
        response = client.post(reverse("ops:whatif_run"), _preset_form("B", replications=300))
    assert response.status_code == 302
    run = SimulationRun.objects.get()
    wait_for(lambda: SimulationRun.objects.filter(pk=run.pk, status__in=("done", "failed")).exists(), timeout=120)
    run.refresh_from_db()
    assert run.error == ""
    assert run.status == SimulationRun.Status.DONE
    assert run.result["replications"] == 300
    assert run.progress_done == run.progress_total == 300


def test_an_add_queue_what_if_finishes_on_a_prefork_worker(
    client: Any, operator: Any, start_worker: Any, broker_url: str
) -> None:
    from reviewqueue import services
    from reviewqueue.models import Queue

    from .test_ops_queues_whatif import _form

    Queue.default()  # a flushed database has none until someone asks for it
    services.create_queue(user=operator, slug="team-a", settings={"capacity": 30})
    services.create_queue(user=operator, slug="team-b", settings={"capacity": 60})
    start_worker(concurrency=1)
    client.force_login(operator)
    with publishing_to(broker_url):
        response = client.post(reverse("ops:queues_whatif_run"), _form(hours=24, replications=30))
    assert response.status_code == 302
    run = SimulationRun.objects.get()
    wait_for(lambda: SimulationRun.objects.filter(pk=run.pk, status__in=("done", "failed")).exists(), timeout=120)
    run.refresh_from_db()
    assert run.error == ""
    assert run.status == SimulationRun.Status.DONE
    assert run.progress_done == run.progress_total == 60
    assert set(run.result["changes"]) == {"default", "team-a", "team-b"}
