"""Celery tasks. Each takes ids or plain dicts, claims its row, calls a
service, and is safe to run twice."""

from __future__ import annotations

import logging
import random
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from celery import shared_task
from django.db import InterfaceError, OperationalError, transaction
from django.db.models import F
from django.utils import timezone

from . import policy, services
from .models import LoopRun, QueuePolicy, ReviewItem

if TYPE_CHECKING:
    from loops.spec import Task

log = logging.getLogger(__name__)

# Transient database trouble (a dropped connection, a lock timeout) is worth a
# retry with backoff; anything else is a bug or bad input and is recorded.
RETRYABLE = (OperationalError, InterfaceError)


# A producer waits only briefly for a broker that is down (Celery's publish
# retry policy, task_publish_retry_policy). After that submit_loop raises
# BrokerUnavailable; the committed row is marked, and the producer's own retry
# with backoff and the same run id (or resubmit_stale_runs, at worst) sends it.
PUBLISH_FAILED = "publish failed"


class BrokerUnavailable(Exception):
    """The run is recorded but its message could not be sent: retry the same run id."""

    def __init__(self, run_id: str, message: str) -> None:
        super().__init__(message)
        self.run_id = run_id


def submit_loop(
    *,
    task: dict[str, Any],
    run_id: str,
    agent: str = "scripted",
    agent_options: dict | None = None,
    producer: str = "",
) -> LoopRun:
    """submit_run() for callers that need only the run."""
    return submit_run(task=task, run_id=run_id, agent=agent, agent_options=agent_options, producer=producer)[0]


def submit_run(
    *,
    task: dict[str, Any],
    run_id: str,
    agent: str = "scripted",
    agent_options: dict | None = None,
    producer: str = "",
) -> tuple[LoopRun, bool]:
    """Record a loop run and enqueue it once the row is committed; returns the
    run and whether this call created it. Run ids are unique per ``producer``
    (an API token's name; blank for operators' runs).

    Safe to repeat, concurrently too: the (producer, run id) constraint lets
    exactly one call create the row and enqueue it; every other call returns
    the existing row with created False and enqueues nothing, unless the
    earlier publish failed (broker down), in which case it is sent again.
    Raises BrokerUnavailable when the broker stays unreachable."""
    from loops.spec import Task

    parsed = Task.from_dict(services.clean_json(task))  # TaskError on a bad task, before anything is stored
    with transaction.atomic():
        run, created = _record_run(parsed, run_id, agent, agent_options, producer)
        unsent = (
            not created
            and run.outcome == LoopRun.Outcome.RUNNING
            and run.deliveries == 0
            and run.error.startswith(PUBLISH_FAILED)
        )
        if created or unsent:
            kwargs = {"task": parsed.to_dict(), "run_id": run_id, "agent": agent, "agent_options": agent_options}
            if producer:  # only when set: messages stay readable by workers that predate producers
                kwargs["producer"] = producer
            transaction.on_commit(lambda: _publish(kwargs, resend=unsent))
    return run, created


def _record_run(
    parsed: Task, run_id: str, agent: str, agent_options: dict | None, producer: str = ""
) -> tuple[LoopRun, bool]:
    """The run's row, created on first sight of (producer, run id), the idempotency key of a loop."""
    return LoopRun.objects.get_or_create(
        producer=producer,
        run_id=run_id,
        defaults={
            "task_id": parsed.id,
            "task_kind": str(parsed.kind),
            "task": parsed.to_dict(),
            "agent": agent,
            "agent_options": agent_options or {},
        },
    )


def _publish(kwargs: dict[str, Any], *, resend: bool) -> None:
    """Send run_loop, retrying with backoff while the broker is unreachable;
    a failure is written on the run so a repeated submit knows to resend."""
    from kombu.exceptions import OperationalError as BrokerError

    run_id, producer = kwargs["run_id"], kwargs.get("producer", "")
    try:
        run_loop.delay(**kwargs)
    except BrokerError as exc:
        LoopRun.objects.filter(producer=producer, run_id=run_id, outcome=LoopRun.Outcome.RUNNING, deliveries=0).update(
            error=f"{PUBLISH_FAILED}: {exc}"[:2000]
        )
        log.warning("loop not sent: broker unavailable", extra={"run_id": run_id, "error": str(exc)[:200]})
        raise BrokerUnavailable(run_id, f"run {run_id} is recorded but the broker is unreachable: {exc}") from exc
    if resend:
        LoopRun.objects.filter(producer=producer, run_id=run_id, error__startswith=PUBLISH_FAILED).update(error="")


@shared_task(
    name="reviewqueue.tasks.run_loop",
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
    """Run one agent loop with the live step limit and mode, then record the
    outcome: converged -> auto-passed (grey tasks maybe sampled into the
    queue), cut off -> admit().

    Safe to run twice: a finished run answers its recorded outcome; a run cut
    short by a killed worker runs again, and admit()'s idempotency key (the
    run id) keeps the second pass from adding a second item.
    """
    from loops.agents import AgentError, make_agent
    from loops.cutoff import cutoff_summary
    from loops.runner import LoopConfig, run_task
    from loops.sandbox import SandboxUnavailable
    from loops.spec import Task, TaskKind

    parsed = Task.from_dict(services.clean_json(task))
    run, _ = _record_run(parsed, run_id, agent, agent_options, producer)
    if run.outcome != LoopRun.Outcome.RUNNING:
        return run.outcome
    LoopRun.objects.filter(pk=run.pk).update(deliveries=F("deliveries") + 1, updated_at=timezone.now())

    queue = QueuePolicy.current()
    draft = policy.loop_runs_draft(policy.Mode(queue.mode))
    config = LoopConfig(step_limit=queue.step_limit, draft=draft, gates=tuple(services.enabled_gates()))
    try:
        result = run_task(parsed, make_agent(agent, task=parsed, **(agent_options or {})), config)
    except SandboxUnavailable as exc:
        # Fail closed: hidden checks never run unsandboxed unless REDLINE_SANDBOX=none.
        LoopRun.objects.filter(pk=run.pk, outcome=LoopRun.Outcome.RUNNING).update(
            outcome=LoopRun.Outcome.FAILED, error=str(exc)[:2000], finished_at=timezone.now()
        )
        log.error("loop failed: red line not sandboxed", extra={"run_id": run_id, "error": str(exc)[:200]})
        return LoopRun.Outcome.FAILED
    except AgentError as exc:
        LoopRun.objects.filter(pk=run.pk, outcome=LoopRun.Outcome.RUNNING).update(
            outcome=LoopRun.Outcome.FAILED, error=str(exc)[:2000], finished_at=timezone.now()
        )
        log.warning("loop failed: agent error", extra={"run_id": run_id, "error": str(exc)[:200]})
        return LoopRun.Outcome.FAILED

    item: ReviewItem | None = None
    sampled = False
    # The reviewer sees the best attempt, its grade and its failing checks.
    summary = cutoff_summary(result)
    common = {
        "idempotency_key": f"run:{run_id}",
        "task_description": parsed.description,
        "final_output": result.final_output,
        "last_error": result.last_error,
        "attempt_count": result.attempts,
        "reviewed_attempt": summary["reviewed_attempt"],
        "checks_passed": summary["checks_passed"],
        "checks_total": summary["checks_total"],
        "failing_checks": summary["failing_checks"],
        "reviewed_score": summary["reviewed_score"],
        "priority": parsed.priority,
        "task_id": parsed.id,
        "task_kind": str(parsed.kind),
        "source_run_id": run_id,
        # A submitted run's item belongs to its producer (its key is unique
        # only within that producer's keys, as the run id is); operators' runs
        # are filed under the agent that ran them.
        "producer": producer or f"loop:{agent}",
    }
    if result.converged:
        outcome = LoopRun.Outcome.AUTO_PASSED
        rate = parsed.sampling_rate if parsed.sampling_rate is not None else queue.sampling_rate
        # Seeded by the run id, so a rerun samples the same way.
        if parsed.kind is TaskKind.GREY and policy.sample_for_audit(random.Random(run_id), rate):
            sampled = True
            item = services.admit(**common, cutoff_reason="sampled", label=ReviewItem.Label.SAMPLED).item
    else:
        admitted = services.admit(**common, cutoff_reason=result.stop_reason, draft=result.draft)
        item = admitted.item
        outcome = LoopRun.Outcome(admitted.outcome) if admitted.outcome != "duplicate" else _earlier_outcome(item)

    LoopRun.objects.filter(pk=run.pk, outcome=LoopRun.Outcome.RUNNING).update(
        outcome=outcome,
        stop_reason=result.stop_reason,
        attempts=result.attempts,
        tokens=result.tokens,
        grades=list(result.grades),
        scores=list(result.scores),
        checks_total=result.checks_total or None,
        reviewed_attempt=result.reviewed_attempt,
        step_limit=config.step_limit,
        draft=result.draft,
        sampled=sampled,
        item=item,
        finished_at=timezone.now(),
    )
    log.info(
        "loop finished",
        extra={
            "run_id": run_id,
            "task": parsed.id,
            "outcome": outcome,
            "stop_reason": result.stop_reason,
            "attempts": result.attempts,
            "reviewed_attempt": result.reviewed_attempt,
            "draft": result.draft,
        },
    )
    return outcome


@shared_task(name="reviewqueue.tasks.resubmit_stale_runs")
def resubmit_stale_runs() -> int:
    """Send again every run that has been "running" for longer than any task
    may take: its message was lost with a killed worker. Safe to repeat:
    run_loop is idempotent on the run id."""
    from django.conf import settings

    cutoff = timezone.now() - timedelta(seconds=settings.REVIEWQUEUE_STALE_RUN_SECONDS)
    stale = list(LoopRun.objects.filter(outcome=LoopRun.Outcome.RUNNING, updated_at__lt=cutoff)[:500])
    for run in stale:
        LoopRun.objects.filter(pk=run.pk).update(updated_at=timezone.now())
        extra = {"producer": run.producer} if run.producer else {}
        run_loop.delay(task=run.task, run_id=run.run_id, agent=run.agent, agent_options=run.agent_options, **extra)
    if stale:
        log.warning("resubmitted stale loop runs", extra={"count": len(stale)})
    return len(stale)


def _earlier_outcome(item: ReviewItem) -> str:
    """What a first, interrupted pass of this run did with its output."""
    if item.status == ReviewItem.Status.FILTERED:
        return LoopRun.Outcome.FILTERED
    if item.shed_entries.filter(incoming=True).exists():
        return LoopRun.Outcome.SHED
    return LoopRun.Outcome.ENQUEUED


# The operators' periodic and what-if tasks live beside these; importing them
# here registers them with the worker, which autodiscovers this module only.
from .ops_tasks import run_simulation, sample_depth

__all__ = [
    "BrokerUnavailable",
    "resubmit_stale_runs",
    "run_loop",
    "run_simulation",
    "sample_depth",
    "submit_loop",
    "submit_run",
]
