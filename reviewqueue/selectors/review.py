"""What the review page's side panel reads: the reviewer's recent answers
with their count over the last hour, and the queues they review.

Each read is bounded by what the panel shows, never by the reviewer's
history: a reviewer with a million answers costs what one with a thousand
costs. The recent answers read at most ``PACE_SAMPLE`` rows from each of the
two tables that hold answers, each from the start of an index on (reviewer,
time descending), then join only those to their items; the hour's count reads
only the hour's index entries. Both come back in one statement, prepared on
PostgreSQL (``reviewqueue.prepared``). Every function here only reads.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from .. import prepared
from ..models import Judgement, Queue, ReviewItem, Verdict

# How many of the reviewer's newest answers the panel's pace is measured on.
PACE_SAMPLE = 20
QUEUE_FIELDS = ("slug", "name", "depth", "mode", "instructions", "archived_at")


def _recent_sql() -> str:
    """The newest ``PACE_SAMPLE`` answers, newest first, with the count since
    ``since`` on every row. An answer is a verdict of theirs, or an answer of
    theirs that is no verdict of theirs (a double review's answer, a gold
    answer). Each arm of the UNION is limited on its own index before the
    union is sorted, so the sort sees at most twice ``PACE_SAMPLE`` rows."""
    verdict, judgement, item = Verdict._meta, Judgement._meta, ReviewItem._meta
    v, j, i = verdict.db_table, judgement.db_table, item.db_table

    def own_answers(alias: str) -> str:
        # an answer that is also their verdict is listed once, as the verdict
        return (
            f"{alias}.reviewer_id = %(reviewer)s AND NOT EXISTS (SELECT 1 FROM {v} mine"
            f" WHERE mine.item_id = {alias}.item_id AND mine.reviewer_id = %(reviewer)s)"
        )

    columns = "decision, reason_label, created_at, item_id"
    return (
        f"SELECT top.decision, top.reason_label, top.created_at, top.item_id, i.claimed_at, i.queue_id,"
        f" (SELECT count(*) FROM {v} WHERE reviewer_id = %(reviewer)s AND created_at >= %(since)s)"
        f" + (SELECT count(*) FROM {j} a WHERE {own_answers('a')} AND a.created_at >= %(since)s)"
        f" FROM (SELECT * FROM (SELECT {columns} FROM {v} WHERE reviewer_id = %(reviewer)s"
        f" ORDER BY created_at DESC LIMIT {PACE_SAMPLE}) AS verdicts"
        f" UNION ALL SELECT * FROM (SELECT {columns} FROM {j} a WHERE {own_answers('a')}"
        f" ORDER BY created_at DESC LIMIT {PACE_SAMPLE}) AS answers"
        f" ORDER BY created_at DESC LIMIT {PACE_SAMPLE}) AS top"
        f" JOIN {i} i ON i.{item.pk.column} = top.item_id"
        " ORDER BY top.created_at DESC"
    )


_RECENT_SQL = _recent_sql()


def recent_answers(user: AbstractBaseUser, since: datetime) -> tuple[list[Verdict], int]:
    """The reviewer's newest answers, newest first, as (unsaved) verdicts
    carrying ``claimed_at``, and how many answers they gave since ``since``.
    Verdicts and answers that are no item's verdict (a double review's
    answer, a gold answer) are listed alike, so nothing in the list tells a
    gold or a double-reviewed item apart. One statement."""
    params = {"reviewer": user.pk, "since": since}
    rows: list[tuple[Any, ...]]
    if connection.vendor == "postgresql":
        rows = prepared.fetch(_RECENT_SQL, params)
    else:
        params["since"] = connection.ops.adapt_datetimefield_value(since)
        with connection.cursor() as cursor:
            cursor.execute(_RECENT_SQL, params)
            rows = [(*row[:2], _aware(row[2]), row[3], _aware(row[4]), *row[5:]) for row in cursor.fetchall()]
    recent = []
    for decision, label, created_at, item_id, claimed_at, queue_id, _ in rows:
        # queue_id given, so building the (unsaved) row reads no default queue.
        verdict = Verdict(
            decision=decision, reason_label=label, created_at=created_at, item_id=item_id, queue_id=queue_id
        )
        verdict.claimed_at = claimed_at
        recent.append(verdict)
    return recent, rows[0][-1] if rows else 0


def _aware(value: datetime | str | None) -> datetime | None:
    """A raw cursor's timestamp as the ORM would give it: SQLite hands back
    the stored text of a column read through a subquery, in UTC."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is not None and timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    return value


def reviewable_queues(user: AbstractBaseUser) -> list[Queue]:
    """The queues the reviewer reviews, by name, with only the fields the
    panel and the switcher show. One statement."""
    return list(Queue.objects.reviewable_by(user).order_by("name", "slug").only(*QUEUE_FIELDS))
