"""How many SQL statements a user's request sends, through the test client as
the browser sends it: the reviewer's decide (with the htmx headers, so the
answer is the next card), the review page, a producer's POST /api/outputs.
Decide and the page are counted for a reviewer who has just started and for
an active one (100 answers in the last hour, as many more before it): the
count must not grow with a reviewer's history.

Each count is an upper bound, so a regression fails. On the deployed
configuration (PostgreSQL + Redis, as CI's first suite runs) the bound for
decide + next card is the goal, 12. Run with ``-s`` to see every statement.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from reviewqueue import services
from reviewqueue.models import Judgement, ReviewItem, Verdict
from reviewqueue.services import routing
from reviewqueue.tokens import issue_token

# Not inside a test transaction: each request commits as it does when served,
# and admit() takes its one-statement path on PostgreSQL as it does in production.
pytestmark = pytest.mark.django_db(transaction=True)

# Upper bounds per configuration, so a regression fails. The deployed
# configuration (PostgreSQL + Redis) meets the goal of 12 for decide + next
# card: there the session and the cached role checks come from Redis. Without
# Redis both come from the database (the session row, the cache table), and
# SQLite claims by the general path (no one-statement UPDATE ... SKIP LOCKED).
# PostgreSQL shows its BEGIN and COMMIT, SQLite does not. On PostgreSQL,
# admit() sends its one prepared statement through psycopg directly, which
# Django does not capture: a pushed output costs one statement more than counted.
# The reviewer's prepared statements (reviewqueue.prepared) are captured.
DECIDE_GOAL = 12
BOUNDS = {
    "postgresql+redis": {"decide": DECIDE_GOAL, "review page": 4, "output": 3},
    "postgresql": {"decide": 14, "review page": 6, "output": 3},
    "sqlite": {"decide": 18, "review page": 6, "output": 9},
}


def bound(request: str) -> int:
    configuration = connection.vendor + ("+redis" if os.environ.get("REDIS_URL") else "")
    return BOUNDS.get(configuration, BOUNDS[connection.vendor])[request]


HTMX = {"HX-Request": "true", "HX-Target": "card", "HX-Current-URL": "http://testserver/review/"}


def counted(label: str, send: Callable[[], Any]) -> tuple[Any, int]:
    """Send one request, print its statements, return the response and their number."""
    with CaptureQueriesContext(connection) as captured:
        response = send()
    print(f"\n{label}: {len(captured)} statements on {connection.vendor}")
    for n, query in enumerate(captured.captured_queries, start=1):
        print(f"  {n:2d}. {query['sql'][:300]}")
    return response, len(captured)


@pytest.fixture
def queue(reviewer: Any, admit_item: Callable[..., Any]) -> None:
    """Decided history (so a query per past verdict would show) and items waiting."""
    for i in range(6):
        admit_item()
        item = services.claim(reviewer=reviewer)
        services.decide(item_id=item.pk, reviewer=reviewer, approve=i % 3 != 0, reason_label="unclear")
    for _ in range(3):
        admit_item()


ACTIVE_LAST_HOUR = 100


@pytest.fixture
def active(queue: None, reviewer: Any) -> None:
    """An active reviewer: 100 answers in the last hour (90 verdicts, 10
    double-review answers on items another reviewer settled) and 100 older
    ones, written in bulk as their services would leave them."""
    now = timezone.now()
    other = User.objects.create(username="vera")
    times = [now - timedelta(seconds=30 * (n + 1)) for n in range(ACTIVE_LAST_HOUR)]
    times += [now - timedelta(hours=2, seconds=30 * n) for n in range(ACTIVE_LAST_HOUR)]
    items = ReviewItem.objects.bulk_create(
        ReviewItem(
            idempotency_key=f"history-{n}",
            task_description="Write is_even",
            final_output="def is_even(n): ...",
            status=ReviewItem.Status.APPROVED,
            claimed_at=at - timedelta(seconds=20),
            decided_at=at,
        )
        for n, at in enumerate(times)
    )
    answered = [n for n in range(len(items)) if n % 10 == 9]
    Verdict.objects.bulk_create(
        Verdict(
            item=item,
            reviewer=other if n in answered else reviewer,
            decision=Verdict.Decision.APPROVE,
            created_at=times[n],
        )
        for n, item in enumerate(items)
    )
    Judgement.objects.bulk_create(
        Judgement(item=items[n], reviewer=reviewer, kind=Judgement.Kind.REVIEW, decision="approve", created_at=times[n])
        for n in answered
    )


@pytest.fixture
def decide_statements(queue: None, reviewer: Any, client: Any) -> Iterator[int]:
    """The statements of one decide as the page sends it, on a card claimed
    the way the Start button claims it; the answer holds the next card."""
    client.force_login(reviewer)
    card = client.post("/review/next/", headers={**HTMX, "HX-Trigger": "next-button"})
    held = services.current_claim(reviewer=reviewer)
    assert card.status_code == 200 and held is not None
    response, count = counted(
        "decide + next card",
        lambda: client.post(
            f"/review/{held.pk}/decide/", {"decision": "approve"}, headers={**HTMX, "HX-Trigger": "decide-form"}
        ),
    )
    following = services.current_claim(reviewer=reviewer)
    assert response.status_code == 200
    assert following is not None and f'data-item="{following.pk}"' in response.content.decode()
    yield count


def test_decide_with_the_next_card_stays_within_its_bound(decide_statements: int) -> None:
    assert decide_statements <= bound("decide")


def test_an_active_reviewer_decides_within_the_same_bound(active: None, decide_statements: int) -> None:
    """100 answers in the last hour reach past the 20 the panel reads for its
    pace: the hour's count must still come from the same statement."""
    assert decide_statements <= bound("decide")


def test_an_active_reviewer_sees_the_last_hour_counted(active: None, reviewer: Any, client: Any) -> None:
    client.force_login(reviewer)
    services.claim(reviewer=reviewer)
    response, count = counted("GET /review/, active reviewer", lambda: client.get("/review/"))
    assert response.status_code == 200
    # the hour's 100 answers and the 6 decided by the queue fixture a moment ago
    assert f"<strong>{ACTIVE_LAST_HOUR + 6}</strong> verdicts in the last hour" in response.content.decode()
    assert count <= bound("review page")


def test_the_review_page_sends_no_more_statements_than_today(queue: None, reviewer: Any, client: Any) -> None:
    client.force_login(reviewer)
    services.claim(reviewer=reviewer)
    response, count = counted("GET /review/", lambda: client.get("/review/"))
    assert response.status_code == 200
    assert count <= bound("review page")


def test_a_pushed_output_sends_no_more_statements_than_today(queue: None, client: Any) -> None:
    _, plain = issue_token(name="producer-a", scopes=["outputs"])
    payload = {"idempotency_key": "k-1", "task_description": "Write is_even", "final_output": "def is_even(n): ..."}
    # A producer pushes outputs in a steady flow: the queues and routing rules
    # are read once per ROUTING_CACHE_SECONDS, not per output.
    routing.resolve(None, producer="producer-a", task_kind="", priority=1, task_id="")
    response, count = counted(
        "POST /api/outputs",
        lambda: client.post(
            "/api/outputs", payload, content_type="application/json", headers={"Authorization": f"Bearer {plain}"}
        ),
    )
    assert response.status_code == 201, response.content
    assert count <= bound("output")
