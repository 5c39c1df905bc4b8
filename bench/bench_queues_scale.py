"""Many queues: 100 queues x 10,000 pending against one queue x 10,000 pending.

    .venv/bin/python bench/bench_queues_scale.py [--queues 100] [--pending 10000] [--repeat 30]

Two scratch PostgreSQL databases are seeded alike, with set-based SQL
(``INSERT ... SELECT`` over ``generate_series`` and the queues, not the ORM),
then analysed and their kept depths reconciled (``services.reconcile_depth``):

- one: the queue ``q000`` with ``--pending`` waiting items;
- many: ``--queues`` queues ``q000`` ... each with ``--pending`` waiting items.

Every queue is made with ``services.create_queue`` (double review and gold
off, so a verdict is plain; capacities spread a little so the queues differ
in how full they are) and also holds ``--decided`` decided items with their
verdicts (by one reviewer) and ``--sample-hours`` of 10-second depth
samples, as the depth sampler writes them for every queue. Another reviewer,
the one timed, is a member of every queue through a group, with no history
of her own, so her panel reads the same on both sizes; one operator. The default queue exists on both and is empty.

The same process then times, on both databases, interleaved round by round:

- claim: ``services.claim(reviewer=...)`` of the next item across the
  reviewer's queues;
- review page: ``GET /review/`` while holding that item, through Django's
  test Client, the one request the browser sends to show the page (its
  polls run only on an empty queue);
- decide: ``services.decide`` of that item (approve), so the next round
  claims a fresh item and the state stays comparable; timed, no goal;
- dashboard: ``GET /ops/?queue=q000``, the operator dashboard scoped to one
  queue, as an operator opens it from the overview.

Prints the median of each on both sizes, the ratio many / one (goal <= 1.5
for claim, review page and dashboard) and the statements each sends, and
writes the figures as JSON (``BENCH_RESULTS_DIR``, default ``bench/results/``).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import bench_scale
from bench_scale import use_database
from benchlib import scratch_database, setup_django, write_results

FOCUS = "q000"  # the queue the dashboard is scoped to, on both sizes
ORDER = ("claim", "review_page", "decide", "dashboard")
GOALS = {"claim": 1.5, "review_page": 1.5, "dashboard": 1.5}
SLOWEST = 3  # statements listed per action

# Waiting items: --pending per bench queue, arrived over the last hour.
SEED_PENDING = """
INSERT INTO reviewqueue_reviewitem (
    task_id, task_kind, task_description, final_output, output_truncated, last_error, attempt_count,
    cutoff_reason, label, draft, priority, status, lease_expiries, source_run_id, producer,
    idempotency_key, filter_reason, reviewed_attempt, failing_checks, created_at, updated_at, queue_id
)
SELECT 'task-' || q.slug || '-' || g, 'code', 'Write is_even (' || q.slug || ', pending ' || g || ')',
       'def is_even(n):\n    return n %% 2 == 0\n', false, 'AssertionError:check_2', 5,
       'step_limit', 'unverified', false, mod(g, 3), 'pending', 0, 'run-' || q.slug || '-' || g, 'seed',
       'pend-' || q.slug || '-' || g, '', 0, '', t, t, q.id
FROM reviewqueue_queue AS q
CROSS JOIN LATERAL (SELECT g, now() - interval '1 hour' * (g::float / %(n)s) - interval '1 second' * q.id AS t
                    FROM generate_series(1, %(n)s) AS g) AS s
WHERE q.slug LIKE 'q%%'
"""
# History: --decided per bench queue over the last 30 days, one in four rejected.
SEED_DECIDED = """
INSERT INTO reviewqueue_reviewitem (
    task_id, task_kind, task_description, final_output, output_truncated, last_error, attempt_count,
    cutoff_reason, label, draft, priority, status, lease_expiries, source_run_id, producer,
    idempotency_key, filter_reason, reviewed_attempt, failing_checks, created_at, updated_at, claimed_at,
    decided_at, queue_id
)
SELECT 'task-h' || q.slug || '-' || g, 'code', 'Write is_even (' || q.slug || ', decided ' || g || ')',
       'def is_even(n):\n    return n %% 2 == 0\n', false, 'AssertionError:check_2', 5,
       'step_limit', 'unverified', false, mod(g, 3),
       CASE WHEN mod(g, 4) = 0 THEN 'rejected' ELSE 'approved' END, 0, 'run-h' || q.slug || '-' || g, 'seed',
       'hist-' || q.slug || '-' || g, '', 0, '', t - interval '2 minutes', t, t - interval '1 minute', t, q.id
FROM reviewqueue_queue AS q
CROSS JOIN LATERAL (SELECT g, now() - interval '30 days' * (g::float / %(n)s) - interval '2 hours' AS t
                    FROM generate_series(1, %(n)s) AS g) AS s
WHERE q.slug LIKE 'q%%'
"""
SEED_VERDICTS = """
INSERT INTO reviewqueue_verdict (item_id, reviewer_id, decision, reason_label, note, counts_for_tuner, created_at, queue_id)
SELECT id, %(reviewer)s, CASE WHEN status = 'approved' THEN 'approve' ELSE 'reject' END,
       CASE WHEN status = 'approved' THEN '' ELSE 'code_error' END, '', true, decided_at, queue_id
FROM reviewqueue_reviewitem WHERE status IN ('approved', 'rejected')
"""
SEED_SAMPLES = """
INSERT INTO reviewqueue_depthsample (created_at, depth, pending, claimed, mode, capacity, step_limit, queue_id)
SELECT now() - interval '10 seconds' * g, %(pending)s, %(pending)s, 0, 'normal', q.capacity, 5, q.id
FROM reviewqueue_queue AS q CROSS JOIN generate_series(1, %(samples)s) AS g
WHERE q.slug LIKE 'q%%'
"""


def seed(queues: int, pending: int, decided: int, sample_hours: int) -> float:
    """Migrate, make the queues and their people, seed rows set-based, analyse; returns seconds."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.core.management import call_command
    from django.db import connection

    from reviewqueue import services
    from reviewqueue.access import ensure_groups
    from reviewqueue.models import Queue

    started = time.perf_counter()
    call_command("migrate", verbosity=0, interactive=False)
    groups = ensure_groups()
    members = Group.objects.create(name="bench-reviewers")
    users = get_user_model().objects
    rita = users.create(username="rita")
    rita.groups.add(groups["reviewer"], members)
    # The history's verdicts are another reviewer's: rita's own answers, which
    # the review page's panel reads, are those of this run, alike on both sizes.
    vera = users.create(username="vera")
    vera.groups.add(groups["reviewer"], members)
    users.create(username="otto").groups.add(groups["operator"])
    off = {"double_review_rate": 0.0, "gold_rate": 0.0}
    made = [
        services.create_queue(
            user=None, slug=f"q{i:03d}", settings={"capacity": 2 * pending + 10 * i, **off}
        )  # half full or a little less: normal mode, nothing shed
        for i in range(queues)
    ]
    Queue.member_groups.through.objects.bulk_create(
        Queue.member_groups.through(queue_id=queue.pk, group_id=members.pk) for queue in made
    )
    Queue.objects.filter(slug="default").update(**off)
    with connection.cursor() as cursor:
        cursor.execute(SEED_DECIDED, {"n": decided})
        cursor.execute(SEED_VERDICTS, {"reviewer": vera.pk})
        cursor.execute(SEED_PENDING, {"n": pending})
        cursor.execute(SEED_SAMPLES, {"pending": pending, "samples": sample_hours * 360})
        # Fresh statistics and a set visibility map, as autovacuum would leave a live database.
        cursor.execute("VACUUM ANALYZE")
    services.reconcile_depth()  # rows loaded behind the services' back: the kept depths learn them
    return time.perf_counter() - started


class Actions(bench_scale.Actions):
    """bench_scale's timed actions; the dashboard is scoped to one queue."""

    def dashboard(self) -> None:
        """GET /ops/?queue=q000: the dashboard scoped to one queue."""
        response = self.ops_client.get("/ops/", {"queue": FOCUS})
        assert response.status_code == 200, response.status_code


def measure(
    names: dict[str, str], repeat: int
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, int]], dict[str, list[tuple[float, str]]]]:
    """Median seconds per action per size, the sizes interleaved round by
    round; then the statements each action sends, per size, and the slowest
    of them with many queues (one call each: a pointer, not a measurement)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    medians = bench_scale.measure(names, repeat, Actions)
    actions: dict[str, Actions] = {}
    for size, db in names.items():
        use_database(db)
        actions[size] = Actions()
    statements: dict[str, dict[str, int]] = {size: {} for size in names}
    slowest: dict[str, list[tuple[float, str]]] = {}
    for size, db in names.items():
        use_database(db)
        for action in ORDER:
            with CaptureQueriesContext(connection) as ctx:
                getattr(actions[size], action)()
            statements[size][action] = len(ctx.captured_queries)
            if size == "many":
                timed_sql = sorted(((float(q["time"]), q["sql"]) for q in ctx.captured_queries), reverse=True)
                slowest[action] = timed_sql[:SLOWEST]
    return medians, statements, slowest


def run(queues: int, pending: int, decided: int, sample_hours: int, repeat: int) -> dict[str, Any]:
    """Seed both sizes, time them side by side; returns the figures."""
    names = {"one": "rq_bench_queues_one", "many": "rq_bench_queues_many"}
    with scratch_database(names["one"]) as one_url, scratch_database(names["many"]):
        setup_django(one_url)
        from django.db import connections

        try:
            one_secs = seed(1, pending, decided, sample_hours)
            use_database(names["many"])
            many_secs = seed(queues, pending, decided, sample_hours)
            print(
                f"seeded 1 queue x {pending:,} pending in {one_secs:.1f} s, "
                f"{queues} queues x {pending:,} pending in {many_secs:.1f} s "
                f"(each queue also {decided:,} decided, {sample_hours} h of depth samples)"
            )
            medians, statements, slowest = measure(names, repeat)
        finally:
            connections.close_all()
    figures = report(queues, pending, decided, repeat, medians, statements)
    print(f"  slowest statements with {queues} queues (one call each)")
    for action, found in slowest.items():
        for seconds, sql in found:
            print(f"    {action:12s} {seconds * 1000:8.2f} ms  {' '.join(sql.split())[:150]}")
    figures["slowest_statements_many"] = {
        action: [{"ms": seconds * 1000, "sql": sql} for seconds, sql in found] for action, found in slowest.items()
    }
    return figures


def report(
    queues: int,
    pending: int,
    decided: int,
    repeat: int,
    medians: dict[str, dict[str, float]],
    statements: dict[str, dict[str, int]],
) -> dict[str, Any]:
    """Print the table and return the figures."""
    print(f"{queues} queues x {pending:,} pending vs 1 queue x {pending:,} (median of {repeat}, interleaved)")
    ratios: dict[str, float] = {}
    for action in ORDER:
        one, many = medians["one"][action], medians["many"][action]
        ratios[action] = many / one
        goal = GOALS.get(action)
        flag = "(no goal)" if goal is None else "ok" if ratios[action] <= goal else f"OVER {goal}"
        print(
            f"  {action:12s} one {one * 1000:7.2f} ms   many {many * 1000:7.2f} ms   ratio {ratios[action]:5.2f}  "
            f"{flag:9s} ({statements['one'][action]} / {statements['many'][action]} statements)"
        )
    met = all(ratios[action] <= goal for action, goal in GOALS.items())
    print(f"  goal: claim, review page and dashboard within 1.5x of one queue: {'met' if met else 'NOT MET'}")
    return {
        "queues": queues,
        "pending_per_queue": pending,
        "decided_per_queue": decided,
        "repeat": repeat,
        "median_ms": {size: {a: s * 1000 for a, s in per.items()} for size, per in medians.items()},
        "ratios": ratios,
        "goals": GOALS,
        "goal_met": met,
        "statements": statements,
    }


def main() -> None:
    """Parse the sizes, run once, print and write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=100)
    parser.add_argument("--pending", type=int, default=10_000, help="waiting items per queue")
    parser.add_argument("--decided", type=int, default=1_000, help="decided items (with verdicts) per queue")
    parser.add_argument("--sample-hours", type=int, default=24, help="hours of depth samples per queue")
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    figures = run(args.queues, args.pending, args.decided, args.sample_hours, args.repeat)
    print(f"  written to {write_results('queues_scale', figures)}")


if __name__ == "__main__":
    main()
