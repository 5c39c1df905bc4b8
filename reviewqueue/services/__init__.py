"""The queue's services: admit, claim, release, renew, decide, undo.

Each is atomic and keyword-only; views, tasks and the API all call these and
nothing else to change queue state. The policy row is locked first whenever a
call changes depth or the tuner, so watermark transitions and step-limit
changes are serialised in every database.
"""

from __future__ import annotations

import json
import logging
import operator
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import F
from django.utils import timezone

from .. import policy
from ..models import (
    CircuitBreakerEntry,
    CutoffReason,
    FilterRule,
    LabelCount,
    ModeChange,
    PolicyAudit,
    QueuePolicy,
    ReasonLabel,
    ReviewItem,
    StepLimitChange,
    Verdict,
)

log = logging.getLogger(__name__)
_CUTOFF_REASONS = frozenset(CutoffReason.values)
_LABELS = frozenset(ReviewItem.Label.values)

TRUNCATION_MARKER = "\n\n[reviewqueue: output truncated, {omitted} of {total} characters omitted]"


class QueueError(Exception):
    """A queue operation that cannot be done; ``code`` is stable for APIs and UIs."""

    code = "queue_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(QueueError):
    code = "invalid"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class NotLeaseHolder(QueueError):
    code = "not_lease_holder"


class LeaseExpired(QueueError):
    code = "lease_expired"


class AlreadyDecided(QueueError):
    code = "already_decided"


class NothingToUndo(QueueError):
    code = "nothing_to_undo"


# --- input hygiene -------------------------------------------------------------


def clean_text(value: str | bytes | None, *, limit: int | None = None) -> tuple[str, bool]:
    """Text safe to store: bytes and invalid UTF-8 (lone surrogates) become
    U+FFFD, NUL (which PostgreSQL refuses) too; longer than ``limit`` is cut
    with a visible marker. Returns (text, truncated)."""
    if value is None:
        return "", False
    if isinstance(value, bytes):
        text = value.decode("utf-8", errors="replace")
    else:
        text = str(value)
        if not text.isascii():  # O(1) for str: most text needs no further look
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                # Lone surrogates (invalid UTF-8 smuggled through JSON escapes) become U+FFFD.
                text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    if limit is not None and len(text) > limit:
        marker = TRUNCATION_MARKER.format(omitted=len(text) - limit, total=len(text))
        return text[:limit] + marker, True
    return text, False


def clean_json(value: Any) -> Any:
    """A JSON-like value with every string (keys too) passed through clean_text:
    PostgreSQL's jsonb refuses NUL and lone surrogates."""
    if isinstance(value, str):
        return clean_text(value)[0]
    if isinstance(value, dict):
        return {clean_text(str(k))[0]: clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    return value


def _short(value: object, limit: int) -> str:
    return clean_text(str(value))[0][:limit]


# --- admit ---------------------------------------------------------------------


@dataclass(frozen=True)
class AdmitResult:
    outcome: str  # "enqueued" | "shed" | "duplicate" | "filtered"
    item: ReviewItem
    mode: str
    shed_item: ReviewItem | None = None
    depth: int = 0


def queue_depth() -> int:
    return ReviewItem.objects.filter(status__in=ReviewItem.WAITING).count()


def _set_state(queue: QueuePolicy, mode: policy.Mode, depth: int, now: datetime) -> None:
    """Store the queue's new depth and mode on the locked policy row; a mode
    change is also written to the mode history."""
    if queue.mode != mode.value:
        ModeChange.objects.create(previous=queue.mode, mode=mode.value, depth=depth, created_at=now)
        log.info("queue mode changed", extra={"previous": queue.mode, "mode": mode.value, "depth": depth})
    if (queue.mode, queue.depth) != (mode.value, depth):
        queue.mode, queue.depth = mode.value, depth
        queue.save(update_fields=["mode", "depth", "updated_at"])


def reconcile_depth(*, now: datetime | None = None) -> int:
    """Recount the waiting items under the policy lock and store the count
    (and the mode it implies) if the kept depth drifted, e.g. after rows were
    changed outside the services (the admin, bulk loads). Returns the drift.
    Safe to repeat; the depth sampler runs it every few seconds."""
    with transaction.atomic():
        queue = QueuePolicy.locked()
        actual = queue_depth()
        drift = actual - queue.depth
        if drift:
            log.warning("queue depth reconciled", extra={"kept": queue.depth, "counted": actual})
            _after_depth_change(queue, actual, now or timezone.now())
        return drift


def _after_depth_change(queue: QueuePolicy, depth: int, now: datetime) -> None:
    """A verdict or an undo moved the depth: the watermarks may move the mode."""
    _set_state(queue, policy.next_mode(policy.Mode(queue.mode), depth, queue.watermarks()), depth, now)


def enabled_gates() -> list[str]:
    return list(FilterRule.objects.filter(status=FilterRule.Status.ENABLED).values_list("gate", flat=True))


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
    now: datetime | None = None,
) -> AdmitResult:
    """Admit one produced output to the queue under the watermark policy.

    ``reviewed_attempt`` says which attempt the output is (a loop hands over
    its best, not always its last), ``checks_passed`` of ``checks_total`` its
    grade, and ``failing_checks`` (``{"id", "about"}``) the hidden checks it
    fails with the reviewer's description of each; for a scored task,
    ``reviewed_score`` is the stop rule's estimate of that attempt's quality.

    Safe to repeat: a second call with the same ``idempotency_key`` from the
    same ``producer`` changes nothing and answers "duplicate" with the first
    call's item; keys are unique per producer, so another producer's equal key
    is a different item. At capacity the
    lowest-priority waiting item (the incoming one included) is shed and
    written to the circuit-breaker log; nothing is ever deleted.
    """
    key = (idempotency_key or "").strip()
    if not key or len(key) > 200:
        raise InvalidInput("idempotency_key", "is required, at most 200 characters")
    if not key.isprintable():
        raise InvalidInput("idempotency_key", "must be printable text (no control characters)")
    if cutoff_reason not in _CUTOFF_REASONS:
        raise InvalidInput("cutoff_reason", f"must be one of {', '.join(CutoffReason.values)}")
    if label not in _LABELS:
        raise InvalidInput("label", f"must be one of {', '.join(ReviewItem.Label.values)}")
    if not isinstance(priority, int) or isinstance(priority, bool) or not -1000 <= priority <= 1000:
        raise InvalidInput("priority", "must be an integer in [-1000, 1000]")
    if not isinstance(attempt_count, int) or isinstance(attempt_count, bool) or not 0 <= attempt_count <= 10_000:
        raise InvalidInput("attempt_count", "must be an integer in [0, 10000]")
    grade = _clean_grade(attempt_count, reviewed_attempt, checks_passed, checks_total, failing_checks)
    if reviewed_score is not None and (
        not isinstance(reviewed_score, int | float) or isinstance(reviewed_score, bool) or not 0 <= reviewed_score <= 1
    ):
        raise InvalidInput("reviewed_score", "must be a number in [0, 1]")
    limit = settings.REVIEWQUEUE_MAX_OUTPUT_CHARS
    description, _ = clean_text(task_description, limit=limit)
    if not description.strip():
        raise InvalidInput("task_description", "is required")
    output, truncated = clean_text(final_output, limit=limit)
    error, _ = clean_text(last_error, limit=20_000)
    now = now or timezone.now()
    producer = _short(producer, 100)

    item = ReviewItem(
        idempotency_key=key,
        task_id=_short(task_id, 200),
        task_kind=_short(task_kind, 20),
        task_description=description,
        final_output=output,
        output_truncated=truncated,
        last_error=error,
        attempt_count=attempt_count,
        reviewed_attempt=reviewed_attempt,
        checks_passed=checks_passed,
        checks_total=checks_total,
        failing_checks=grade,
        reviewed_score=None if reviewed_score is None else float(reviewed_score),
        cutoff_reason=cutoff_reason,
        label=label,
        draft=draft,
        priority=priority,
        source_run_id=_short(source_run_id, 200),
        producer=producer,
        created_at=now,
    )
    db = connections[DEFAULT_DB_ALIAS]  # the wrapper itself: the proxy costs a lookup per attribute
    if db.vendor == "postgresql" and not db.in_atomic_block:
        fast = _admit_one_statement(db, item, now)
        if fast is not None:
            return fast

    with transaction.atomic():
        queue, existing_pk, gates_enabled = QueuePolicy.locked_for_admission(producer, key)
        depth = queue.depth
        _remember(queue, gates_enabled)
        if existing_pk is not None:
            existing = ReviewItem.objects.get(pk=existing_pk)
            return AdmitResult("duplicate", existing, queue.mode, depth=depth)

        failures = _run_filter_gates(output) if gates_enabled else []
        if failures:
            item.status = ReviewItem.Status.FILTERED
            item.filter_reason = "; ".join(failures)
            item.decided_at = now
            item.save()
            return AdmitResult("filtered", item, queue.mode, depth=depth)

        # The shedding candidate matters only at capacity (plan_admission reads
        # it nowhere else); below it, skip the query. Its text columns can be
        # megabytes and are never needed to choose: fetch the ordering fields only.
        lowest = (
            ReviewItem.objects.filter(status=ReviewItem.Status.PENDING)
            .order_by("priority", "created_at", "pk")
            .only("pk", "priority", "created_at")
            .first()
            if depth >= queue.capacity
            else None
        )
        incoming = policy.Candidate(priority=priority, arrived=now.timestamp(), key=None)
        plan = policy.plan_admission(
            mode=policy.Mode(queue.mode),
            depth=depth,
            marks=queue.watermarks(),
            incoming=incoming,
            sheddable=[lowest.candidate()] if lowest else [],
        )
        shed_item: ReviewItem | None = None
        if plan.enqueue:
            item.save()
            if plan.shed is not None:
                shed_item = lowest
                assert shed_item is not None
                ReviewItem.objects.filter(pk=shed_item.pk).update(status=ReviewItem.Status.SHED, shed_at=now)
                shed_item.refresh_from_db()
                CircuitBreakerEntry.objects.create(
                    item=shed_item,
                    priority=shed_item.priority,
                    depth=depth,
                    capacity=queue.capacity,
                    incoming=False,
                    displaced_by=item,
                    created_at=now,
                )
            outcome = "enqueued"
        else:
            item.status = ReviewItem.Status.SHED
            item.shed_at = now
            item.save()
            shed_item = item
            CircuitBreakerEntry.objects.create(
                item=item, priority=priority, depth=depth, capacity=queue.capacity, incoming=True, created_at=now
            )
            outcome = "shed"
        if shed_item is not None:
            log.warning(
                "item shed at capacity",
                extra={
                    "item": shed_item.pk,
                    "priority": shed_item.priority,
                    "depth": depth,
                    "incoming": outcome == "shed",
                },
            )
        _set_state(queue, plan.mode, plan.depth, now)
        _remember(queue, gates_enabled)
        return AdmitResult(outcome, item, queue.mode, shed_item=shed_item, depth=plan.depth)


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


@dataclass(frozen=True)
class _SeenState:
    """The queue's mode, watermarks and gates as an admission in this process
    last saw them: a hint for the next admission, which the database verifies."""

    mode: policy.Mode
    marks: policy.Watermarks
    gates: bool


_seen: _SeenState | None = None
_INSERT_FIELDS = [f for f in ReviewItem._meta.local_concrete_fields if not f.primary_key]
# The item's values in column order. Its fields are text, integers, booleans,
# aware datetimes and one nullable key, which Django's get_db_prep_save passes
# to psycopg unchanged (tests/reviewqueue/test_admit_one_statement.py checks this).
_insert_values = operator.attrgetter(*(f.attname for f in _INSERT_FIELDS))
_admission_statements: tuple[str, str] | None = None
_cursors = threading.local()


def _remember(queue: QueuePolicy, gates: bool) -> None:
    global _seen
    _seen = _SeenState(policy.Mode(queue.mode), queue.watermarks(), gates)


def _admission_sql(db: BaseDatabaseWrapper) -> tuple[str, str]:
    """(the one-statement admission, the state read), built once from the models."""
    global _admission_statements
    if _admission_statements is None:
        qn = db.ops.quote_name
        items, rules = qn(ReviewItem._meta.db_table), qn(FilterRule._meta.db_table)
        policies = qn(QueuePolicy._meta.db_table)
        gates = f"EXISTS (SELECT 1 FROM {rules} WHERE status = %s)"
        # Every value carries its column's type: INSERT ... SELECT would take
        # an untyped parameter (a NULL) for text. Text columns are cast to text,
        # not varchar(n), which would truncate silently instead of failing.
        casts = [
            "text" if f.get_internal_type() in {"CharField", "TextField"} else f.db_type(db) for f in _INSERT_FIELDS
        ]
        apply = (
            f"WITH counted AS (UPDATE {policies} SET depth = depth + 1, updated_at = %s"
            " WHERE id = 1 AND mode = %s AND depth BETWEEN %s AND %s"
            f" AND capacity = %s AND high_watermark = %s AND low_watermark = %s AND NOT {gates}"
            " RETURNING depth),"
            f" inserted AS (INSERT INTO {items} ({', '.join(qn(f.column) for f in _INSERT_FIELDS)})"
            f" SELECT {', '.join(f'%s::{cast}' for cast in casts)} FROM counted RETURNING id)"
            " SELECT inserted.id, counted.depth FROM inserted, counted"
        )
        read = f"SELECT mode, depth, capacity, high_watermark, low_watermark, {gates} FROM {policies} WHERE id = 1"
        _admission_statements = (apply, read)
    return _admission_statements


def _admission_cursor(pg: psycopg.Connection[Any]) -> psycopg.Cursor[Any]:
    """A server-side-binding cursor on this thread's connection, kept while
    the connection lives: its statements are prepared once per connection,
    and its adapters are looked up once."""
    kept = getattr(_cursors, "kept", None)
    if kept is None or kept.connection is not pg:
        kept = _cursors.kept = psycopg.Cursor(pg)
    return kept


def _admit_one_statement(db: BaseDatabaseWrapper, item: ReviewItem, now: datetime) -> AdmitResult | None:
    """admit() for PostgreSQL outside a transaction: one prepared statement.

    In most states the policy's decision for an arrival is the same for a
    whole range of depths: enqueue it, shed nothing, keep the mode
    (policy.plain_enqueue_depths, which agrees with plan_admission at every
    depth). With the mode and watermarks this process last saw, one statement
    adds 1 to the policy row's depth WHERE the mode, the watermarks and the
    gates are still as seen and the depth is inside that range, and inserts
    the item from the updated row, so the insert happens only if the update
    did. The UPDATE takes the row lock that every writer of queue state holds,
    and under READ COMMITTED it re-evaluates its WHERE on the newest row
    version after waiting, so concurrent admissions and verdicts never make
    it wrong, and, as long as they keep the depth inside the range, never make
    it miss. After a miss it re-reads the state once and tries again.

    Returns None, having changed nothing, whenever plan_admission must decide
    on the general path: outside the range (a watermark crossed, shedding), a
    filter gate on, the key admitted before by the same producer (the
    violation of the (producer, key) constraint rolls the whole statement
    back, the update included), or the state still moving.
    """
    global _seen
    apply_sql, read_sql = _admission_sql(db)
    db.ensure_connection()
    with db.wrap_database_errors:
        cursor = _admission_cursor(db.connection)
        for attempt in range(2):
            state, depth = _seen, None
            if state is None or attempt:
                cursor.execute(read_sql, (FilterRule.Status.ENABLED,), prepare=True)
                row = cursor.fetchone()
                if row is None:  # a first start: the general path creates the policy row
                    return None
                marks = policy.Watermarks(capacity=row[2], high=row[3], low=row[4])
                state = _seen = _SeenState(policy.Mode(row[0]), marks, row[5])
                depth = row[1]
            depths = policy.plain_enqueue_depths(state.mode, state.marks)
            if state.gates or not depths or (depth is not None and depth not in depths):
                return None
            item.updated_at = now  # what pre_save of the auto_now field would do
            marks = state.marks
            try:
                cursor.execute(
                    apply_sql,
                    (now, state.mode.value, depths[0], depths[-1], marks.capacity, marks.high, marks.low)
                    + (FilterRule.Status.ENABLED, *_insert_values(item)),
                    prepare=True,
                )
            except psycopg.errors.UniqueViolation:
                return None  # a duplicate key: the general path answers with the first item
            applied = cursor.fetchone()
            if applied is not None:
                item.pk, depth = applied
                item._state.adding = False
                item._state.db = db.alias
                return AdmitResult("enqueued", item, state.mode.value, depth=depth)
    return None


def _run_filter_gates(output: str) -> list[str]:
    gates = enabled_gates()
    if not gates:
        return []
    from loops.gates import run_gates  # loops is pure; imported late to keep start-up light

    return run_gates(output, gates)


# --- claim, release, renew -------------------------------------------------------


def expire_leases(*, now: datetime | None = None) -> int:
    """Put items whose lease ran out back in the queue. Safe to repeat."""
    now = now or timezone.now()
    return ReviewItem.objects.filter(status=ReviewItem.Status.CLAIMED, lease_expires_at__lt=now).update(
        status=ReviewItem.Status.PENDING,
        lease_holder=None,
        lease_expires_at=None,
        lease_expiries=F("lease_expiries") + 1,
    )


def current_claim(*, reviewer: AbstractBaseUser, now: datetime | None = None) -> ReviewItem | None:
    now = now or timezone.now()
    return (
        ReviewItem.objects.filter(status=ReviewItem.Status.CLAIMED, lease_holder=reviewer, lease_expires_at__gte=now)
        .order_by("claimed_at")
        .first()
    )


def claim(
    *, reviewer: AbstractBaseUser, exclude: Collection[int] = (), now: datetime | None = None
) -> ReviewItem | None:
    """The reviewer's next item under a lease: the one they already hold, else
    the next pending item by priority then age, passing over ``exclude`` (items
    the reviewer skipped). None when nothing is left to claim.

    Two reviewers never get the same item: PostgreSQL skips rows another
    transaction has locked; elsewhere a conditional update decides the race.
    Safe to repeat: a reviewer holding a live lease gets the same item back.
    """
    now = now or timezone.now()
    held = current_claim(reviewer=reviewer, now=now)
    if held is not None:
        return held
    expire_leases(now=now)
    lease = timedelta(seconds=QueuePolicy.current().lease_seconds)
    pending = ReviewItem.objects.filter(status=ReviewItem.Status.PENDING).order_by("-priority", "created_at", "pk")
    if exclude:
        pending = pending.exclude(pk__in=list(exclude))
    claimed_fields = {
        "status": ReviewItem.Status.CLAIMED,
        "lease_holder": reviewer,
        "lease_expires_at": now + lease,
        "claimed_at": now,
        "updated_at": now,
    }
    if connection.features.has_select_for_update_skip_locked:
        with transaction.atomic():
            item = pending.select_for_update(skip_locked=True).first()
            if item is None:
                return None
            for name, value in claimed_fields.items():
                setattr(item, name, value)
            item.save(update_fields=list(claimed_fields))
            return item
    for _ in range(50):
        pk = pending.values_list("pk", flat=True).first()
        if pk is None:
            return None
        won = ReviewItem.objects.filter(pk=pk, status=ReviewItem.Status.PENDING).update(**claimed_fields)
        if won == 1:
            return ReviewItem.objects.get(pk=pk)
    return None


def _held_item(item_id: int, reviewer: AbstractBaseUser, now: datetime) -> ReviewItem:
    """The item under a row lock, checked to be under this reviewer's live lease."""
    try:
        item = ReviewItem.objects.select_for_update().get(pk=item_id)
    except ReviewItem.DoesNotExist:
        raise QueueError(f"item {item_id} does not exist") from None
    if item.status in ReviewItem.DECIDED:
        raise AlreadyDecided(f"item {item_id} was already decided ({item.status})")
    if item.status == ReviewItem.Status.SHED:
        raise QueueError(f"item {item_id} was shed from the queue")
    if item.status != ReviewItem.Status.CLAIMED or item.lease_holder_id != reviewer.pk:
        if item.lease_expiries:
            # The late holder of a lease that ran out and was swept back.
            raise LeaseExpired(f"the lease on item {item_id} expired; it went back to the queue")
        raise NotLeaseHolder(f"item {item_id} is not claimed by you")
    if item.lease_expires_at is None or item.lease_expires_at < now:
        raise LeaseExpired(f"your lease on item {item_id} expired")
    return item


def release(*, item_id: int, reviewer: AbstractBaseUser, now: datetime | None = None) -> ReviewItem:
    """Give a claimed item back to the queue (skip). Only the lease holder may."""
    now = now or timezone.now()
    with transaction.atomic():
        item = _held_item(item_id, reviewer, now)
        item.status = ReviewItem.Status.PENDING
        item.lease_holder = None
        item.lease_expires_at = None
        item.save(update_fields=["status", "lease_holder", "lease_expires_at", "updated_at"])
        return item


def renew(*, item_id: int, reviewer: AbstractBaseUser, now: datetime | None = None) -> ReviewItem:
    """Extend the holder's live lease by the policy's lease length. Safe to repeat."""
    now = now or timezone.now()
    lease = timedelta(seconds=QueuePolicy.current().lease_seconds)
    with transaction.atomic():
        item = _held_item(item_id, reviewer, now)
        item.lease_expires_at = now + lease
        item.save(update_fields=["lease_expires_at", "updated_at"])
        return item


# --- decide, undo ----------------------------------------------------------------


def _tuner_verdicts(window: int) -> list[bool]:
    recent = (
        Verdict.objects.filter(counts_for_tuner=True).order_by("-created_at", "-pk").values_list("decision", flat=True)
    )[:window]
    return [decision == Verdict.Decision.APPROVE for decision in reversed(list(recent))]


def _retune(queue: QueuePolicy, verdict: Verdict, now: datetime) -> None:
    cfg = queue.tuner()
    verdicts = _tuner_verdicts(cfg.window)
    new_limit = policy.tune_step_limit(queue.step_limit, verdicts, cfg)
    if new_limit != queue.step_limit:
        StepLimitChange.objects.create(
            previous=queue.step_limit,
            step_limit=new_limit,
            approve_rate=policy.approve_rate(verdicts, cfg.window),
            verdict=verdict,
            created_at=now,
        )
        log.info("step limit tuned", extra={"previous": queue.step_limit, "step_limit": new_limit})
        queue.step_limit = new_limit
        queue.save(update_fields=["step_limit", "updated_at"])


def _propose_rules(queue: QueuePolicy, now: datetime) -> None:
    counts = dict(LabelCount.objects.values_list("label", "count"))
    existing = FilterRule.objects.values_list("label", flat=True)
    for label in policy.proposed_filter_rules(counts, queue.label_threshold, existing):
        gate, description = policy.FILTER_GATES[label]
        FilterRule.objects.create(
            label=label, gate=gate, description=description, count_at_proposal=counts[label], proposed_at=now
        )
        log.info("filter rule proposed", extra={"label": label, "gate": gate})


def decide(
    *,
    item_id: int,
    reviewer: AbstractBaseUser,
    approve: bool,
    reason_label: str = "",
    note: str = "",
    now: datetime | None = None,
) -> Verdict:
    """Record a verdict on an item the reviewer holds under a live lease.

    Only once: a second call raises AlreadyDecided and changes nothing. The
    step-limit tuner, the label counts and the queue mode move in the same
    transaction as the verdict.
    """
    now = now or timezone.now()
    if not approve and reason_label not in ReasonLabel.values:
        raise InvalidInput("reason_label", f"a rejection needs one of {', '.join(ReasonLabel.values)}")
    note_text, _ = clean_text(note, limit=5_000)
    with transaction.atomic():
        queue = QueuePolicy.locked()
        item = _held_item(item_id, reviewer, now)
        try:
            with transaction.atomic():
                verdict = Verdict.objects.create(
                    item=item,
                    reviewer=reviewer,
                    decision=Verdict.Decision.APPROVE if approve else Verdict.Decision.REJECT,
                    reason_label="" if approve else reason_label,
                    note=note_text,
                    counts_for_tuner=policy.counts_for_tuner(
                        sampled=item.label == ReviewItem.Label.SAMPLED, draft=item.draft
                    ),
                    created_at=now,
                )
        except IntegrityError:
            raise AlreadyDecided(f"item {item_id} was already decided") from None
        item.status = ReviewItem.Status.APPROVED if approve else ReviewItem.Status.REJECTED
        item.decided_at = now
        item.lease_expires_at = None
        item.save(update_fields=["status", "decided_at", "lease_expires_at", "updated_at"])
        if not approve:
            LabelCount.objects.get_or_create(label=reason_label)
            LabelCount.objects.filter(label=reason_label).update(count=F("count") + 1)
            _propose_rules(queue, now)
        if verdict.counts_for_tuner:
            _retune(queue, verdict, now)
        _after_depth_change(queue, max(queue.depth - 1, 0), now)  # the item left the waiting set
        return verdict


def undo(*, reviewer: AbstractBaseUser, now: datetime | None = None) -> ReviewItem:
    """Take back the reviewer's last verdict if it is younger than the undo
    window: the item returns to them under a fresh lease, and the label count
    and any step-limit change that verdict caused are reverted."""
    now = now or timezone.now()
    window = timedelta(seconds=settings.REVIEWQUEUE_UNDO_SECONDS)
    with transaction.atomic():
        queue = QueuePolicy.locked()
        verdict = (
            Verdict.objects.select_for_update()
            .filter(reviewer=reviewer, created_at__gte=now - window)
            .order_by("-created_at", "-pk")
            .first()
        )
        if verdict is None:
            raise NothingToUndo(f"no verdict of yours in the last {window.seconds} seconds to undo")
        item = verdict.item
        change = StepLimitChange.objects.filter(verdict=verdict).first()
        if change is not None and queue.step_limit == change.step_limit:
            queue.step_limit = change.previous
            queue.save(update_fields=["step_limit", "updated_at"])
            change.delete()
        if verdict.reason_label:
            LabelCount.objects.filter(label=verdict.reason_label, count__gt=0).update(count=F("count") - 1)
        verdict.delete()
        item.status = ReviewItem.Status.CLAIMED
        item.lease_holder = reviewer
        item.lease_expires_at = now + timedelta(seconds=queue.lease_seconds)
        item.decided_at = None
        item.save(update_fields=["status", "lease_holder", "lease_expires_at", "decided_at", "updated_at"])
        _after_depth_change(queue, queue.depth + 1, now)  # the item is waiting again
        return item


# --- policy settings -------------------------------------------------------------


def policy_update(*, user: AbstractBaseUser | None, changes: dict[str, object]) -> QueuePolicy:
    """Change policy fields after validation; audited (who, when, before -> after).
    Raises django.core.exceptions.ValidationError naming the fields."""
    unknown = set(changes) - set(QueuePolicy.EDITABLE_FIELDS)
    if unknown:
        raise InvalidInput(min(unknown), "is not a policy setting")
    with transaction.atomic():
        queue = QueuePolicy.locked()
        before = queue.snapshot()
        for name, value in changes.items():
            setattr(queue, name, value)
        queue.full_clean()
        after = queue.snapshot()
        diff = {name: [before[name], after[name]] for name in after if before[name] != after[name]}
        if not diff:
            return queue
        queue.save()
        PolicyAudit.objects.create(user=user, changes=diff)
        if "step_limit" in diff:
            StepLimitChange.objects.create(previous=before["step_limit"], step_limit=queue.step_limit, changed_by=user)
        _after_depth_change(queue, queue_depth(), timezone.now())  # new watermarks; recount while at it
        log.info("policy changed", extra={"changes": diff, "user": getattr(user, "username", None)})
        return queue
