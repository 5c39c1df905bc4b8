"""Claim in one statement on PostgreSQL.

``UPDATE ... WHERE id = (SELECT id ... FOR UPDATE SKIP LOCKED LIMIT 1)
RETURNING ...``: the subquery locks the next claimable item (pending, or
claimed under a lease that ran out) and skips rows another transaction holds,
so two reviewers never get the same item. It claims in one queue, which
``leases.claim`` chose by the serving rule; the lease length comes from the
caller or, in the same statement, from that queue's row (which is read, not
locked). An item whose lease ran out has its expiry counted on it. Gold
copies, items this reviewer already answered in a double review, items only
an operator may settle, and every item for a paused reviewer are passed over.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from django.db import connection

from ..models import OPERATOR_ROUND, Judgement, Queue, ReviewerStanding, ReviewItem

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
        f" {col('lease_expires_at')} = %(now)s + make_interval(secs => COALESCE(%(lease)s, {lease}, 300)),"
        f" {col('claimed_at')} = %(now)s, {col('updated_at')} = %(now)s,"
        f" {col('lease_expiries')} = {col('lease_expiries')}"
        f" + CASE WHEN {col('status')} = 'claimed' THEN 1 ELSE 0 END"
        f" WHERE {item.pk.column} = (SELECT {item.pk.column} FROM {item.db_table}"
        # the queue first: with the order below it is the partial index queue_next_item
        f" WHERE {col('queue')} = %(queue)s AND {col('status')} IN ('pending', 'claimed')"
        f" AND {claimable} AND NOT ({item.pk.column} = ANY(%(exclude)s::bigint[]))"
        f" AND {col('gold')} IS NULL AND {col('review_round')} < {OPERATOR_ROUND}"
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
    with connection.cursor() as cursor:
        cursor.execute(_SQL, params)
        row = cursor.fetchone()
    if row is None:
        return None
    return ReviewItem.from_db(connection.alias, [field.attname for field in _FIELDS], list(row))
