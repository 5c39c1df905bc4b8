"""admit() against raw single-row INSERTs of the same rows, on PostgreSQL.

    .venv/bin/python bench/bench_admit.py [--n 2000] [--rounds 10] [--producers 4]

A scratch database is created, migrated and dropped. Every side goes through
the same psycopg connection that Django holds, one transaction per row, in
rounds whose order alternates, so drift on a shared machine hits all alike:

- admit(): the service, policy decision included (on PostgreSQL outside a
  transaction: one prepared statement, see services.admission_pg.admit_one_statement);
- raw INSERT: Django's cursor (client-side binding, planned on every call);
- prepared INSERT: the same INSERT prepared once, as admit() sends its own:
  the strict baseline, and the one the target (admit / raw >= 0.5) is held to;
- admit(), unprepared: as with DB_PREPARED_STATEMENTS=0;
- general path: admit() inside transaction.atomic(), which takes the policy
  row lock and decides with the ORM: what an admission costs when the
  one-statement path must hand over (shedding, gates, a duplicate, a race).

Then ``--producers`` threads, each on its own connection, admit at once against
as many threads sending prepared INSERTs: the rate ratio, how many admissions
the one-statement path took, and a check that the kept depth equals a count.
"""

from __future__ import annotations

import argparse
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
from benchlib import produced_output, scratch_database, setup_django

RAW_INSERT = """
INSERT INTO reviewqueue_reviewitem (
    task_id, task_kind, task_description, final_output, output_truncated, last_error,
    attempt_count, cutoff_reason, label, draft, priority, status, lease_expiries,
    source_run_id, producer, idempotency_key, filter_reason, reviewed_attempt, failing_checks, created_at, updated_at,
    queue_id
) VALUES (%s, %s, %s, %s, false, %s, %s, %s, 'unverified', false, %s, 'pending', 0, %s, %s, %s, '', 0, '', %s, %s, %s)
"""


def row(key: str, n: int) -> dict[str, Any]:
    """One produced output; both sides store exactly these fields."""
    return {**produced_output(key, n), "producer": "bench"}


def main() -> None:
    """Create the scratch database, run the rounds, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="outputs per side")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--producers", type=int, default=4, help="threads in the concurrent run (0: skip it)")
    parser.add_argument("--database", default="rq_bench_admit")
    args = parser.parse_args()

    with scratch_database(args.database) as url:
        setup_django(url)
        try:
            run(args.n, args.rounds)
            if args.producers:
                run_concurrent(args.n, args.producers)
        finally:
            from django.db import connections

            connections.close_all()


def raw_values(key: str, n: int, queue_id: int) -> list[Any]:
    """The RAW_INSERT parameters for row ``n``, in queue ``queue_id``."""
    from django.utils import timezone

    r = row(key, n)
    now = timezone.now()
    return [
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
        queue_id,
    ]


def insert_prepared(key: str, n: int, queue_id: int) -> None:
    """One raw INSERT through this thread's Django connection, prepared once."""
    from django.db import connection

    connection.ensure_connection()
    psycopg.Cursor(connection.connection).execute(RAW_INSERT, raw_values(key, n, queue_id), prepare=True)


def run(n: int, rounds: int) -> dict[str, float]:
    """Time ``n`` rows on each side in ``rounds`` alternating batches."""
    from django.db import connection, transaction

    from reviewqueue import services
    from reviewqueue.models import Queue

    # Capacity above everything this bench adds: every admission is a plain enqueue.
    # The default queue is pk 1 (the migration makes it); the raw sides insert into it too.
    Queue.objects.filter(pk=Queue.default().pk).update(capacity=100 * n + 1000)
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
                cursor.execute(RAW_INSERT, raw_values(f"raw-{i}", i, 1))

    def prepared_batch() -> None:
        for _ in range(per_round):
            i = next(counter)
            insert_prepared(f"prepared-{i}", i, 1)

    def unprepared_batch() -> None:
        # DB_PREPARED_STATEMENTS=0: the same statement, planned on every call
        connection.ensure_connection()
        connection.connection.prepare_threshold = None
        try:
            for _ in range(per_round):
                i = next(counter)
                services.admit(**row(f"unprepared-{i}", i))
        finally:
            connection.connection.prepare_threshold = 5

    def general_batch() -> None:
        for _ in range(per_round):
            i = next(counter)
            with transaction.atomic():
                services.admit(**row(f"general-{i}", i))

    sides: list[tuple[str, Callable[[], None]]] = [
        ("admit", admit_batch),
        ("raw", raw_batch),
        ("prepared", prepared_batch),
        ("unprepared", unprepared_batch),
        ("general", general_batch),
    ]
    for _, fn in sides:  # warm every path (connection, prepared statements, imports)
        fn()
    totals = dict.fromkeys((name for name, _ in sides), 0.0)
    for r in range(rounds):
        for name, fn in sides if r % 2 == 0 else reversed(sides):
            start = time.perf_counter()
            fn()
            totals[name] += time.perf_counter() - start
    done = per_round * rounds
    rate = {name: done / total for name, total in totals.items()}
    check_depth("sequential")
    print(f"admit vs raw INSERT on PostgreSQL, {done} rows each, {rounds} interleaved rounds")
    for name, label, unit in [
        ("admit", "admit()", "outputs"),
        ("raw", "raw INSERT", "rows"),
        ("prepared", "prepared INSERT", "rows"),
        ("unprepared", "admit(), unprepared", "outputs"),
        ("general", "general path", "outputs"),
    ]:
        print(f"  {label:22s}{rate[name]:7.0f} {unit}/s  ({totals[name] / done * 1000:.3f} ms each)")
    ratios = {
        "ratio": rate["admit"] / rate["prepared"],
        "ratio_client": rate["admit"] / rate["raw"],
        "unprepared_ratio": rate["unprepared"] / rate["prepared"],
        "general_ratio": rate["general"] / rate["prepared"],
    }
    print(f"  ratio admit / prepared INSERT {ratios['ratio']:5.2f}   (target >= 0.5)")
    print(f"  ratio admit / raw INSERT      {ratios['ratio_client']:5.2f}")
    print(f"  ratio unprepared / prepared   {ratios['unprepared_ratio']:5.2f}   (DB_PREPARED_STATEMENTS=0)")
    print(f"  ratio general / prepared      {ratios['general_ratio']:5.2f}   (when the one-statement path hands over)")
    return {**{f"{name}_per_s": r for name, r in rate.items()}, **ratios}


def check_depth(stage: str) -> None:
    """The kept depth must equal a count of the items admit() put in the queue
    (the raw sides insert pending rows behind its back), or the bench is void."""
    from django.db.models import Q

    from reviewqueue.models import Queue, ReviewItem

    kept = Queue.default().depth
    counted = (
        ReviewItem.objects.filter(status__in=ReviewItem.WAITING)
        .exclude(Q(idempotency_key__startswith="raw-") | Q(idempotency_key__startswith="prepared-"))
        .count()
    )
    if kept != counted:
        raise SystemExit(f"{stage}: kept depth {kept} != counted {counted}")


def run_concurrent(n: int, producers: int) -> dict[str, float]:
    """``producers`` threads admitting at once, against as many sending prepared INSERTs."""
    from django.db import connection

    from reviewqueue import services
    from reviewqueue.services import admission_pg

    per_thread = max(1, n // producers)
    one_statement = itertools.count()  # admissions the one-statement path took
    inner = admission_pg.admit_one_statement

    def counted(*args: Any, **kwargs: Any) -> Any:
        result = inner(*args, **kwargs)
        if result is not None:
            next(one_statement)
        return result

    def side(name: str, send: Callable[[str, int], None]) -> float:
        barrier = threading.Barrier(producers + 1)
        failures: list[BaseException] = []

        def producer(t: int) -> None:
            try:
                send(f"{name}-warm-{t}", t)  # connects, prepares
                barrier.wait()
                for i in range(per_thread):
                    send(f"{name}-{t}-{i}", i)
            except BaseException as exc:
                failures.append(exc)
                barrier.abort()
                raise
            finally:
                connection.close()

        threads = [threading.Thread(target=producer, args=(t,)) for t in range(producers)]
        for thread in threads:
            thread.start()
        barrier.wait()
        start = time.perf_counter()
        for thread in threads:
            thread.join()
        if failures:
            raise SystemExit(f"{name}: a producer failed: {failures[0]!r}")
        return producers * per_thread / (time.perf_counter() - start)

    admission_pg.admit_one_statement = counted
    try:
        rates = {"admit": 0.0, "prepared": 0.0}
        for r in range(2):  # both orders, the rates summed
            for name in ("admit", "prepared") if r == 0 else ("prepared", "admit"):
                if name == "admit":
                    rates[name] += side(f"admit-{r}", lambda key, i: services.admit(**row(key, i)))
                else:
                    rates[name] += side(f"prepared-{r}", lambda key, i: insert_prepared(key, i, 1))
    finally:
        admission_pg.admit_one_statement = inner
    check_depth("concurrent")
    admitted = 2 * producers * (per_thread + 1)
    took = next(one_statement)
    print(f"{producers} producers at once, {per_thread} rows each per side, both orders")
    print(f"  admit()            {rates['admit'] / 2:7.0f} outputs/s")
    print(f"  prepared INSERT    {rates['prepared'] / 2:7.0f} rows/s")
    print(f"  ratio              {rates['admit'] / rates['prepared']:7.2f}")
    print(f"  one-statement path {took} of {admitted} admissions ({took / admitted:.0%}); kept depth = counted")
    return {"ratio": rates["admit"] / rates["prepared"], "one_statement_share": took / admitted}


if __name__ == "__main__":
    main()
