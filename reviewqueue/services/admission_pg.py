"""Admission in one statement, on PostgreSQL outside a transaction.

Its SQL and the state it keeps between calls live here together: the queue's
mode, watermarks and gates as this process last saw them (``_seen``), the
statements (built once from the models), and a prepared-statement cursor per
thread. The statement's UPDATE takes the policy row's lock, the one every
writer of queue state holds (ARCHITECTURE.md rule 7); nothing else is locked.
The general path in ``admission`` decides whenever this one hands over.
"""

from __future__ import annotations

import operator
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from django.db.backends.base.base import BaseDatabaseWrapper

from .. import policy
from ..models import FilterRule, Queue, ReviewItem
from .outcomes import AdmitResult


@dataclass(frozen=True)
class _SeenState:
    """The queue's mode, watermarks and gates as an admission in this process
    last saw them: a hint for the next admission, which the database verifies."""

    mode: policy.Mode
    marks: policy.Watermarks
    gates: bool


_seen: dict[int, _SeenState] = {}  # by queue pk
_INSERT_FIELDS = [f for f in ReviewItem._meta.local_concrete_fields if not f.primary_key]
# The item's values in column order. Its fields are text, integers, booleans,
# aware datetimes and one nullable key, which Django's get_db_prep_save passes
# to psycopg unchanged (tests/reviewqueue/services/test_admission_pg.py checks this).
_insert_values = operator.attrgetter(*(f.attname for f in _INSERT_FIELDS))
_admission_statements: tuple[str, str] | None = None
_cursors = threading.local()


def remember(queue: Queue, gates: bool) -> None:
    """Keep the state the general path just saw under the queue's lock, as
    the next one-statement admission's hint for that queue."""
    _seen[queue.pk] = _SeenState(policy.Mode(queue.mode), queue.watermarks(), gates)


def _admission_sql(db: BaseDatabaseWrapper) -> tuple[str, str]:
    """(the one-statement admission, the state read), built once from the models."""
    global _admission_statements
    if _admission_statements is None:
        qn = db.ops.quote_name
        items, rules = qn(ReviewItem._meta.db_table), qn(FilterRule._meta.db_table)
        policies = qn(Queue._meta.db_table)
        gates = f"EXISTS (SELECT 1 FROM {rules} WHERE status = %s AND queue_id = %s)"
        # The age watermark: a waiting item admitted before the cutoff (NULL: no
        # cutoff) is older than age_high, so the arrival is not a plain enqueue.
        waiting = ", ".join(f"'{status}'" for status in ReviewItem.WAITING)
        too_old = (
            f"%s::timestamptz IS NOT NULL AND EXISTS (SELECT 1 FROM {items} WHERE queue_id = %s"
            f" AND status IN ({waiting}) AND created_at < %s::timestamptz)"
        )
        # Every value carries its column's type: INSERT ... SELECT would take
        # an untyped parameter (a NULL) for text. Text columns are cast to text,
        # not varchar(n), which would truncate silently instead of failing.
        casts = [
            "text" if f.get_internal_type() in {"CharField", "TextField"} else f.db_type(db) for f in _INSERT_FIELDS
        ]
        apply = (
            f"WITH counted AS (UPDATE {policies} SET depth = depth + 1, updated_at = %s"
            " WHERE id = %s AND archived_at IS NULL AND mode = %s AND depth BETWEEN %s AND %s"
            f" AND capacity = %s AND high_watermark = %s AND low_watermark = %s AND NOT {gates}"
            " AND age_high_minutes IS NOT DISTINCT FROM %s::double precision"
            " AND age_low_minutes IS NOT DISTINCT FROM %s::double precision"
            f" AND NOT ({too_old})"
            " RETURNING depth),"
            f" inserted AS (INSERT INTO {items} ({', '.join(qn(f.column) for f in _INSERT_FIELDS)})"
            f" SELECT {', '.join(f'%s::{cast}' for cast in casts)} FROM counted RETURNING id)"
            " SELECT inserted.id, counted.depth FROM inserted, counted"
        )
        read = (
            f"SELECT mode, depth, capacity, high_watermark, low_watermark, {gates},"
            f" age_high_minutes, age_low_minutes FROM {policies}"
            " WHERE id = %s AND archived_at IS NULL"
        )
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


def _apply_params(queue: int, state: _SeenState, depths: range, now: datetime, item: ReviewItem) -> tuple[Any, ...]:
    """The one-statement admission's parameters, in the order of its placeholders."""
    marks = state.marks
    age_limit = policy.plain_enqueue_age_limit(state.mode, marks)
    cutoff = None if age_limit is None else now - timedelta(minutes=age_limit)
    return (
        (now, queue, state.mode.value, depths[0], depths[-1], marks.capacity, marks.high, marks.low)
        + (FilterRule.Status.ENABLED, queue, marks.age_high, marks.age_low, cutoff, queue, cutoff)
        + tuple(_insert_values(item))
    )


def admit_one_statement(db: BaseDatabaseWrapper, item: ReviewItem, now: datetime) -> AdmitResult | None:
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
    it miss. Under an age watermark, a normal queue's statement also checks
    that no waiting item is older than the watermark (one probe of the index
    of waiting items by age); items only grow older, and a decided one only
    makes the check stricter than it needs to be, so a concurrent change
    never makes it wrong either. After a miss it re-reads the state once and tries again.

    Returns None, having changed nothing, whenever plan_admission must decide
    on the general path: outside the range (a watermark crossed, shedding), a
    filter gate on, the key admitted before by the same producer (the
    violation of the (producer, key) constraint rolls the whole statement
    back, the update included), or the state still moving.
    """
    apply_sql, read_sql = _admission_sql(db)
    queue = item.queue_id
    db.ensure_connection()
    with db.wrap_database_errors:
        cursor = _admission_cursor(db.connection)
        for attempt in range(2):
            state, depth = _seen.get(queue), None
            if state is None or attempt:
                cursor.execute(read_sql, (FilterRule.Status.ENABLED, queue, queue), prepare=True)
                row = cursor.fetchone()
                if row is None:  # archived: the general path refuses it
                    return None
                marks = policy.Watermarks(capacity=row[2], high=row[3], low=row[4], age_high=row[6], age_low=row[7])
                state = _seen[queue] = _SeenState(policy.Mode(row[0]), marks, row[5])
                depth = row[1]
            depths = policy.plain_enqueue_depths(state.mode, state.marks)
            if state.gates or not depths or (depth is not None and depth not in depths):
                return None
            item.updated_at = now  # what pre_save of the auto_now field would do
            marks = state.marks
            try:
                cursor.execute(apply_sql, _apply_params(queue, state, depths, now, item), prepare=True)
            except psycopg.errors.UniqueViolation:
                return None  # a duplicate key: the general path answers with the first item
            applied = cursor.fetchone()
            if applied is not None:
                item.pk, depth = applied
                item._state.adding = False
                item._state.db = db.alias
                return AdmitResult("enqueued", item, state.mode.value, depth=depth, capacity=marks.capacity)
    return None
