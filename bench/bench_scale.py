"""Latency at scale: the timed reviewer's own history of 1,000, 100,000 and 1,000,000 answers.

    .venv/bin/python bench/bench_scale.py [--decided 1000000] [--middle 100000] [--pending 10000]
                                          [--repeat 40] [--db-prefix rq_bench]

Three scratch PostgreSQL databases are seeded with set-based SQL
(``INSERT ... SELECT generate_series``, not the ORM) and analysed: 1,000
items, ``--middle`` decided items and ``--decided`` decided items, every
decided item carrying a verdict by the reviewer whose actions are timed
(their own history, the one the review page's side panel reads), one in ten
also their double-review answer, plus pending items. The same process then times, on all three, interleaved round
by round: the review page GET, the htmx decide -> next card POST (one
request, as the browser sends it) and the dashboard GET through Django's
test Client, and claim() and decide() called directly. Prints the median of
each and the ratio of each size to the small one (target <= 1.5), then
writes ``EXPLAIN (ANALYZE, BUFFERS)`` of every query those actions send, on
the largest database, to ``bench/plans/*.txt``.
"""

from __future__ import annotations

import argparse
import contextlib
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
# One decided item in ten was double-reviewed: the reviewer's answer, a
# minute before the verdict that settled it (theirs too), as quality writes it.
SEED_JUDGEMENTS = """
INSERT INTO reviewqueue_judgement (item_id, reviewer_id, kind, round, decision, reason_label, note, edited_output, created_at)
SELECT item_id, reviewer_id, 'review', 1, decision, reason_label, '', '', created_at - interval '1 minute'
FROM reviewqueue_verdict WHERE mod(item_id, 10) = 0
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
        cursor.execute(SEED_JUDGEMENTS)
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

    def before_decide_next(self) -> None:
        """Untimed: hold an item, as the card the browser shows does."""
        self.claim()

    def decide_next(self) -> None:
        """POST /review/<id>/decide/ with the htmx headers: the verdict and the next card, one request."""
        assert self.held is not None
        response = self.review_client.post(f"/review/{self.held}/decide/", {"decision": "approve"}, headers=HTMX)
        assert response.status_code == 200, response.status_code
        self.held = None
        from reviewqueue import services

        following = services.current_claim(reviewer=self.reviewer)
        if following is not None:  # the next card's item goes back: claim() takes it again
            services.release(item_id=following.pk, reviewer=self.reviewer)


HTMX = {
    "HX-Request": "true",
    "HX-Target": "card",
    "HX-Trigger": "decide-form",
    "HX-Current-URL": "http://testserver/review/",
}
ORDER = ("claim", "review_page", "decide", "decide_next", "dashboard")


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
                prepare = getattr(actions[size], f"before_{action}", None)
                if prepare is not None:
                    prepare()
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
    captured = {}
    for name in ORDER:
        prepare = getattr(actions, f"before_{name}", None)
        if prepare is not None:
            prepare()
        captured[name] = capture(getattr(actions, name))
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


def run(
    decided: int, pending: int, small: int, repeat: int, middle: int = 0, prefix: str = "rq_bench"
) -> dict[str, Any]:
    """Seed every size, time them side by side, write the plans; returns the figures."""
    small_pending = max(1, small // 5)
    sizes = {"small": (small - small_pending, small_pending)}
    if middle:
        sizes["middle"] = (middle, pending)
    sizes["large"] = (decided, pending)
    names = {size: f"{prefix}_{size}" for size in sizes}
    with contextlib.ExitStack() as stack:
        urls = {size: stack.enter_context(scratch_database(names[size])) for size in sizes}
        setup_django(urls["small"])
        from django.db import connections

        try:
            for size, (n_decided, n_pending) in sizes.items():
                use_database(names[size])
                secs = seed(urls[size], n_decided, n_pending)
                print(
                    f"seeded {size}: {n_decided:,} decided (the timed reviewer's own) + {n_pending:,} pending"
                    f" in {secs:.1f} s"
                )
            medians = measure(names, repeat)
            use_database(names["large"])
            counts = write_plans(decided, pending)
        finally:
            connections.close_all()
    print(f"latency by the timed reviewer's own history (median of {repeat}, interleaved); load {load_average()}")
    ratios: dict[str, dict[str, float]] = {}
    for action in ORDER:
        base = medians["small"][action]
        line = f"  {action:12s} {sizes['small'][0]:>9,}: {base * 1000:7.2f} ms"
        for size in list(sizes)[1:]:
            value = medians[size][action]
            ratios.setdefault(size, {})[action] = value / base
            line += f"   {sizes[size][0]:>9,}: {value * 1000:7.2f} ms ({value / base:4.2f}x)"
        flag = "ok" if ratios["large"][action] <= 1.5 else "OVER 1.5"
        print(f"{line}  {flag}  ({counts[action]} queries)")
    print(f"  plans written to {PLANS}/")
    return {"medians": medians, "ratios": ratios["large"], "all_ratios": ratios}


def load_average() -> str:
    """The machine's 1, 5 and 15 minute load averages: figures on a shared machine say what they ran beside."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def main() -> None:
    """Parse the sizes and run once."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decided", type=int, default=1_000_000)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--middle", type=int, default=100_000, help="decided items in the middle database (0: none)")
    parser.add_argument("--small", type=int, default=1_000, help="items in the small database")
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--db-prefix", default="rq_bench", help="scratch databases are <prefix>_small, _middle, _large")
    args = parser.parse_args()
    run(args.decided, args.pending, args.small, args.repeat, args.middle, args.db_prefix)


if __name__ == "__main__":
    main()
