"""Admission: a produced output arrives and is enqueued, shed, filtered, or
recognised as a duplicate (ARCHITECTURE.md rule 7).

``admit`` checks and cleans the output, then takes one of two paths. On
PostgreSQL outside a transaction, ``admission_pg`` tries a single statement
that locks the policy row only for its own UPDATE. Otherwise, and whenever
that path hands over, the general path here locks the policy row
(``Queue.locked_for_admission``) for the whole decision: the duplicate
check, the filter gates, shedding and the depth/mode change.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.utils import timezone

from .. import policy
from ..finality import is_final
from ..models import CircuitBreakerEntry, CutoffReason, FilterRule, Queue, ReviewItem
from . import admission_pg, outbox, review_quality, routing
from .cleaning import clean_text, short_text
from .depth import oldest_waiting_minutes, set_state
from .errors import InvalidInput
from .outcomes import AdmitResult

log = logging.getLogger("reviewqueue.services")
_CUTOFF_REASONS = frozenset(CutoffReason.values)
_LABELS = frozenset(ReviewItem.Label.values)
# The statuses a verdict gives, told only once final (``finality``).
VERDICT_STATUSES = (ReviewItem.Status.APPROVED, ReviewItem.Status.REJECTED, ReviewItem.Status.SENT_BACK)


# Long: one keyword per field of the item; the body is short.
def admit(
    *,
    idempotency_key: str,
    task_description: str | bytes,
    final_output: str | bytes,
    cutoff_reason: str,
    last_error: str | bytes = "",
    attempt_count: int = 0,
    label: str = ReviewItem.Label.UNVERIFIED,
    draft: bool = False,
    priority: int = 1,
    task_id: str = "",
    task_kind: str = "",
    source_run_id: str = "",
    producer: str = "",
    reviewed_attempt: int = 0,
    checks_passed: int | None = None,
    checks_total: int | None = None,
    failing_checks: Sequence[Mapping[str, Any]] = (),
    reviewed_score: float | None = None,
    callback_url: str = "",
    previous_version: ReviewItem | None = None,
    queue: Queue | str | None = None,
    metadata: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> AdmitResult:
    """Admit one produced output to the queue under the watermark policy.

    ``reviewed_attempt`` says which attempt the output is (a loop hands over
    its best, not always its last), ``checks_passed`` of ``checks_total`` its
    grade, and ``failing_checks`` (``{"id", "about"}``) the hidden checks it
    fails with the reviewer's description of each; for a scored task,
    ``reviewed_score`` is the stop rule's estimate of that attempt's quality.
    ``callback_url`` (checked by the caller) gets the item's events;
    ``previous_version``: the item whose send-back led to this output.
    ``queue`` (a row or a slug) is the queue it goes to; without one the
    routing rules choose (``routing.resolve``). An unknown or archived queue
    is refused as ``InvalidInput`` naming it. ``metadata`` is the producer's
    own JSON object (``checked_metadata``), kept with the item and handed
    back with it and its events, never shown to reviewers.

    Safe to repeat: a second call with the same ``idempotency_key`` from the
    same ``producer`` changes nothing and answers "duplicate" with the first
    call's item; keys are unique per producer. At capacity the lowest-priority
    waiting item (the incoming one included) is shed and written to the
    circuit-breaker log; nothing is ever deleted.
    """
    key = _checked_key(idempotency_key)
    _check_choices(cutoff_reason, label, priority, attempt_count)
    grade = _checked_grade(attempt_count, reviewed_attempt, checks_passed, checks_total, failing_checks, reviewed_score)
    texts = _cleaned_texts(task_description, final_output, last_error)
    stored_metadata = checked_metadata(metadata)
    now = now or timezone.now()
    target = routing.target_of(queue, producer=producer, task_kind=task_kind, priority=priority, task_id=task_id)
    item = ReviewItem(
        queue_id=target.pk,
        idempotency_key=key,
        task_id=short_text(task_id, 200),
        task_kind=short_text(task_kind, 20),
        attempt_count=attempt_count,
        cutoff_reason=cutoff_reason,
        label=label,
        draft=draft,
        priority=priority,
        source_run_id=short_text(source_run_id, 200),
        producer=short_text(producer, 100),
        callback_url=callback_url,
        metadata=stored_metadata,
        version=previous_version.version + 1 if previous_version is not None else 1,
        previous_version=previous_version,
        created_at=now,
        **texts,
        **grade,
    )

    def admitted() -> AdmitResult:
        nonlocal target
        try:
            return _admit_item(item, now, accept_archived=isinstance(queue, Queue))
        except Queue.DoesNotExist:
            if isinstance(queue, Queue):
                raise
            # The routing's copy named a queue deleted since (never done in use,
            # but a restored database does it): read the queues again, once.
            routing.forget()
            target = routing.target_of(
                queue, producer=producer, task_kind=task_kind, priority=priority, task_id=task_id
            )
            item.queue_id = target.pk
            return _admit_item(item, now, accept_archived=False)

    if previous_version is None:
        result = admitted()
    else:
        with transaction.atomic():  # a revision: its sent-back item locked first
            _lock_sent_back(previous_version, now)
            result = admitted()
    if result.outcome == "enqueued":
        review_quality.place_gold(result.item, now)  # its neighbour, now: ARCHITECTURE.md, "Gold items"
    if result.item.queue_id != target.pk:  # a duplicate first admitted to another queue
        return replace(result, queue=Queue.objects.values_list("slug", flat=True).get(pk=result.item.queue_id))
    return replace(result, queue=target.slug)


def _lock_sent_back(previous: ReviewItem, now: datetime) -> None:
    """Lock the sent-back item a revision follows, before any queue's row (as
    undo locks it), and check under the lock that its send-back still stands
    and is final: an undo at the same moment either committed first (the
    item is no longer sent back: the revision is refused) or waits for this
    transaction and then finds the revision (the undo is refused). Never both."""
    row = ReviewItem.all_objects.select_for_update().filter(pk=previous.pk).values_list("status", "decided_at").first()
    status, decided_at = row if row is not None else ("", None)
    if status != ReviewItem.Status.SENT_BACK or not is_final(decided_at, now):
        shown = status if status not in VERDICT_STATUSES or is_final(decided_at, now) else ReviewItem.Status.CLAIMED
        raise InvalidInput("previous_item", f"item {previous.pk} was not sent back (it is {shown})")


# --- checking and cleaning the payload --------------------------------------------------


def field_refusals(values: Mapping[str, Any], *, skip: Collection[str] = ()) -> dict[str, str]:
    """Every field ``admit`` would refuse, each checked on its own (a pair,
    like ``checks_passed`` and ``checks_total``, together), so one answer can
    name them all; ``admit`` itself stops at the first. ``values`` are the
    fields as sent; a field in ``skip`` (already refused for its type) or of
    the wrong type is left out, and so is any check that reads one."""
    refused: dict[str, str] = {}

    def usable(name: str, *types: type) -> bool:
        value = values.get(name)
        return name not in skip and isinstance(value, types) and not isinstance(value, bool)

    def check(run: Any, *args: Any) -> None:
        try:
            run(*args)
        except InvalidInput as exc:
            for name, message in exc.fields.items():
                refused.setdefault(name, message)

    if usable("idempotency_key", str):
        check(_checked_key, values["idempotency_key"])
    if usable("task_description", str, bytes) and not clean_text(values["task_description"])[0].strip():
        refused["task_description"] = "is required"
    count = values.get("attempt_count", 0) if "attempt_count" not in skip else None
    if usable("reviewed_attempt", int) and isinstance(count, int) and not isinstance(count, bool):
        check(_clean_grade, count, values["reviewed_attempt"], None, None, [])
    passed, total = values.get("checks_passed"), values.get("checks_total")
    if not {"checks_passed", "checks_total"} & set(skip) and all(
        v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in (passed, total)
    ):
        check(_clean_grade, 0, 0, passed, total, [])
    if "failing_checks" not in skip and "failing_checks" in values:
        check(_clean_grade, 0, 0, None, None, values["failing_checks"])
    if "metadata" not in skip:
        check(checked_metadata, values.get("metadata"))
    return refused


def _checked_key(idempotency_key: str) -> str:
    """The idempotency key, stripped; refused if empty, too long or unprintable."""
    key = (idempotency_key or "").strip()
    if not key or len(key) > 200:
        raise InvalidInput("idempotency_key", "is required, at most 200 characters")
    if not key.isprintable():
        raise InvalidInput("idempotency_key", "must be printable text (no control characters)")
    return key


def _check_choices(cutoff_reason: str, label: str, priority: int, attempt_count: int) -> None:
    """Refuse an unknown cutoff reason or label, or a priority or attempt count
    out of range, naming the field."""
    if cutoff_reason not in _CUTOFF_REASONS:
        raise InvalidInput("cutoff_reason", f"must be one of {', '.join(CutoffReason.values)}")
    if label not in _LABELS:
        raise InvalidInput("label", f"must be one of {', '.join(ReviewItem.Label.values)}")
    if not isinstance(priority, int) or isinstance(priority, bool) or not -1000 <= priority <= 1000:
        raise InvalidInput("priority", "must be an integer in [-1000, 1000]")
    if not isinstance(attempt_count, int) or isinstance(attempt_count, bool) or not 0 <= attempt_count <= 10_000:
        raise InvalidInput("attempt_count", "must be an integer in [0, 10000]")


def _checked_grade(
    attempt_count: int,
    reviewed_attempt: int,
    checks_passed: int | None,
    checks_total: int | None,
    failing_checks: object,
    reviewed_score: float | None,
) -> dict[str, Any]:
    """The reviewed attempt and its grade as item fields, checked."""
    failing = _clean_grade(attempt_count, reviewed_attempt, checks_passed, checks_total, failing_checks)
    if reviewed_score is not None and (
        not isinstance(reviewed_score, int | float) or isinstance(reviewed_score, bool) or not 0 <= reviewed_score <= 1
    ):
        raise InvalidInput("reviewed_score", "must be a number in [0, 1]")
    return {
        "reviewed_attempt": reviewed_attempt,
        "checks_passed": checks_passed,
        "checks_total": checks_total,
        "failing_checks": failing,
        "reviewed_score": None if reviewed_score is None else float(reviewed_score),
    }


def _is_count(value: object, top: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= top


def _clean_grade(
    attempt_count: int,
    reviewed_attempt: object,
    checks_passed: object,
    checks_total: object,
    failing_checks: object,
) -> str:
    """Check the reviewed attempt's grade; its failing checks as stored JSON text."""
    if not _is_count(reviewed_attempt, 10_000) or (attempt_count and reviewed_attempt > attempt_count):  # type: ignore[operator]
        raise InvalidInput("reviewed_attempt", "must be an integer in [0, attempt_count]")
    if (checks_passed is None) != (checks_total is None):
        raise InvalidInput("checks_passed", "give checks_passed and checks_total together, or neither")
    if checks_total is not None:
        if not _is_count(checks_total, 10_000) or checks_total == 0:
            raise InvalidInput("checks_total", "must be an integer in [1, 10000]")
        if not _is_count(checks_passed, checks_total):  # type: ignore[arg-type]
            raise InvalidInput("checks_passed", "must be an integer in [0, checks_total]")
    if isinstance(failing_checks, (str, bytes)) or not isinstance(failing_checks, Sequence):
        raise InvalidInput("failing_checks", "must be a list of {id, about}")
    if len(failing_checks) > 1000:
        raise InvalidInput("failing_checks", "at most 1000 checks")
    cleaned = []
    for check in failing_checks:
        if not isinstance(check, Mapping) or not isinstance(check.get("id"), str) or not check["id"].strip():
            raise InvalidInput("failing_checks", "each entry needs an id (text)")
        about = check.get("about") or ""
        if not isinstance(about, str):
            raise InvalidInput("failing_checks", f"about of {check['id'][:50]!r} must be text")
        cleaned.append({"id": clean_text(check["id"], limit=200)[0], "about": clean_text(about, limit=200)[0]})
    return json.dumps(cleaned) if cleaned else ""


# The producer's metadata: small enough to ride on every event of its item.
METADATA_MAX_BYTES = 8192
METADATA_MAX_DEPTH = 8


def checked_metadata(metadata: object) -> str:
    """The producer's metadata as the JSON text the item stores ("" for none).

    It must be a JSON object with text keys, nested at most
    ``METADATA_MAX_DEPTH`` deep, holding only JSON values (no NaN or
    infinity), and at most ``METADATA_MAX_BYTES`` once serialised as UTF-8.
    Anything else is refused naming the field, never cleaned: a producer
    routes verdicts with these values, and a replaced character would route
    one elsewhere. So a lone surrogate is refused; a NUL is kept (escaped)."""
    if metadata is None:
        return ""
    if not isinstance(metadata, Mapping):
        raise InvalidInput("metadata", "must be a JSON object")
    _check_metadata_value(metadata, "metadata", 1)
    try:
        text = json.dumps(dict(metadata), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        size = len(text.encode("utf-8"))
    except ValueError as exc:  # NaN or infinity; UnicodeEncodeError is a ValueError too
        raise InvalidInput("metadata", f"must be plain JSON: {str(exc)[:100]}") from None
    if size > METADATA_MAX_BYTES:
        raise InvalidInput("metadata", f"is {size} bytes as JSON; at most {METADATA_MAX_BYTES}")
    return text if metadata else ""


def _check_metadata_value(value: object, where: str, depth: int) -> None:
    """Refuse what JSON cannot carry, or carries too deep, naming where it is."""
    if isinstance(value, Mapping | list | tuple) and depth > METADATA_MAX_DEPTH:
        raise InvalidInput("metadata", f"nested deeper than {METADATA_MAX_DEPTH} levels at {where[:100]}")
    if isinstance(value, Mapping):
        if len(value) > METADATA_MAX_BYTES:  # each entry takes bytes: refused before walking a huge one
            raise InvalidInput("metadata", f"is over {METADATA_MAX_BYTES} bytes as JSON")
        for key, inner in value.items():
            if not isinstance(key, str):
                raise InvalidInput("metadata", f"keys must be text; {where[:100]} has {type(key).__name__} {key!r:.40}")
            _check_text(key, where)
            _check_metadata_value(inner, f"{where}.{key[:40]}", depth + 1)
    elif isinstance(value, list | tuple):
        if len(value) > METADATA_MAX_BYTES:
            raise InvalidInput("metadata", f"is over {METADATA_MAX_BYTES} bytes as JSON")
        for index, inner in enumerate(value):
            _check_metadata_value(inner, f"{where}[{index}]", depth + 1)
    elif isinstance(value, str):
        _check_text(value, where)
    elif value is not None and not isinstance(value, bool | int | float):
        raise InvalidInput("metadata", f"{where[:100]} is a {type(value).__name__}, not a JSON value")


def _check_text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput("metadata", f"{where[:100]} holds a lone surrogate, which is not text") from None


def _cleaned_texts(task_description: str | bytes, final_output: str | bytes, last_error: str | bytes) -> dict[str, Any]:
    """The long text fields as item fields, cleaned and cut at their limits;
    refused without a task description."""
    limit = settings.REVIEWQUEUE_MAX_OUTPUT_CHARS
    description, _ = clean_text(task_description, limit=limit)
    if not description.strip():
        raise InvalidInput("task_description", "is required")
    output, truncated = clean_text(final_output, limit=limit)
    error, _ = clean_text(last_error, limit=20_000)
    return {"task_description": description, "final_output": output, "output_truncated": truncated, "last_error": error}


# --- the two paths ----------------------------------------------------------------------


def _admit_item(item: ReviewItem, now: datetime, *, accept_archived: bool) -> AdmitResult:
    """Admit a checked, unsaved item: in one statement where PostgreSQL allows
    it and the policy's decision is a plain enqueue, else on the general path."""
    db = connections[DEFAULT_DB_ALIAS]  # the wrapper itself: the proxy costs a lookup per attribute
    if db.vendor == "postgresql" and not db.in_atomic_block:
        fast = admission_pg.admit_one_statement(db, item, now)
        if fast is not None:
            return fast
    return _admit_locked(item, now, accept_archived=accept_archived)


def _admit_locked(item: ReviewItem, now: datetime, *, accept_archived: bool) -> AdmitResult:
    """The general path, under the queue's lock: answer a duplicate with
    the first item, refuse new work for a queue archived meanwhile (unless it
    is the output of work the queue accepted before), filter output an
    enabled gate fails, else let the policy plan the admission."""
    with transaction.atomic():
        queue, existing_pk, gates_enabled = Queue.locked_for_admission(
            item.queue_id, item.producer, item.idempotency_key
        )
        depth = queue.depth
        admission_pg.remember(queue, gates_enabled)
        if existing_pk is not None:
            existing = ReviewItem.objects.get(pk=existing_pk)
            return AdmitResult("duplicate", existing, queue.mode, depth=depth, capacity=queue.capacity)
        if queue.archived and not accept_archived:  # archived since the routing read it
            raise InvalidInput("queue", f"queue {queue.slug!r} is archived: it accepts nothing new")

        failures = _run_filter_gates(queue, item.final_output) if gates_enabled else []
        if failures:
            item.status = ReviewItem.Status.FILTERED
            item.filter_reason = "; ".join(failures)
            item.decided_at = now
            item.save()
            outbox.item_filtered(item, now)
            return AdmitResult("filtered", item, queue.mode, depth=depth, capacity=queue.capacity)

        result = _plan_and_apply(queue, item, now)
        admission_pg.remember(queue, gates_enabled)
        return result


def _plan_and_apply(queue: Queue, item: ReviewItem, now: datetime) -> AdmitResult:
    """Enqueue or shed under the policy's plan, log any shedding, and store the
    new depth and mode. The caller holds the policy row's lock."""
    depth = queue.depth
    lowest = _shedding_candidate(queue)
    incoming = policy.Candidate(priority=item.priority, arrived=now.timestamp(), key=None)
    plan = policy.plan_admission(
        mode=policy.Mode(queue.mode),
        depth=depth,
        marks=queue.watermarks(),
        incoming=incoming,
        sheddable=[lowest.candidate()] if lowest else [],
        oldest_minutes=oldest_waiting_minutes(queue, now),
    )
    shed_item: ReviewItem | None = None
    if plan.enqueue:
        item.save()
        if plan.shed is not None:
            assert lowest is not None
            shed_item = _shed_waiting(lowest, displaced_by=item, queue=queue, now=now)
        outcome = "enqueued"
    else:
        shed_item = _shed_incoming(item, queue=queue, now=now)
        outcome = "shed"
    if shed_item is not None:
        log.warning(
            "item shed at capacity",
            extra={"item": shed_item.pk, "priority": shed_item.priority, "depth": depth, "incoming": outcome == "shed"},
        )
    set_state(queue, plan.mode, plan.depth, now)
    return AdmitResult(outcome, item, queue.mode, shed_item=shed_item, depth=plan.depth, capacity=queue.capacity)


def _shedding_candidate(queue: Queue) -> ReviewItem | None:
    """The lowest-priority pending item, fetched only at capacity."""
    # The shedding candidate matters only at capacity (plan_admission reads
    # it nowhere else); below it, skip the query. Its text columns can be
    # megabytes and are never needed to choose: fetch the ordering fields only.
    # The candidate is locked, skipping rows another transaction holds: this
    # transaction holds the policy row, and decide locks its item before the
    # policy row, so waiting here on an item lock could deadlock. A pending
    # item that a reviewer is claiming right now is passed over for the next.
    if queue.depth < queue.capacity:
        return None
    return (
        ReviewItem.objects.filter(queue=queue, status=ReviewItem.Status.PENDING)
        .order_by("priority", "created_at", "pk")
        .only("pk", "priority", "created_at")
        .select_for_update(skip_locked=True)
        .first()
    )


def _shed_waiting(lowest: ReviewItem, *, displaced_by: ReviewItem, queue: Queue, now: datetime) -> ReviewItem:
    """Shed a waiting item for the arrival; logged in the circuit-breaker log."""
    ReviewItem.objects.filter(pk=lowest.pk).update(status=ReviewItem.Status.SHED, shed_at=now)
    lowest.refresh_from_db()
    CircuitBreakerEntry.objects.create(
        item=lowest,
        priority=lowest.priority,
        depth=queue.depth,
        capacity=queue.capacity,
        incoming=False,
        displaced_by=displaced_by,
        created_at=now,
    )
    outbox.item_shed(lowest, now)
    return lowest


def _shed_incoming(item: ReviewItem, *, queue: Queue, now: datetime) -> ReviewItem:
    """Keep the arrival as shed (nothing is deleted); logged in the circuit-breaker log."""
    item.status = ReviewItem.Status.SHED
    item.shed_at = now
    item.save()
    CircuitBreakerEntry.objects.create(
        item=item, priority=item.priority, depth=queue.depth, capacity=queue.capacity, incoming=True, created_at=now
    )
    outbox.item_shed(item, now)
    return item


# --- filter gates -----------------------------------------------------------------------


def enabled_gates(queue: Queue | int | None = None) -> list[str]:
    """The gates of the queue's enabled filter rules (the default queue's when none is named)."""
    pk = queue.pk if isinstance(queue, Queue) else queue if queue is not None else Queue.default().pk
    rules = FilterRule.objects.filter(queue_id=pk, status=FilterRule.Status.ENABLED)
    return list(rules.values_list("gate", flat=True))


def _run_filter_gates(queue: Queue, output: str) -> list[str]:
    """The queue's enabled gates' failures for this output; empty when it passes."""
    gates = enabled_gates(queue)
    if not gates:
        return []
    from loops.gates import run_gates  # loops is pure; imported late to keep start-up light

    return run_gates(output, gates)
