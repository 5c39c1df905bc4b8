"""admit() against raw single-row INSERTs of the same rows, on PostgreSQL.

    .venv/bin/python bench/bench_admit.py [--n 2000] [--rounds 10]

A scratch database is created, migrated and dropped. Both sides go through the
same psycopg connection that Django holds, each call in its own transaction
(admit() opens one; the raw INSERT runs in autocommit), interleaved in rounds
with the order alternating, so drift on a shared machine hits both alike.
Prints outputs per second for each and the ratio admit / raw (target >= 0.5),
plus a floor: the policy row lock and an ORM insert in one transaction, the
least any admission serialised by the policy lock can cost.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable
from typing import Any

from benchlib import scratch_database, setup_django

OUTPUT = "def is_even(n):\n    return n % 2 == 0\n" * 8
DESCRIPTION = "Write is_even(n) that returns True for even integers."

RAW_INSERT = """
INSERT INTO reviewqueue_reviewitem (
    task_id, task_kind, task_description, final_output, output_truncated, last_error,
    attempt_count, cutoff_reason, label, draft, priority, status, lease_expiries,
    source_run_id, producer, idempotency_key, filter_reason, created_at, updated_at
) VALUES (%s, %s, %s, %s, false, %s, %s, %s, 'unverified', false, %s, 'pending', 0, %s, %s, %s, '', %s, %s)
"""


def row(key: str, n: int) -> dict[str, Any]:
    """One produced output; both sides store exactly these fields."""
    return {
        "idempotency_key": key,
        "task_id": f"task-{n}",
        "task_kind": "code",
        "task_description": DESCRIPTION,
        "final_output": OUTPUT,
        "last_error": "AssertionError:check_2",
        "attempt_count": 5,
        "cutoff_reason": "step_limit",
        "priority": n % 3,
        "source_run_id": f"run-{n}",
        "producer": "bench",
    }


def main() -> None:
    """Create the scratch database, run the rounds, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="outputs per side")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--database", default="rq_bench_admit")
    args = parser.parse_args()

    with scratch_database(args.database) as url:
        setup_django(url)
        try:
            run(args.n, args.rounds)
        finally:
            from django.db import connections

            connections.close_all()


def run(n: int, rounds: int) -> dict[str, float]:
    """Time ``n`` admits and ``n`` raw inserts in ``rounds`` alternating batches."""
    from django.db import connection, transaction
    from django.utils import timezone

    from reviewqueue import services
    from reviewqueue.models import QueuePolicy, ReviewItem

    # Capacity above everything this bench adds: the normal admission path
    # (policy lock, duplicate check, gates, depth, shedding candidate, insert).
    QueuePolicy.objects.update_or_create(pk=1, defaults={"capacity": 4 * n + 100})
    counter = itertools.count()
    per_round = max(1, n // rounds)

    def admit_batch() -> None:
        for _ in range(per_round):
            i = next(counter)
            services.admit(**row(f"admit-{i}", i))

    def raw_batch() -> None:
        with connection.cursor() as cursor:
            for _ in range(per_round):
                i = next(counter)
                r = row(f"raw-{i}", i)
                now = timezone.now()
                cursor.execute(
                    RAW_INSERT,
                    [
                        r["task_id"],
                        r["task_kind"],
                        r["task_description"],
                        r["final_output"],
                        r["last_error"],
                        r["attempt_count"],
                        r["cutoff_reason"],
                        r["priority"],
                        r["source_run_id"],
                        r["producer"],
                        r["idempotency_key"],
                        now,
                        now,
                    ],
                )

    def floor_batch() -> None:
        for _ in range(per_round):
            i = next(counter)
            r = row(f"floor-{i}", i)
            with transaction.atomic():
                QueuePolicy.locked()
                ReviewItem.objects.create(**r, created_at=timezone.now())

    # Warm every path (connection, statement caches, imports) outside the timing.
    admit_batch()
    raw_batch()
    floor_batch()
    totals = {"admit": 0.0, "raw": 0.0, "floor": 0.0}
    sides: list[tuple[str, Callable[[], None]]] = [("admit", admit_batch), ("raw", raw_batch), ("floor", floor_batch)]
    for r in range(rounds):
        for name, fn in sides if r % 2 == 0 else reversed(sides):
            start = time.perf_counter()
            fn()
            totals[name] += time.perf_counter() - start
    done = per_round * rounds
    admit_rate = done / totals["admit"]
    raw_rate = done / totals["raw"]
    floor_rate = done / totals["floor"]
    enqueued = ReviewItem.objects.filter(idempotency_key__startswith="admit-", status="pending").count()
    print(f"admit vs raw INSERT on PostgreSQL, {done} rows each, {rounds} interleaved rounds")
    print(f"  admit()             {admit_rate:9.0f} outputs/s  ({totals['admit'] / done * 1000:.3f} ms each)")
    print(f"  raw single INSERT   {raw_rate:9.0f} rows/s     ({totals['raw'] / done * 1000:.3f} ms each)")
    print(f"  lock + ORM insert   {floor_rate:9.0f} rows/s     ({totals['floor'] / done * 1000:.3f} ms each)")
    print(f"  ratio admit / raw   {admit_rate / raw_rate:9.2f}   (target >= 0.5; {enqueued} admitted rows pending)")
    print(f"  ratio floor / raw   {floor_rate / raw_rate:9.2f}   (lock + ORM insert: the general path's floor)")
    print(f"  ratio admit / floor {admit_rate / floor_rate:9.2f}")
    return {
        "admit_per_s": admit_rate,
        "raw_per_s": raw_rate,
        "floor_per_s": floor_rate,
        "ratio": admit_rate / raw_rate,
        "floor_ratio": floor_rate / raw_rate,
    }


if __name__ == "__main__":
    main()
