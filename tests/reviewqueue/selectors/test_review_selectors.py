"""The side panel's reads (reviewqueue/selectors/review.py): the reviewer's
recent answers and the last hour's count, the queues they review, and the
SQL twin of ``Queue.objects.reviewable_by`` that the prepared statements use.
Each is checked against what the ORM says, and on PostgreSQL the recent
answers' plan is checked to read a bounded number of rows however long the
reviewer's history is."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.utils import timezone

from reviewqueue import services
from reviewqueue.models import Judgement, Queue, ReviewItem, Verdict
from reviewqueue.selectors import review as review_reads
from reviewqueue.services.leases import queue_heads

pytestmark = pytest.mark.django_db


def answered_item(n: int, at: Any) -> ReviewItem:
    return ReviewItem.objects.create(
        idempotency_key=f"answered-{n}",
        task_description="Write is_even",
        final_output="def is_even(n): ...",
        status=ReviewItem.Status.APPROVED,
        claimed_at=at - timedelta(seconds=5),
        decided_at=at,
    )


def test_recent_answers_list_verdicts_and_other_answers_alike_newest_first(reviewer: User) -> None:
    other = User.objects.create(username="vera")
    now = timezone.now()
    mine = answered_item(1, now - timedelta(minutes=3))
    Verdict.objects.create(item=mine, reviewer=reviewer, decision="approve", created_at=now - timedelta(minutes=3))
    # their answer on an item they also settled: listed once, as the verdict
    Judgement.objects.create(
        item=mine, reviewer=reviewer, kind="review", decision="approve", created_at=mine.decided_at
    )
    theirs = answered_item(2, now - timedelta(minutes=1))
    Verdict.objects.create(item=theirs, reviewer=other, decision="approve", created_at=now - timedelta(minutes=1))
    Judgement.objects.create(
        item=theirs, reviewer=reviewer, kind="review", decision="reject", reason_label="unclear", created_at=now
    )
    old = answered_item(3, now - timedelta(hours=2))
    Verdict.objects.create(item=old, reviewer=reviewer, decision="approve", created_at=now - timedelta(hours=2))

    recent, last_hour = review_reads.recent_answers(reviewer, now - timedelta(hours=1))

    assert [(v.item_id, v.decision) for v in recent] == [
        (theirs.pk, "reject"),
        (mine.pk, "approve"),
        (old.pk, "approve"),
    ]
    assert last_hour == 2
    assert recent[0].claimed_at == theirs.claimed_at and recent[0].queue_id == theirs.queue_id
    assert all(timezone.is_aware(v.created_at) for v in recent)


def test_recent_answers_stop_at_the_pace_sample_but_the_hour_counts_them_all(reviewer: User) -> None:
    now = timezone.now()
    for n in range(review_reads.PACE_SAMPLE + 15):
        at = now - timedelta(minutes=n + 1)
        Verdict.objects.create(item=answered_item(n, at), reviewer=reviewer, decision="approve", created_at=at)

    recent, last_hour = review_reads.recent_answers(reviewer, now - timedelta(hours=1))

    assert len(recent) == review_reads.PACE_SAMPLE
    assert [v.created_at for v in recent] == sorted((v.created_at for v in recent), reverse=True)
    assert last_hour == review_reads.PACE_SAMPLE + 15


def test_a_reviewer_with_no_answers_has_none(reviewer: User) -> None:
    assert review_reads.recent_answers(reviewer, timezone.now()) == ([], 0)


def test_the_queues_and_heads_agree_with_reviewable_by(reviewer: User, admit_item: Any) -> None:
    Queue.objects.filter(pk=Queue.default().pk).update(open_to_all=False)
    team = Group.objects.create(name="team")
    reviewer.groups.add(team)
    named = services.create_queue(user=None, slug="named", name="Named", settings={})
    named.members.add(reviewer)
    grouped = services.create_queue(user=None, slug="grouped", name="Grouped", settings={})
    grouped.member_groups.add(team)
    services.create_queue(user=None, slug="open", name="Open", settings={})
    Queue.objects.filter(slug="open").update(open_to_all=True)
    services.create_queue(user=None, slug="closed", name="Closed", settings={})
    admit_item(queue="grouped")

    expected = list(Queue.objects.reviewable_by(reviewer).order_by("name", "slug").values_list("slug", flat=True))
    assert expected == ["grouped", "named", "open"]
    assert [q.slug for q in review_reads.reviewable_queues(reviewer)] == expected
    heads, paused, held = queue_heads(reviewer=reviewer, now=timezone.now())
    assert sorted(h.head.slug for h in heads) == sorted(expected) and not paused and held is None
    assert [h.head.slug for h in heads if h.head.waiting] == ["grouped"]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="reads PostgreSQL's own plan")
def test_the_recent_answers_plan_reads_no_more_rows_than_it_shows(reviewer: User) -> None:
    """A history of 400 double-reviewed items, the newest 200 settled by this
    reviewer: no node of the plan reads more than the two
    arms' limits, however many answers precede them."""
    now = timezone.now()
    other = User.objects.create(username="vera")
    for n in range(400):
        at = now - timedelta(hours=2, minutes=n)
        item = answered_item(n, at)
        # A double review on every item, answered by this reviewer; the newest
        # 200 settled by this reviewer too (their answer is then also their
        # verdict, which the list must pass over), the older 200 by another.
        Verdict.objects.create(item=item, reviewer=other if n >= 200 else reviewer, decision="approve", created_at=at)
        Judgement.objects.create(
            item=item, reviewer=reviewer, kind="review", decision="approve", created_at=at - timedelta(seconds=1)
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
        cursor.execute("SET enable_seqscan = off")  # the tables are tiny here; at scale the planner picks the index
        sql = review_reads._RECENT_SQL.replace("%(reviewer)s", str(reviewer.pk)).replace(
            "%(since)s", f"'{(now - timedelta(hours=1)).isoformat()}'::timestamptz"
        )
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
        plan = cursor.fetchone()[0]
        cursor.execute("RESET enable_seqscan")
    plan = json.loads(plan) if isinstance(plan, str) else plan

    def nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
        return [node, *(n for child in node.get("Plans", []) for n in nodes(child))]

    read = max(n["Actual Rows"] * n["Actual Loops"] for n in nodes(plan[0]["Plan"]))
    assert read <= 2 * review_reads.PACE_SAMPLE
