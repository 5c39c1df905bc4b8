"""Latency at scale: 1,000,000 decided items + 10,000 pending against 1,000 items.

    .venv/bin/python bench/bench_scale.py [--decided 1000000] [--pending 10000] [--repeat 40]

Two scratch PostgreSQL databases are seeded with set-based SQL
(``INSERT ... SELECT generate_series``, not the ORM) and analysed. The same
process then times, on both, interleaved round by round: the review page GET
and the dashboard GET through Django's test Client, and claim() and decide()
called directly. Prints the median of each and the ratio large / small
(target <= 1.5), then writes ``EXPLAIN (ANALYZE, BUFFERS)`` of every query
those four actions send, on the large database, to ``bench/plans/*.txt``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchlib import ROOT, scratch_database, setup_django

PLANS = Path(os.environ.get("BENCH_PLANS_DIR", ROOT / "bench" / "plans"))  # the smoke test writes elsewhere
CAPACITY = 20_000

# History: decided items spread over the last 30 days, one verdict each, one
# in twenty a sampled auto-pass, one in four rejected. Pending items arrived
# over the last hour. Set-based so a million rows take seconds, not hours.
SEED_ITEMS = """
INSERT INTO reviewqueue_reviewitem (
    task_id, task_kind, task_description, final_output, output_truncated, last_error, attempt_count,
    cutoff_reason, label, draft, priority, status, lease_expiries, source_run_id, producer,
    idempotency_key, filter_reason, reviewed_attempt, failing_checks, created_at, updated_at, claimed_at, decided_at,
    queue_id
)
SELECT 'task-' || g, 'code', 'Write is_even (task ' || g || ')',
       'def is_even(n):\n    return n %% 2 == 0\n', false, 'AssertionError:check_2', 5,
       'step_limit', CASE WHEN mod(g, 20) = 0 THEN 'sampled' ELSE 'unverified' END, false, mod(g, 3),
       CASE WHEN mod(g, 4) = 0 THEN 'rejected' ELSE 'approved' END, 0, 'run-' || g, 'seed',
       'hist-' || g, '', 0, '', t - interval '2 minutes', t, t - interval '1 minute', t, %(queue)s
FROM (SELECT g, now() - interval '30 days' * (g::float / %(n)s) - interval '20 minutes' AS t
      FROM generate_series(1, %(n)s) AS g) AS s
"""
SEED_VERDICTS = """
INSERT INTO reviewqueue_verdict (item_id, reviewer_id, decision, reason_label, note, counts_for_tuner, created_at, queue_id)
SELECT id, %(reviewer)s, CASE WHEN status = 'approved' THEN 'approve' ELSE 'reject' END,
       CASE WHEN status = 'approved' THEN '' ELSE 'code_error' END, '', label <> 'sampled', decided_at, queue_id
FROM reviewqueue_reviewitem WHERE status IN ('approved', 'rejected')
"""
SEED_PENDING = """
INSERT INTO reviewqueue_reviewitem (
    task_id, task_kind, task_description, final_output, output_truncated, last_error, attempt_count,
    cutoff_reason, label, draft, priority, status, lease_expiries, source_run_id, producer,
    idempotency_key, filter_reason, reviewed_attempt, failing_checks, created_at, updated_at, queue_id
)
SELECT 'task-p' || g, 'code', 'Write is_even (pending ' || g || ')',
       'def is_even(n):\n    return n %% 2 == 0\n', false, 'AssertionError:check_2', 5,
       'step_limit', 'unverified', false, mod(g, 3), 'pending', 0, 'run-p' || g, 'seed',
       'pend-' || g, '', 0, '', now() - interval '1 hour' * (g::float / %(n)s), now() - interval '1 hour' * (g::float / %(n)s),
       %(queue)s
FROM generate_series(1, %(n)s) AS g
"""
# One day of 10-second depth samples, the same on both sizes: the dashboard reads an hour of them.
SEED_SAMPLES = """
INSERT INTO reviewqueue_depthsample (created_at, depth, pending, claimed, mode, capacity, step_limit, queue_id)
SELECT now() - interval '10 seconds' * g, 100, 100, 0, 'normal', %(capacity)s, 5, %(queue)s FROM generate_series(1, 8640) AS g
"""


def seed(url: str, decided: int, pending: int) -> float:
    """Migrate, create a reviewer and an operator, seed rows set-based, analyse; returns seconds."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from reviewqueue.access import ensure_groups
    from reviewqueue.models import Queue

    started = time.perf_counter()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    groups = ensure_groups()
    users = get_user_model().objects
    rita = users.create(username="rita")
    rita.groups.add(groups["reviewer"])
    otto = users.create(username="otto")
    otto.groups.add(groups["operator"])
    queue = Queue.default()
    Queue.objects.filter(pk=queue.pk).update(capacity=CAPACITY)
    with connection.cursor() as cursor:
        cursor.execute(SEED_ITEMS, {"n": decided, "queue": queue.pk})
        cursor.execute(SEED_VERDICTS, {"reviewer": rita.pk})
        cursor.execute(SEED_PENDING, {"n": pending, "queue": queue.pk})
        cursor.execute(SEED_SAMPLES, {"capacity": CAPACITY, "queue": queue.pk})
        # Fresh statistics and a set visibility map, as autovacuum would leave a live database.
        cursor.execute("VACUUM ANALYZE")
    from reviewqueue.services import reconcile_depth

    reconcile_depth()  # rows loaded behind the services' back: the kept depth learns them
    return time.perf_counter() - started


def use_database(name: str) -> None:
    """Point Django's default connection at another database of the same server."""
    from django.db import connection

    connection.close()
    connection.settings_dict["NAME"] = name


class Actions:
    """The four timed actions, on whichever database is current."""

    def __init__(self) -> None:
        from django.contrib.auth import get_user_model
        from django.test import Client

        users = get_user_model().objects
        self.reviewer = users.get(username="rita")
        self.review_client = Client()
        self.review_client.force_login(self.reviewer)
        self.ops_client = Client()
        self.ops_client.force_login(users.get(username="otto"))
        self.held: int | None = None

    def review_page(self) -> None:
        """GET /review/ while holding an item: the card and the context panel."""
        response = self.review_client.get("/review/")
        assert response.status_code == 200, response.status_code

    def dashboard(self) -> None:
        """GET /ops/: the whole operator dashboard."""
        response = self.ops_client.get("/ops/")
        assert response.status_code == 200, response.status_code

    def claim(self) -> None:
        """claim() of a fresh item (the previous one was decided)."""
        from reviewqueue import services

        item = services.claim(reviewer=self.reviewer)
        assert item is not None
        self.held = item.pk

    def decide(self) -> None:
        """decide() of the item claim() handed out."""
        from reviewqueue import services

        assert self.held is not None
        services.decide(item_id=self.held, reviewer=self.reviewer, approve=True)
        self.held = None


ORDER = ("claim", "review_page", "decide", "dashboard")


def timed(fn: Callable[[], None]) -> float:
    """Seconds for one call."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(
    names: dict[str, str], repeat: int, make_actions: Callable[[], Actions] = Actions
) -> dict[str, dict[str, float]]:
    """Median seconds per action per size, the sizes interleaved round by round."""
    actions: dict[str, Actions] = {}
    for size, db in names.items():
        use_database(db)
        actions[size] = make_actions()
    samples: dict[str, dict[str, list[float]]] = {size: {a: [] for a in ORDER} for size in names}
    for r in range(repeat + 3):
        for size in names if r % 2 == 0 else reversed(list(names)):
            use_database(names[size])
            for action in ORDER:
                seconds = timed(getattr(actions[size], action))
                if r >= 3:  # the first rounds warm caches, templates and connections
                    samples[size][action].append(seconds)
    return {size: {a: statistics.median(v) for a, v in per.items()} for size, per in samples.items()}


def capture(fn: Callable[[], None]) -> list[str]:
    """The SQL one action sends, in order, transaction control left out."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        fn()
    skip = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")
    return [q["sql"] for q in ctx.captured_queries if not q["sql"].startswith(skip)]


def explain(sql: str, params: tuple[Any, ...] = ()) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) inside a rolled-back transaction, so writes leave no trace."""
    from django.db import DatabaseError, connection, transaction

    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params or None)
                plan = "\n".join(row[0] for row in cursor.fetchall())
            transaction.set_rollback(True)
    except DatabaseError as exc:  # a plan that cannot be taken is reported, not fatal
        return f"(no plan: {exc})"
    return plan


def write_plans(decided: int, pending: int) -> dict[str, int]:
    """Plans of every query of the four actions plus admit's shedding candidate, on the large DB."""
    from reviewqueue.models import ReviewItem

    PLANS.mkdir(exist_ok=True)
    actions = Actions()
    captured = {name: capture(getattr(actions, name)) for name in ORDER}
    # admit() asks for the shedding candidate only at capacity: take its query from the ORM directly.
    shed = ReviewItem.objects.filter(status=ReviewItem.Status.PENDING).order_by("priority", "created_at", "pk")
    shed_sql, shed_params = shed.only("pk", "priority", "created_at")[:1].query.sql_with_params()
    queries: dict[str, list[tuple[str, tuple[Any, ...]]]] = {n: [(q, ()) for q in qs] for n, qs in captured.items()}
    queries["admit_shed_candidate"] = [(shed_sql, tuple(shed_params))]
    counts: dict[str, int] = {}
    for name, sqls in queries.items():
        seen: list[str] = []
        parts = [f"-- {name}: {decided:,} decided items in history, {pending:,} pending; PostgreSQL\n"]
        for sql, params in sqls:
            if sql in seen:
                continue
            seen.append(sql)
            shown = sql % tuple(f"'{p}'" for p in params) if params else sql
            parts.append(f"\n-- query {len(seen)}\n{shown}\n\n{explain(sql, params)}\n")
        (PLANS / f"{name}.txt").write_text("".join(parts))
        counts[name] = len(sqls)
    return counts


def run(decided: int, pending: int, small: int, repeat: int) -> dict[str, Any]:
    """Seed both sizes, time them side by side, write the plans; returns the figures."""
    small_pending = max(1, small // 5)
    with scratch_database("rq_bench_small") as small_url, scratch_database("rq_bench_large") as large_url:
        setup_django(small_url)
        from django.db import connections

        try:
            small_secs = seed(small_url, small - small_pending, small_pending)
            use_database("rq_bench_large")
            large_secs = seed(large_url, decided, pending)
            print(f"seeded {small:,} items in {small_secs:.1f} s, {decided + pending:,} items in {large_secs:.1f} s")
            medians = measure({"small": "rq_bench_small", "large": "rq_bench_large"}, repeat)
            use_database("rq_bench_large")
            counts = write_plans(decided, pending)
        finally:
            connections.close_all()
    print(f"latency at {decided:,} decided + {pending:,} pending vs {small:,} items (median of {repeat}, interleaved)")
    ratios = {}
    for action in ORDER:
        s, big = medians["small"][action], medians["large"][action]
        ratios[action] = big / s
        flag = "ok" if ratios[action] <= 1.5 else "OVER 1.5"
        print(
            f"  {action:12s} small {s * 1000:7.2f} ms   large {big * 1000:7.2f} ms   "
            f"ratio {ratios[action]:5.2f}  {flag}   ({counts[action]} queries)"
        )
    print(f"  plans written to {PLANS}/")
    return {"medians": medians, "ratios": ratios}


def main() -> None:
    """Parse the sizes and run once."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decided", type=int, default=1_000_000)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--small", type=int, default=1_000, help="items in the small database")
    parser.add_argument("--repeat", type=int, default=40)
    args = parser.parse_args()
    run(args.decided, args.pending, args.small, args.repeat)


if __name__ == "__main__":
    main()
