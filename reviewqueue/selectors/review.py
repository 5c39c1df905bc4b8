"""What the review page's side panel reads: the reviewer's recent answers
with their count over the last hour, and the queues they review.

Each read is bounded by what the panel shows, never by the reviewer's
history: a reviewer with a million answers costs what one with a thousand
costs. The recent answers read at most ``PACE_SAMPLE`` rows from each of the
two tables that hold answers, each from the start of an index on (reviewer,
time descending), then join only those to their items; the hour's count reads
only the hour's index entries. Both come back in one statement, prepared on
PostgreSQL (``reviewqueue.prepared``). ``_context_panel`` puts them together
with the queue in view for the page. Every function here only reads.
"""

from __future__ import annotations

import statistics
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, Group, User
from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from .. import prepared
from ..models import Judgement, Queue, ReviewItem, Verdict

# How many of the reviewer's newest answers the panel's pace is measured on.
PACE_SAMPLE = 20
QUEUE_FIELDS = ("slug", "name", "depth", "gold_waiting", "mode", "instructions", "archived_at")


def reviewable_sql() -> str:
    """``Queue.objects.reviewable_by`` as SQL for a prepared statement: the
    ids of the queues open to every reviewer, naming ``%(reviewer)s``, or
    naming one of their groups. Change both together (tests check they agree)."""
    queue = Queue._meta
    members = Queue.members.through._meta
    groups = Queue.member_groups.through._meta
    user_groups = User.groups.through._meta
    group = Group._meta.model_name + "_id"
    return (
        f"SELECT {queue.pk.column} FROM {queue.db_table} WHERE {queue.get_field('open_to_all').column}"
        f" UNION SELECT queue_id FROM {members.db_table} WHERE user_id = %(reviewer)s"
        f" UNION SELECT g.queue_id FROM {groups.db_table} g JOIN {user_groups.db_table} ug"
        f" ON ug.{group} = g.{group} WHERE ug.user_id = %(reviewer)s"
    )


# The panel's queue fields in the model's column order, as Model.from_db takes them.
_QUEUE_COLUMNS = [f for f in Queue._meta.concrete_fields if f.primary_key or f.name in QUEUE_FIELDS]
_QUEUES_SQL = (
    f"SELECT {', '.join(f.column for f in _QUEUE_COLUMNS)} FROM {Queue._meta.db_table}"
    f" WHERE {Queue._meta.pk.column} IN ({reviewable_sql()}) ORDER BY name, slug"
)


def _recent_sql(lateral: bool) -> str:
    """The newest ``PACE_SAMPLE`` answers, newest first, with the count since
    ``since`` on every row. An answer is a verdict of theirs, or an answer of
    theirs that is no verdict of theirs (a double review's answer, a gold
    answer). Each arm of the UNION is limited on its own index before the
    union is sorted, so the sort sees at most twice ``PACE_SAMPLE`` rows,
    however many of their answers are also their verdicts."""
    verdict, judgement, item = Verdict._meta, Judgement._meta, ReviewItem._meta
    v, j, i = verdict.db_table, judgement.db_table, item.db_table

    def own_answers(alias: str) -> str:
        # An answer that is also their verdict is listed once, as the verdict.
        # A scalar subquery (the item's verdict is unique) is never turned into
        # a hash anti-join over all their verdicts: one index probe per answer read.
        return (
            f"{alias}.reviewer_id = %(reviewer)s AND (SELECT mine.reviewer_id FROM {v} mine"
            f" WHERE mine.item_id = {alias}.item_id) IS DISTINCT FROM %(reviewer)s"
        )

    columns = "decision, reason_label, created_at, item_id"
    return (
        f"SELECT top.decision, top.reason_label, top.created_at, top.item_id, i.claimed_at, i.queue_id,"
        f" (SELECT count(*) FROM {v} WHERE reviewer_id = %(reviewer)s AND created_at >= %(since)s)"
        f" + (SELECT count(*) FROM {j} a WHERE {own_answers('a')} AND a.created_at >= %(since)s)"
        f" FROM (SELECT * FROM (SELECT {columns} FROM {v} WHERE reviewer_id = %(reviewer)s"
        f" ORDER BY created_at DESC LIMIT {PACE_SAMPLE}) AS verdicts"
        # Their newest answers, then those that are also their verdict left
        # out: a verdict of theirs is never older than their answer on the same
        # item (it is written when the item settles), so each answer left out
        # has its verdict among the newer rows, and the newest PACE_SAMPLE
        # answers hold every one the list can show.
        f" UNION ALL SELECT * FROM (SELECT {columns} FROM (SELECT {columns} FROM {j}"
        f" WHERE reviewer_id = %(reviewer)s ORDER BY created_at DESC LIMIT {PACE_SAMPLE}) AS a"
        f" WHERE (SELECT mine.reviewer_id FROM {v} mine WHERE mine.item_id = a.item_id)"
        " IS DISTINCT FROM %(reviewer)s) AS answers"
        f" ORDER BY created_at DESC LIMIT {PACE_SAMPLE}) AS top"
        # PostgreSQL: LIMIT 1 keeps the item lookup a probe per row shown, never
        # a join over all items (SQLite has no LATERAL; it loops by nature).
        + (
            f" JOIN LATERAL (SELECT claimed_at, queue_id FROM {i} WHERE {item.pk.column} = top.item_id LIMIT 1) i ON true"
            if lateral
            else f" JOIN {i} i ON i.{item.pk.column} = top.item_id"
        )
        + " ORDER BY top.created_at DESC"
    )


_RECENT_SQL = _recent_sql(lateral=True)
_RECENT_SQL_PLAIN = _recent_sql(lateral=False)


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
            cursor.execute(_RECENT_SQL_PLAIN, params)
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
    panel and the switcher show. One statement, prepared on PostgreSQL."""
    if connection.vendor != "postgresql" or not getattr(user, "is_authenticated", False):
        return list(Queue.objects.reviewable_by(user).order_by("name", "slug").only(*QUEUE_FIELDS))
    names = [f.attname for f in _QUEUE_COLUMNS]
    return [
        Queue.from_db(connection.alias, names, list(row)) for row in prepared.fetch(_QUEUES_SQL, {"reviewer": user.pk})
    ]


RECENT_VERDICTS = 8


def _context_panel(user: User, item: ReviewItem | None, focus: Queue | None) -> dict[str, object]:
    """What a reviewer needs beside the item: their queues (each one's
    waiting count and mode, for the switcher), the waiting count and mode of
    the queue in view (the focused queue's in the panel), the instructions
    of the item's queue, their own recent verdicts and pace.

    Two statements (``selectors.review``): the queues, and the recent answers
    with the last hour's count. A waiting count is ``Queue.waiting``: the
    depth and the gold copies kept on a queue's row (exact under the queue's
    lock, recounted by the depth-sampler beat task), so a copy waits, and
    leaves the count when answered, as a real item does."""
    now = timezone.now()
    recent, last_hour = recent_answers(user, now - timedelta(hours=1))
    spans = [
        (v.created_at - v.claimed_at).total_seconds()
        for v in recent
        if v.claimed_at is not None and v.created_at >= v.claimed_at
    ]
    median = statistics.median(spans) if spans else None
    queues = reviewable_queues(user)
    if not queues and Queue.default().open_to_all:  # the default queue is made on first use
        queues = reviewable_queues(user)
    # An archived queue shows while items still wait in it: they still need a verdict.
    shown = [q for q in queues if not q.archived or q.waiting or (focus is not None and q.pk == focus.pk)]
    by_pk = {q.pk: q for q in queues}
    if item is not None and item.queue_id not in by_pk:  # held from a queue since left
        by_pk[item.queue_id] = Queue.objects.only(*QUEUE_FIELDS).get(pk=item.queue_id)
    in_view = by_pk.get(item.queue_id) if item is not None else None
    in_view = in_view or (by_pk.get(focus.pk) if focus is not None else None)
    if in_view is None and len(queues) == 1:
        in_view = queues[0]
    scope = [focus] if focus is not None else queues
    # The panel's waiting count is the focused queue's, so its mode is too;
    # across all queues, the mode of the queue in view.
    panel_queue = by_pk.get(focus.pk, focus) if focus is not None else in_view
    return {
        "queues": shown,
        "focus": focus,
        "item_queue": by_pk.get(item.queue_id) if item is not None else None,
        "queue_in_view": in_view,
        "all_waiting": sum(q.waiting for q in queues),
        "waiting": sum(q.waiting for q in scope),
        "empty_queues": [q for q in scope if not q.waiting],
        "mode": in_view.mode if in_view is not None else "",
        "panel_queue": panel_queue,
        "instructions": in_view.instructions if in_view is not None else None,
        "recent": recent[:RECENT_VERDICTS],
        "last_hour": last_hour,
        "median_seconds": median,
        # Sub-second spans come from scripts, not people; no pace claimed from them.
        "pace_per_hour": round(3600 / median) if median and median >= 1 else None,
        "undo_seconds": settings.REVIEWQUEUE_UNDO_SECONDS,
    }
