"""Two queues admitting at once, against one queue and a prepared raw INSERT, on PostgreSQL.

    .venv/bin/python bench/bench_queues_admit.py [--writers 4] [--per-writer 250] [--rounds 5]

A scratch database is created, migrated and dropped; two queues, ``a`` and
``b``, are made with ``services.create_queue`` (capacity far above the load,
so every admission is a plain enqueue). ``--writers`` processes, each with its
own connection, then write at once, in interleaved rounds whose order
alternates, on three sides:

- two queues: writer i calls ``services.admit(..., queue="a")`` for even i,
  ``queue="b"`` for odd i, outside a transaction (the one-statement path);
- one queue: the same writers, all with ``queue="a"``;
- prepared INSERT: the same writers send a prepared single-row ``INSERT`` of
  the same row into ``reviewqueue_reviewitem`` (``queue_id`` set, a for even
  i, b for odd i): the baseline the goal is held to (two queues / prepared
  >= 0.5).

Processes rather than threads, so the Python side of admit() does not queue
on one interpreter lock and the writers meet only where the database makes
them meet. A round runs the three sides back to back, so its ratios see one
load on a shared machine: each ratio is the median of the rounds' ratios
(the ratio of the sides' median rates is written too). Two queues / one
queue shows what a second queue's own row lock buys: with one queue every
admission waits for the one before it to commit.

While writers run, a separate connection samples every ``--sample-ms``
which writers wait on a heavyweight lock and who blocks them
(``pg_blocking_pids``); each writer names its queue in ``application_name``.
A wait on a row (``transactionid`` or ``tuple``) between writers of
different queues would mean the queues wait on each other: the bench fails
if it sees one. Relation-extension waits (``extend``: any two writers to one
table) are counted apart. Also checked: each queue's kept depth equals a count
of the items admit() put in it, and how many admissions the one-statement path
took. Figures are printed and written as JSON (``BENCH_RESULTS_DIR``, default
``bench/results/``).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import psycopg
from bench_admit import RAW_INSERT, raw_values, row
from benchlib import scratch_database, setup_django, write_results

SIDES = ("two queues", "one queue", "prepared INSERT")
APP_PREFIX = "bench-writer-"

# Who waits on whom, among this database's writers, in one statement.
WAITS = f"""
SELECT w.application_name, h.application_name, w.wait_event
FROM pg_stat_activity w
CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS b(pid)
JOIN pg_stat_activity h ON h.pid = b.pid
WHERE w.datname = current_database() AND w.wait_event_type = 'Lock'
  AND w.application_name LIKE '{APP_PREFIX}%' AND h.application_name LIKE '{APP_PREFIX}%'
"""


@dataclass
class Job:
    """What every writer does in one timed side of one round."""

    side: str
    prefix: str
    per_writer: int


@dataclass
class Waits:
    """Lock waits seen by the sampler during one side."""

    samples: int = 0
    same_queue: int = 0  # a row wait on a writer of the same queue
    cross_queue: int = 0  # a row wait on a writer of another queue: must stay 0
    extend: int = 0  # waiting to extend the table, whoever holds it
    seen: set[tuple[str, str, str]] = field(default_factory=set)


def target(side: str, writer: int) -> str:
    """The queue writer ``writer`` writes to on ``side``."""
    return "a" if side == "one queue" or writer % 2 == 0 else "b"


def write_one(side: str, key: str, n: int, slug: str, queue_ids: dict[str, int]) -> bool:
    """One write; True when admit() took the one-statement path."""
    from django.db import connection

    from reviewqueue import services

    if side == "prepared INSERT":
        connection.ensure_connection()
        psycopg.Cursor(connection.connection).execute(RAW_INSERT, raw_values(key, n, queue_ids[slug]), prepare=True)
        return False
    before = _one_statement[0]
    services.admit(**row(key, n), queue=slug)
    return _one_statement[0] > before


_one_statement = [0]  # admissions the one-statement path completed in this process


def count_one_statement() -> None:
    """Count, in this process, the admissions the one-statement path completes."""
    from reviewqueue.services import admission_pg

    inner = admission_pg.admit_one_statement

    def counted(*args: Any, **kwargs: Any) -> Any:
        result = inner(*args, **kwargs)
        if result is not None:
            _one_statement[0] += 1
        return result

    admission_pg.admit_one_statement = counted


def writer(index: int, queue_ids: dict[str, int], pipe: Connection, barrier: Any) -> None:
    """A writer process: its own connection, one job per message until None."""
    from django.db import connection

    count_one_statement()
    try:
        while (job := pipe.recv()) is not None:
            slug = target(job.side, index)
            connection.ensure_connection()
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('application_name', %s, false)", [f"{APP_PREFIX}{slug}-{index}"])
            write_one(job.side, f"{job.prefix}-{index}-warm", index, slug, queue_ids)  # prepares, caches
            barrier.wait()
            took = sum(
                write_one(job.side, f"{job.prefix}-{index}-{i}", i, slug, queue_ids) for i in range(job.per_writer)
            )
            pipe.send(("done", took))
    except BaseException as exc:
        barrier.abort()
        pipe.send(("failed", repr(exc)))
        raise
    finally:
        connection.close()


def sample_waits(url: str, stop: threading.Event, every: float, waits: Waits) -> None:
    """Sample who waits on whom until ``stop`` is set."""
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.is_set():
            rows = conn.execute(WAITS).fetchall()
            waits.samples += 1
            for waiter, holder, event in rows:
                waiter_queue, holder_queue = waiter.split("-")[2], holder.split("-")[2]
                if event == "extend":
                    waits.extend += 1
                elif waiter_queue == holder_queue:
                    waits.same_queue += 1
                else:
                    waits.cross_queue += 1
                    waits.seen.add((waiter, holder, event))
            stop.wait(every)


def timed_side(url: str, pipes: list[Connection], barrier: Any, job: Job, every: float) -> tuple[float, Waits, int]:
    """Rows per second of one side, the waits seen meanwhile, and the
    admissions the one-statement path took."""
    for pipe in pipes:
        pipe.send(job)
    waits, stop = Waits(), threading.Event()
    sampler = threading.Thread(target=sample_waits, args=(url, stop, every, waits))
    barrier.wait()
    start = time.perf_counter()
    sampler.start()
    took = 0
    for pipe in pipes:
        status, value = pipe.recv()
        if status != "done":
            raise SystemExit(f"{job.side}: a writer failed: {value}")
        took += value
    elapsed = time.perf_counter() - start
    stop.set()
    sampler.join()
    return len(pipes) * job.per_writer / elapsed, waits, took


def check_depths() -> dict[str, int]:
    """Each queue's kept depth against a count of what admit() put in it
    (the INSERT side adds rows behind its back), or the bench is void."""
    from reviewqueue.models import Queue, ReviewItem

    counted = {}
    for queue in Queue.objects.filter(slug__in=("a", "b")):
        admitted = (
            ReviewItem.objects.filter(queue=queue, status__in=ReviewItem.WAITING)
            .exclude(idempotency_key__startswith="insert-")
            .count()
        )
        if queue.depth != admitted:
            raise SystemExit(f"queue {queue.slug}: kept depth {queue.depth} != counted {admitted}")
        counted[queue.slug] = admitted
    return counted


def run(url: str, writers: int, per_writer: int, rounds: int, sample_ms: float) -> dict[str, Any]:
    """Make the queues, start the writers, time the sides round by round."""
    from django.db import connections

    from reviewqueue import services
    from reviewqueue.models import Queue

    capacity = 10 * writers * per_writer * rounds + 1000
    queue_ids = {
        slug: services.create_queue(user=None, slug=slug, name=f"Queue {slug}", settings={"capacity": capacity}).pk
        for slug in ("a", "b")
    }
    Queue.objects.filter(slug="default").update(capacity=capacity)
    connections.close_all()  # the writers are forked: none may share this connection
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(writers + 1)
    pipes, procs = [], []
    for i in range(writers):
        ours, theirs = ctx.Pipe()
        proc = ctx.Process(target=writer, args=(i, queue_ids, theirs, barrier), daemon=True)
        proc.start()
        pipes.append(ours)
        procs.append(proc)
    rates: dict[str, list[float]] = {side: [] for side in SIDES}
    waits: dict[str, list[Waits]] = {side: [] for side in SIDES}
    took = admitted = 0
    try:
        for r in range(rounds):
            for side in SIDES if r % 2 == 0 else tuple(reversed(SIDES)):
                prefix = "insert" if side == "prepared INSERT" else side.replace(" ", "-")
                rate, seen, one = timed_side(
                    url, pipes, barrier, Job(side, f"{prefix}-{r}", per_writer), sample_ms / 1000
                )
                rates[side].append(rate)
                waits[side].append(seen)
                if side != "prepared INSERT":
                    took += one
                    admitted += writers * per_writer
    finally:
        for pipe in pipes:
            pipe.send(None)
        for proc in procs:
            proc.join(timeout=30)
    depths = check_depths()
    return report(writers, per_writer, rounds, rates, waits, took, admitted, depths)


def report(
    writers: int,
    per_writer: int,
    rounds: int,
    rates: dict[str, list[float]],
    waits: dict[str, list[Waits]],
    took: int,
    admitted: int,
    depths: dict[str, int],
) -> dict[str, Any]:
    """Print the table; fail on a wait between queues; return the figures."""
    median = {side: statistics.median(values) for side, values in rates.items()}
    total = {
        side: Waits(
            samples=sum(w.samples for w in ws),
            same_queue=sum(w.same_queue for w in ws),
            cross_queue=sum(w.cross_queue for w in ws),
            extend=sum(w.extend for w in ws),
            seen=set().union(*(w.seen for w in ws)),
        )
        for side, ws in waits.items()
    }
    print(f"{writers} writer processes at once, {per_writer} rows each per side per round, {rounds} rounds")
    print(f"  {'side':18s} {'median':>9s}   row waits: same / other queue; extend")
    for side in SIDES:
        w = total[side]
        print(
            f"  {side:18s} {median[side]:7.0f}/s   "
            f"{w.same_queue / max(1, w.samples):5.2f} / {w.cross_queue / max(1, w.samples):4.2f}; "
            f"{w.extend / max(1, w.samples):4.2f}   (mean per sample, {w.samples} samples)"
        )
    # Each round's sides run back to back, so a round's ratio sees one load on a
    # shared machine; the headline is the median of the rounds' ratios.
    per_round = {
        "ratio": [a / b for a, b in zip(rates["two queues"], rates["prepared INSERT"], strict=True)],
        "two_vs_one_queue": [a / b for a, b in zip(rates["two queues"], rates["one queue"], strict=True)],
    }
    ratio, two_vs_one = (statistics.median(per_round[name]) for name in ("ratio", "two_vs_one_queue"))
    rounds_text = {name: " ".join(f"{v:.2f}" for v in values) for name, values in per_round.items()}
    print(f"  ratio two queues / prepared INSERT {ratio:5.2f}   (goal >= 0.5: {'met' if ratio >= 0.5 else 'NOT MET'})")
    print(f"      per round: {rounds_text['ratio']}")
    print(f"  ratio two queues / one queue       {two_vs_one:5.2f}   (same writers; one queue's row serialises them)")
    print(f"      per round: {rounds_text['two_vs_one_queue']}")
    print(f"  one-statement path {took} of {admitted} admissions ({took / max(1, admitted):.0%})")
    print(f"  kept depth = counted in each queue ({depths})")
    cross = sum(w.cross_queue for w in total.values())
    if cross:
        raise SystemExit(
            f"writers of different queues waited on each other {cross} times: {sorted(total['two queues'].seen)}"
        )
    print("  writers of different queues never waited on each other's rows")
    return {
        "writers": writers,
        "per_writer": per_writer,
        "rounds": rounds,
        "rates_per_s": rates,  # per round, in order
        "median_per_s": median,
        "ratio": ratio,
        "ratio_per_round": per_round["ratio"],
        "ratio_of_medians": median["two queues"] / median["prepared INSERT"],
        "two_vs_one_queue_per_round": per_round["two_vs_one_queue"],
        "goal": 0.5,
        "goal_met": ratio >= 0.5,
        "two_vs_one_queue": two_vs_one,
        "one_statement_share": took / max(1, admitted),
        "row_waits_per_sample": {
            side: {
                "same_queue": w.same_queue / max(1, w.samples),
                "other_queue": w.cross_queue / max(1, w.samples),
                "extend": w.extend / max(1, w.samples),
                "samples": w.samples,
            }
            for side, w in total.items()
        },
    }


def main() -> None:
    """Create the scratch database, run, print and write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=4, help="writer processes (even: half per queue)")
    parser.add_argument("--per-writer", type=int, default=100, help="rows per writer per side per round")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--sample-ms", type=float, default=10.0)
    parser.add_argument("--database", default="rq_bench_queues_admit")
    args = parser.parse_args()
    if args.writers < 2 or args.writers % 2:
        parser.error("--writers must be even and at least 2: half write to each queue")
    with scratch_database(args.database) as url:
        setup_django(url)
        try:
            figures = run(url, args.writers, args.per_writer, args.rounds, args.sample_ms)
        finally:
            from django.db import connections

            connections.close_all()
    print(f"  written to {write_results('queues_admit', figures)}")


if __name__ == "__main__":
    main()
