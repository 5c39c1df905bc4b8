"""Claim in one statement on PostgreSQL.

``UPDATE ... WHERE id = (SELECT id ... FOR UPDATE SKIP LOCKED LIMIT 1)
RETURNING ...``: the subquery locks the next claimable item (pending, or
claimed under a lease that ran out) and skips rows another transaction holds,
so two reviewers never get the same item. It claims in one queue, which
``leases.claim`` chose by the serving rule; the lease length comes from the
caller or, in the same statement, from that queue's row (which is read, not
locked). An item whose lease ran out has its expiry counted on it. A gold
copy is claimed in its place like any item (``leases.claim`` then fills it);
items this reviewer already answered in a double review, items only an
operator may settle, and every item for a paused reviewer are passed over.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from django.db import connection

from .. import prepared
from ..models import OPERATOR_ROUND, Judgement, Queue, ReviewerStanding, ReviewItem
from ..selectors.review import reviewable_sql

_FIELDS = ReviewItem._meta.concrete_fields


def _sql() -> str:
    item, queue = ReviewItem._meta, Queue._meta
    judgement, standing = Judgement._meta, ReviewerStanding._meta

    def col(name: str) -> str:
        return item.get_field(name).column

    lease = (
        f"(SELECT {queue.get_field('lease_seconds').column} FROM {queue.db_table} WHERE {queue.pk.column} = %(queue)s)"
    )
    claimable = (
        f"({col('status')} = 'pending' OR ({col('status')} = 'claimed' AND {col('lease_expires_at')} < %(now)s))"
    )
    return (
        f"UPDATE {item.db_table} SET {col('status')} = 'claimed', {col('lease_holder')} = %(reviewer)s,"
        f" {col('lease_expires_at')} = %(now)s + make_interval(secs => COALESCE(%(lease)s::integer, {lease}, 300)),"
        f" {col('claimed_at')} = %(now)s, {col('updated_at')} = %(now)s,"
        f" {col('lease_expiries')} = {col('lease_expiries')}"
        f" + CASE WHEN {col('status')} = 'claimed' THEN 1 ELSE 0 END"
        f" WHERE {item.pk.column} = (SELECT {item.pk.column} FROM {item.db_table}"
        # the queue first: with the order below it is the partial index queue_next_item
        f" WHERE {col('queue')} = %(queue)s AND {col('status')} IN ('pending', 'claimed')"
        f" AND {claimable} AND NOT ({item.pk.column} = ANY(%(exclude)s::bigint[]))"
        f" AND {col('review_round')} < {OPERATOR_ROUND}"
        # never an item this reviewer already answered in a double review
        f" AND ({col('review_round')} = 1 OR NOT EXISTS (SELECT 1 FROM {judgement.db_table} j"
        f" WHERE j.{judgement.get_field('item').column} = {item.db_table}.{item.pk.column}"
        f" AND j.{judgement.get_field('reviewer').column} = %(reviewer)s))"
        # a paused reviewer claims nothing
        f" AND NOT EXISTS (SELECT 1 FROM {standing.db_table} s WHERE s.{standing.get_field('reviewer').column}"
        f" = %(reviewer)s AND s.{standing.get_field('paused_at').column} IS NOT NULL)"
        f" ORDER BY {col('priority')} DESC, {col('created_at')}, {item.pk.column}"
        " LIMIT 1 FOR UPDATE SKIP LOCKED)"
        f" RETURNING {', '.join(field.column for field in _FIELDS)}"
    )


_SQL = _sql()


def _heads_sql() -> str:
    """``leases.queue_heads`` as one statement: each queue the reviewer
    reviews (``selectors.review.reviewable_sql``, the twin of
    ``Queue.objects.reviewable_by``), optionally only the one named by slug, with
    its next claimable item's priority and age read by a LATERAL subquery
    from the start of the partial index ``queue_next_item``; beside them,
    whether the reviewer is paused and the item they hold under a live lease."""
    item, queue = ReviewItem._meta, Queue._meta
    judgement, standing = Judgement._meta, ReviewerStanding._meta

    def col(name: str) -> str:
        return item.get_field(name).column

    head = (
        f"SELECT {col('priority')} AS priority, {col('created_at')} AS arrived FROM {item.db_table} i"
        # the queue first, then the index's order and condition: queue_next_item serves it
        f" WHERE i.{col('queue')} = q.{queue.pk.column} AND i.{col('status')} IN ('pending', 'claimed')"
        f" AND (i.{col('status')} = 'pending' OR i.{col('lease_expires_at')} < %(now)s)"
        f" AND i.{col('review_round')} < {OPERATOR_ROUND}"
        f" AND NOT (i.{item.pk.column} = ANY(%(exclude)s::bigint[]))"
        f" AND (i.{col('review_round')} <= 1 OR NOT EXISTS (SELECT 1 FROM {judgement.db_table} j"
        f" WHERE j.{judgement.get_field('item').column} = i.{item.pk.column}"
        f" AND j.{judgement.get_field('reviewer').column} = %(reviewer)s))"
        f" ORDER BY i.{col('priority')} DESC, i.{col('created_at')}, i.{item.pk.column} LIMIT 1"
    )
    paused = (
        f"EXISTS (SELECT 1 FROM {standing.db_table} s WHERE s.{standing.get_field('reviewer').column}"
        f" = %(reviewer)s AND s.{standing.get_field('paused_at').column} IS NOT NULL)"
    )
    held = (
        f"(SELECT {item.pk.column} FROM {item.db_table} WHERE {col('status')} = 'claimed'"
        f" AND {col('lease_holder')} = %(reviewer)s AND {col('lease_expires_at')} >= %(now)s"
        # a lease kept from before the reviewer left a queue holds nothing for them
        f" AND {col('queue')} IN ({reviewable_sql()})"
        f" ORDER BY {col('claimed_at')} LIMIT 1)"
    )
    q = {name: queue.get_field(name).column for name in ("slug", "depth", "capacity", "lease_seconds")}
    return (
        f"SELECT q.{queue.pk.column}, q.{q['slug']}, q.{q['depth']}, q.{q['capacity']}, q.{q['lease_seconds']},"
        f" h.priority, h.arrived, {paused}, {held}"
        f" FROM {queue.db_table} q LEFT JOIN LATERAL ({head}) h ON true"
        f" WHERE q.{queue.pk.column} IN ({reviewable_sql()})"
        f" AND (%(slug)s::text IS NULL OR q.{q['slug']} = %(slug)s::text)"
        f" ORDER BY q.{q['slug']}"
    )


_HEADS_SQL = _heads_sql()


def queue_heads_one_statement(
    reviewer_id: int, now: datetime, exclude: Collection[int], slug: str | None
) -> list[tuple[int, str, int, int, int, int | None, datetime | None, bool, int | None]]:
    """Rows of (pk, slug, depth, capacity, lease_seconds, head priority, head
    arrival, paused, held item) for the reviewer's queues (or the one named
    ``slug``), ordered by slug: one prepared statement. Reads only."""
    params = {"reviewer": reviewer_id, "now": now, "exclude": sorted(exclude), "slug": slug}
    return prepared.fetch(_HEADS_SQL, params)  # type: ignore[return-value]


def claim_one_statement(
    reviewer_id: int, exclude: Collection[int], now: datetime, lease_seconds: int | None, *, queue_id: int
) -> ReviewItem | None:
    """The claimed item of the queue ``queue_id``, or None when nothing there
    is claimable (or all of it is locked)."""
    params = {
        "reviewer": reviewer_id,
        "now": now,
        "lease": lease_seconds,
        "exclude": sorted(exclude),
        "queue": queue_id,
    }
    rows = prepared.fetch(_SQL, params)
    if not rows:
        return None
    return ReviewItem.from_db(connection.alias, [field.attname for field in _FIELDS], list(rows[0]))
