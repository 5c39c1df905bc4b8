"""Loop runs: submitting a run, publishing it to a worker, and recording what
the loop did (auto-passed, sampled for audit, admitted, or failed).

The Celery tasks in ``reviewqueue.tasks`` are thin entry points into this
module; it never imports them. It publishes ``run_loop`` by looking the task
up by its stable registered name in the current Celery app's registry
(``task_names.RUN_LOOP``), so there is no import cycle between services and tasks.
The registry holds the same task object that ``reviewqueue.tasks.loops``
defines (the app config imports the tasks package whenever Django starts), so
eager mode, routes, the publish retry policy and a test's patch of
``run_loop.delay`` all apply as to a direct call. ``Celery.send_task`` was not
used: it ignores eager mode, which the benches run in.

Queue state changes go through the admission service (``admission.admit``),
so the locking and repeat-safety stated there hold here too. It imports the
service modules it calls rather than the package, so that ``verdicts`` can
resume a sent-back run through here without an import cycle.

A run *resumed* after a reviewer sent its item back (``resume_sent_back``) is
an ordinary run with ``resumed_from`` and ``resume_note`` set: its row is
written in the send-back's transaction and published after the commit, due
once the send-back is final (``finality``): no worker starts it, and its
producer cannot read it, before the undo window has closed. The loop starts
from the sent-back output with the note in its prompts. If it is cut off
again, its item is the next version of the one sent back.
"""

from __future__ import annotations

import logging
import random
import re
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from reviewqueue import policy

from .. import task_names
from ..finality import final_at, undo_window
from ..models import LoopRun, Queue, ReviewItem
from . import outbox, routing
from .admission import admit, enabled_gates
from .cleaning import clean_json

if TYPE_CHECKING:
    from celery import Task as CeleryTask

    from loops.hints import Resume
    from loops.result import LoopResult
    from loops.runner import LoopConfig
    from loops.sandbox import Status as SandboxStatus
    from loops.spec import Task

# The logger keeps the name these records have always had: log queries and
# alerts on "loop failed" or "loop not sent" filter on it.
log = logging.getLogger("reviewqueue.tasks")

# The registered name of the Celery task that runs one loop; queued messages,
# routes and worker tests refer to it, so it never changes.

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
    callback_url: str = "",
    queue: Queue | str | None = None,
) -> LoopRun:
    """submit_run() for callers that need only the run."""
    return submit_run(
        task=task,
        run_id=run_id,
        agent=agent,
        agent_options=agent_options,
        producer=producer,
        callback_url=callback_url,
        queue=queue,
    )[0]


def submit_run(
    *,
    task: dict[str, Any],
    run_id: str,
    agent: str = "scripted",
    agent_options: dict | None = None,
    producer: str = "",
    callback_url: str = "",
    resumed_from: LoopRun | None = None,
    resume_note: str = "",
    queue: Queue | str | None = None,
    not_before: datetime | None = None,
) -> tuple[LoopRun, bool]:
    """Record a loop run and enqueue it once the row is committed; returns the
    run and whether this call created it. Run ids are unique per ``producer``
    (an API token's name; blank for operators' runs). ``callback_url``
    (already checked by the caller) receives the run's and its item's events.

    Safe to repeat, concurrently too: the (producer, run id) constraint lets
    exactly one call create the row and enqueue it; every other call returns
    the existing row with created False and enqueues nothing, unless the
    earlier publish failed (broker down), in which case it is sent again.
    Raises BrokerUnavailable when the broker stays unreachable.

    ``resumed_from`` and ``resume_note`` (already redacted) make it a run
    resumed after a send-back (``resume_sent_back``); ``not_before`` holds
    its message back until then (the send-back's final instant).

    ``queue`` (a row or a slug) is the queue the run's output goes to and
    whose step limit it runs under; without one the routing rules choose.
    InvalidInput names an unknown or archived queue. A rerun keeps the queue
    the run was first routed to."""
    parsed = parse_task(task)  # TaskError on a bad task, before anything is stored
    target = routing.target_of(
        queue, producer=producer, task_kind=str(parsed.kind), priority=parsed.priority, task_id=parsed.id, check=True
    )
    resume = {"resumed_from": resumed_from, "resume_note": resume_note} if resumed_from is not None else {}
    with transaction.atomic():
        run, created = _record_run(
            parsed, run_id, agent, agent_options, producer, callback_url, queue_id=target.pk, **resume
        )
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
            transaction.on_commit(lambda: _publish(kwargs, resend=unsent, not_before=not_before))
    return run, created


def sandbox_status() -> SandboxStatus:
    """Whether red lines run in bubblewrap here, probed once per process: the
    API refuses tasks with checks without it, and the dashboard shows it."""
    from loops import sandbox

    return sandbox.status()


def parse_task(task: dict[str, Any]) -> Task:
    """The task spec from a message or a request, its text made storable; raises TaskError."""
    # Imported here, not at the top: the loop engine stays unloaded in
    # processes that never parse a task (ARCHITECTURE.md, layers).
    from loops.spec import Task

    return Task.from_dict(clean_json(task))


def _record_run(
    parsed: Task,
    run_id: str,
    agent: str,
    agent_options: dict | None,
    producer: str = "",
    callback_url: str = "",
    queue_id: int | None = None,
    **resume: Any,
) -> tuple[LoopRun, bool]:
    """The run's row, created on first sight of (producer, run id), the idempotency key of a loop."""
    if queue_id is not None:
        resume["queue_id"] = queue_id
    return LoopRun.objects.get_or_create(
        producer=producer,
        run_id=run_id,
        defaults={
            "task_id": parsed.id,
            "task_kind": str(parsed.kind),
            "task": parsed.to_dict(),
            "agent": agent,
            "agent_options": agent_options or {},
            "callback_url": callback_url,
            **resume,
        },
    )


def _run_loop_task() -> CeleryTask:
    """The registered run_loop task, found by name (see the module docstring)."""
    return current_app.tasks[task_names.RUN_LOOP]


def _publish(kwargs: dict[str, Any], *, resend: bool, not_before: datetime | None = None) -> None:
    """Send run_loop (due at ``not_before`` when that is later than now),
    retrying with backoff while the broker is unreachable; a failure is
    written on the run so a repeated submit knows to resend."""
    from kombu.exceptions import OperationalError as BrokerError

    run_id, producer = kwargs["run_id"], kwargs.get("producer", "")
    countdown = (not_before - timezone.now()).total_seconds() if not_before is not None else 0.0
    try:
        if countdown > 0:
            _run_loop_task().apply_async(kwargs=kwargs, countdown=countdown)
        else:
            _run_loop_task().delay(**kwargs)
    except BrokerError as exc:
        LoopRun.objects.filter(producer=producer, run_id=run_id, outcome=LoopRun.Outcome.RUNNING, deliveries=0).update(
            error=f"{PUBLISH_FAILED}: {exc}"[:2000]
        )
        log.warning("loop not sent: broker unavailable", extra={"run_id": run_id, "error": str(exc)[:200]})
        raise BrokerUnavailable(run_id, f"run {run_id} is recorded but the broker is unreachable: {exc}") from exc
    if resend:
        LoopRun.objects.filter(producer=producer, run_id=run_id, error__startswith=PUBLISH_FAILED).update(error="")


def resubmit_stale_runs() -> int:
    """Send again every run that has been "running" for longer than any task
    may take: its message was lost with a killed worker. Safe to repeat:
    run_loop is idempotent on the run id."""
    cutoff = timezone.now() - timedelta(seconds=settings.REVIEWQUEUE_STALE_RUN_SECONDS)
    stale = list(LoopRun.objects.filter(outcome=LoopRun.Outcome.RUNNING, updated_at__lt=cutoff)[:500])
    for run in stale:
        LoopRun.objects.filter(pk=run.pk).update(updated_at=timezone.now())
        extra = {"producer": run.producer} if run.producer else {}
        _run_loop_task().delay(
            task=run.task, run_id=run.run_id, agent=run.agent, agent_options=run.agent_options, **extra
        )
    if stale:
        log.warning("resubmitted stale loop runs", extra={"count": len(stale)})
    return len(stale)


def execute_run(
    *,
    task: dict[str, Any],
    run_id: str,
    agent: str = "scripted",
    agent_options: dict | None = None,
    producer: str = "",
) -> str:
    """The work of the run_loop task: run one agent loop with the live step
    limit and mode, then record the outcome: converged -> auto-passed (grey
    tasks maybe sampled into the queue), cut off -> admit(). Returns the
    run's outcome.

    Safe to run twice: a finished run answers its recorded outcome; a run cut
    short by a killed worker runs again, and admit()'s idempotency key (the
    run id) keeps the second pass from adding a second item.
    """
    parsed = parse_task(task)
    run, _ = _record_run(parsed, run_id, agent, agent_options, producer)
    # Started only while still running and, for a resumed run, once its
    # send-back is final, in one statement: a send-back undone meanwhile
    # (which cancels its run only while no worker has started it, and only
    # before it is final) and this start cannot both win.
    now = timezone.now()
    final = Q(resumed_from__isnull=True) | Q(resumed_from__item__decided_at__lte=now - undo_window())
    started = (
        LoopRun.objects.filter(pk=run.pk, outcome=LoopRun.Outcome.RUNNING)
        .filter(final)
        .update(deliveries=F("deliveries") + 1, updated_at=now)
    )
    if not started:
        run.refresh_from_db(fields=["outcome"])
        if run.outcome == LoopRun.Outcome.RUNNING:
            _hold_until_final(run)
        return run.outcome

    queue = Queue.current(run.queue_id)
    config = _live_config(queue)
    result = _run_agent(run, parsed, agent, agent_options, config, resume=_resume_of(run))
    if result is None:
        return LoopRun.Outcome.FAILED
    return record_finished_run(run, parsed, result, config=config, queue=queue, agent=agent, producer=producer)


def _hold_until_final(run: LoopRun) -> None:
    """A resumed run's message came before its send-back was final (this
    worker's clock behind the reviewer's, or a resend): send it again, due
    then. Nothing is sent for a send-back with no time (it is being undone)."""
    sent_back = _sent_back_item(run)
    if sent_back is None or sent_back.decided_at is None or current_app.conf.task_always_eager:
        return
    kwargs = {"task": run.task, "run_id": run.run_id, "agent": run.agent, "agent_options": run.agent_options}
    if run.producer:
        kwargs["producer"] = run.producer
    due = final_at(sent_back.decided_at) + timedelta(seconds=1)

    def resend() -> None:
        try:
            _publish(kwargs, resend=False, not_before=due)
        except BrokerUnavailable:
            pass  # written on the run, and logged: the stale-run sweep sends it

    transaction.on_commit(resend)


def _live_config(queue: Queue) -> LoopConfig:
    """The loop's limits as its queue sets them now: step limit, draft mode, filter gates."""
    from loops.runner import LoopConfig

    draft = policy.loop_runs_draft(policy.Mode(queue.mode))
    return LoopConfig(step_limit=queue.step_limit, draft=draft, gates=tuple(enabled_gates(queue)))


def _run_agent(
    run: LoopRun,
    parsed: Task,
    agent: str,
    agent_options: dict | None,
    config: LoopConfig,
    *,
    resume: Resume | None = None,
) -> LoopResult | None:
    """Run the loop; on an agent error or a red line that cannot be sandboxed,
    mark the run failed (once: only while it is still running) and return None."""
    from loops.agents import AgentError, make_agent
    from loops.runner import run_task
    from loops.sandbox import SandboxUnavailable

    try:
        return run_task(parsed, make_agent(agent, task=parsed, **(agent_options or {})), config, resume=resume)
    except SandboxUnavailable as exc:
        # Fail closed: hidden checks never run unsandboxed unless REDLINE_SANDBOX=none.
        _mark_failed(run, exc)
        log.error("loop failed: red line not sandboxed", extra={"run_id": run.run_id, "error": str(exc)[:200]})
    except AgentError as exc:
        _mark_failed(run, exc)
        log.warning("loop failed: agent error", extra={"run_id": run.run_id, "error": str(exc)[:200]})
    return None


def _mark_failed(run: LoopRun, exc: Exception) -> None:
    """Record a run as failed with its error, unless it has finished already,
    and, in the same transaction, its ``run.finished`` event."""
    now = timezone.now()
    with transaction.atomic():
        failed = LoopRun.objects.filter(pk=run.pk, outcome=LoopRun.Outcome.RUNNING).update(
            outcome=LoopRun.Outcome.FAILED, error=str(exc)[:2000], finished_at=now
        )
        if failed and run.callback_url:
            run.refresh_from_db()
            outbox.run_finished(run, None, now)


def record_finished_run(
    run: LoopRun,
    parsed: Task,
    result: LoopResult,
    *,
    config: LoopConfig,
    queue: Queue,
    agent: str,
    producer: str,
) -> str:
    """Turn a finished loop into its outcome: converged -> auto-passed (a grey
    task maybe sampled into the queue), cut off -> admit(); then write the
    outcome on the run. Returns the outcome.

    Safe to repeat: admit() is idempotent on the run id, sampling is seeded by
    it, and the run is updated only while it is still running."""
    fields = _item_fields(parsed, result, run.run_id, agent, producer)
    fields["callback_url"] = run.callback_url
    fields["previous_version"] = _sent_back_item(run)
    sampled = False
    item: ReviewItem | None = None
    if result.converged:
        outcome = LoopRun.Outcome.AUTO_PASSED
        item = _sample_for_audit(parsed, queue, run.run_id, fields)
        sampled = item is not None
    else:
        admitted = admit(**fields, cutoff_reason=result.stop_reason, draft=result.draft, queue=queue)
        item = admitted.item
        outcome = LoopRun.Outcome(admitted.outcome) if admitted.outcome != "duplicate" else _earlier_outcome(item)
    _save_outcome(run, result, outcome, config=config, sampled=sampled, item=item)
    log.info(
        "loop finished",
        extra={
            "run_id": run.run_id,
            "task": parsed.id,
            "outcome": outcome,
            "stop_reason": result.stop_reason,
            "attempts": result.attempts,
            "reviewed_attempt": result.reviewed_attempt,
            "draft": result.draft,
        },
    )
    return outcome


def _item_fields(parsed: Task, result: LoopResult, run_id: str, agent: str, producer: str) -> dict[str, Any]:
    """What admit() is told about a run's output, whichever way it reaches the queue."""
    from loops.cutoff import cutoff_summary

    # The reviewer sees the best attempt, its grade and its failing checks.
    summary = cutoff_summary(result)
    return {
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


def _sample_for_audit(parsed: Task, queue: Queue, run_id: str, fields: dict[str, Any]) -> ReviewItem | None:
    """Admit a converged grey task's output as a sampled item at the task's
    (or else the queue's) sampling rate; None when it is not sampled."""
    from loops.spec import TaskKind

    rate = parsed.sampling_rate if parsed.sampling_rate is not None else queue.sampling_rate
    # Seeded by the run id, so a rerun samples the same way.
    if parsed.kind is TaskKind.GREY and policy.sample_for_audit(random.Random(run_id), rate):
        return admit(**fields, cutoff_reason="sampled", label=ReviewItem.Label.SAMPLED, queue=queue).item
    return None


def _save_outcome(
    run: LoopRun, result: LoopResult, outcome: str, *, config: LoopConfig, sampled: bool, item: ReviewItem | None
) -> None:
    """Write the loop's outcome and figures on the run, if it is still running,
    and, in the same transaction, its ``run.finished`` event."""
    with transaction.atomic():
        finished = _write_outcome(run, result, outcome, config=config, sampled=sampled, item=item)
        if finished and run.callback_url:
            run.refresh_from_db()
            outbox.run_finished(run, item, run.finished_at or timezone.now())


def _write_outcome(
    run: LoopRun, result: LoopResult, outcome: str, *, config: LoopConfig, sampled: bool, item: ReviewItem | None
) -> int:
    """The outcome's single UPDATE; 1 if this call finished the run, 0 if an earlier one had."""
    return LoopRun.objects.filter(pk=run.pk, outcome=LoopRun.Outcome.RUNNING).update(
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


def _earlier_outcome(item: ReviewItem) -> str:
    """What a first, interrupted pass of this run did with its output."""
    if item.status == ReviewItem.Status.FILTERED:
        return LoopRun.Outcome.FILTERED
    if item.shed_entries.filter(incoming=True).exists():
        return LoopRun.Outcome.SHED
    return LoopRun.Outcome.ENQUEUED


# --- resuming a run after a send-back ---------------------------------------------------

# What a resumed run cancelled by an undone send-back says in its error; a
# later send-back of the same item reopens it rather than making a new one.
CANCELLED = "cancelled: the send-back was undone"


# The form of the run ids of resumed runs (``resumed_run_id``, and the form
# ``_free_resumed_run_id`` falls back to): a producer may not choose one, so
# none of its runs can stand for, or reveal, a resumed run.
RESERVED_RUN_ID = re.compile(r"~v[0-9]+(\.[0-9]+)?\Z")


def is_reserved_run_id(run_id: str) -> bool:
    """Whether ``run_id`` ends as a resumed run's id does (``~v2``, ``~v3.17``)."""
    return RESERVED_RUN_ID.search(run_id) is not None


def resumed_run_id(run_id: str, version: int) -> str:
    """The run id of the run that makes ``version`` of an item: the first
    run's id with ``~v<version>``, so a producer reads the lineage from it
    (``build-7``, ``build-7~v2``, ``build-7~v3``), cut to fit 200 characters."""
    base = run_id.rsplit("~v", 1)[0] if "~v" in run_id else run_id
    suffix = f"~v{version}"
    return base[: 200 - len(suffix)] + suffix


def _free_resumed_run_id(run: LoopRun, item: ReviewItem) -> str:
    """The derived run id, unless the producer already used it for a run of
    its own (run ids are the producer's to choose): then the same id with the
    sent-back item's id added, which no producer's run can be resuming."""
    derived = resumed_run_id(run.run_id, item.version + 1)
    taken = LoopRun.objects.filter(producer=run.producer, run_id=derived).exclude(resumed_from=run).exists()
    if not taken:
        return derived
    suffix = f".{item.pk}"
    return derived[: 200 - len(suffix)] + suffix


def run_of_item(item: ReviewItem) -> LoopRun | None:
    """The run our workers ran whose output this item is; None for an item
    an external producer pushed (its producer hears ``item.sent_back``)."""
    return LoopRun.objects.filter(item=item).order_by("-pk").first()


def resume_sent_back(item: ReviewItem, note: str) -> LoopRun | None:
    """Write the run that resumes ``item``'s run after a send-back, in the
    caller's transaction, and publish it after the commit; None when no run
    of ours made the item. Same producer and callback URL as the run sent
    back; its note is redacted against the task's hidden checks before it is
    stored, so neither the row nor a prompt ever holds a check's text.

    Safe to repeat: the derived run id makes a second call find the first
    call's run (a run cancelled by an undo is reopened with the new note)."""
    from loops.hints import Redactor

    run = run_of_item(item)
    if run is None:
        return None
    parsed = parse_task(run.task)
    redacted = Redactor.for_secrets(parsed.secrets()).redact(note)
    run_id = _free_resumed_run_id(run, item)
    _reopen_if_cancelled(run.producer, run_id, redacted)
    decided_at = item.decided_at or timezone.now()
    resumed, _ = submit_run(
        task=run.task,
        run_id=run_id,
        agent=run.agent,
        agent_options=run.agent_options,
        producer=run.producer,
        callback_url=run.callback_url,
        resumed_from=run,
        resume_note=redacted,
        queue=run.queue,
        not_before=final_at(decided_at),
    )
    log.info("run resumed after send-back", extra={"run_id": run_id, "item": item.pk, "resumed_from": run.run_id})
    return resumed


def _reopen_if_cancelled(producer: str, run_id: str, note: str) -> None:
    """A resumed run cancelled by an undone send-back runs again, with the new
    note, as if never cancelled: back to running and unsent, so submit_run
    sends it (its message may still be queued too; the run is idempotent)."""
    LoopRun.objects.filter(producer=producer, run_id=run_id, outcome=LoopRun.Outcome.FAILED, error=CANCELLED).update(
        outcome=LoopRun.Outcome.RUNNING,
        error=f"{PUBLISH_FAILED}: reopened after an undone send-back",
        deliveries=0,
        resume_note=note,
        finished_at=None,
        updated_at=timezone.now(),
    )


def cancel_resumed_run(item: ReviewItem) -> bool:
    """Cancel the run resumed from ``item``'s send-back, if no worker has
    started it; True if there is none or it was cancelled, False once it has
    started (then the send-back can no longer be undone). One conditional
    UPDATE, so a worker starting it at the same moment and this cannot both
    win (``execute_run`` starts a run with the mirror-image UPDATE)."""
    resumed = LoopRun.objects.filter(resumed_from__item=item)
    if not resumed.exists():
        return True
    cancelled = resumed.filter(outcome=LoopRun.Outcome.RUNNING, deliveries=0).update(
        outcome=LoopRun.Outcome.FAILED, error=CANCELLED, finished_at=timezone.now()
    )
    return bool(cancelled)


def _resume_of(run: LoopRun) -> Resume | None:
    """Where a resumed run starts: the sent-back item's output and the note."""
    from loops.hints import Resume

    item = _sent_back_item(run)
    if item is None:
        return None
    return Resume(output=item.final_output, note=run.resume_note)


def _sent_back_item(run: LoopRun) -> ReviewItem | None:
    """The item a resumed run's output follows on from: its next version."""
    if run.resumed_from_id is None:
        return None
    return ReviewItem.objects.filter(looprun=run.resumed_from_id).first()
