"""Celery entry points for loop runs; the work is in ``services.runs``."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.db import InterfaceError, OperationalError

from .. import task_names
from ..services import runs

__all__ = ["RETRYABLE", "resubmit_stale_runs", "run_loop"]

# Transient database trouble (a dropped connection, a lock timeout) is worth a
# retry with backoff; anything else is a bug or bad input and is recorded.
RETRYABLE = (OperationalError, InterfaceError)


@shared_task(
    name=task_names.RUN_LOOP,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=RETRYABLE,
    retry_backoff=True,
    retry_backoff_max=60,
    max_retries=5,
)
def run_loop(
    *,
    task: dict[str, Any],
    run_id: str,
    agent: str = "scripted",
    agent_options: dict | None = None,
    producer: str = "",
) -> str:
    """Run one agent loop and record its outcome (services.runs.execute_run).

    Safe to run twice: a finished run answers its recorded outcome; a run cut
    short by a killed worker runs again, and admit()'s idempotency key (the
    run id) keeps the second pass from adding a second item.
    """
    return runs.execute_run(task=task, run_id=run_id, agent=agent, agent_options=agent_options, producer=producer)


@shared_task(name=task_names.RESUBMIT_STALE_RUNS)
def resubmit_stale_runs() -> int:
    """Send again every run whose message was lost with a killed worker
    (services.runs.resubmit_stale_runs). Safe to repeat: run_loop is
    idempotent on the run id."""
    return runs.resubmit_stale_runs()
