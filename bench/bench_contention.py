"""Many reviewers deciding at once: waits on the policy row and how long it is held.

    .venv/bin/python bench/bench_contention.py [--deciders 16,32] [--items 600] [--sample-ms 5]
                                               [--conn-max-age N]

For each level, a fresh gunicorn (2 worker processes, threaded, level / 2
threads each, so every decider has a request in flight at the database at
once) serves the real app; that many reviewer clients decide as the browser
does (one POST decide per decision, the next card from its answer; the
clients of bench_http) until ``--items`` seeded items are gone, while a
separate connection samples the server every ``--sample-ms``.

What the sampler reads, in one statement per sample, is every backend of the
scratch database holding a *granted* RowShareLock or RowExclusiveLock on the
relation ``reviewqueue_queue`` (pg_locks), with its ``xact_start``,
``wait_event_type`` and ``pg_blocking_pids`` (pg_stat_activity), stamped with
the sample's ``statement_timestamp()``. A transaction that locks the policy
row (SELECT ... FOR UPDATE, or UPDATE) first takes that relation-level lock,
keeps it to its commit, and only then waits for the row. So at each sample:

- a **waiter** on the policy row is such a backend whose wait_event_type is
  ``Lock`` (blocked by another such backend, or just released and not yet
  scheduled: pg_blocking_pids is already empty then). After the relation
  lock, a decide locks only the item its reviewer holds, which nobody else
  locks, so a lock wait among these backends is a wait for the policy row;
- a **holder** of the row is such a backend that is not waiting: it got the
  row lock and keeps it until commit (plain reads take AccessShareLock and
  are not counted). The samples that saw more than one are counted.

Reported: backends waiting, mean and max over the samples, and the hold time
per transaction (pid, xact_start) seen holding. Its acquisition lies after
both its xact_start and the last sample that did not see it holding, and not
later than the first sample that did; its release lies between the last
sample that saw it and the next one. Hence two bounds per transaction:
``lower = last seen - first seen`` and ``upper = next sample without it -
max(xact_start, last sample before it)``; the estimate is their midpoint, and
p50/p95 are reported for all three. The resolution is the sampling interval
(printed: the target plus the sampler's own query, a few ms on a loaded
machine): a hold shorter than one interval is seen by at most one sample and
its bounds span one to two intervals. Short holds can also fall between two
samples and go unseen, so the sample favours longer holds; the share of
decisions seen holding is printed beside the figures, and it says how far
to trust them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime

import httpx
import psycopg
from bench_http import login, reviewer_loop, seed_items, seed_reviewers, timed_round, verify
from benchlib import (
    conn_max_age_label,
    free_port,
    percentile,
    scratch_database,
    setup_django,
    start_server,
    stop_server,
)

SAMPLE = """
SELECT statement_timestamp(), x.pid, x.xact_start, x.wait_event_type, x.blockers
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (
    SELECT a.pid, a.xact_start, a.wait_event_type, pg_blocking_pids(a.pid) AS blockers
    FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE l.locktype = 'relation' AND l.granted AND l.mode IN ('RowShareLock', 'RowExclusiveLock')
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.relation = 'reviewqueue_queue'::regclass AND a.pid <> pg_backend_pid()
) AS x ON true
"""


@dataclass
class Hold:
    """One transaction seen holding the policy row: the sample times that bound its hold."""

    xact_start: datetime
    before: datetime | None
    first: datetime
    last: datetime
    after: datetime | None = None

    def bounds(self) -> tuple[float, float] | None:
        """(lower, upper) seconds, None when the run ended before it was seen released."""
        if self.after is None:
            return None
        start = max(self.xact_start, self.before) if self.before is not None else self.xact_start
        return (self.last - self.first).total_seconds(), (self.after - start).total_seconds()


@dataclass
class Sampler:
    """Samples the policy row's holders and waiters from its own connection until stopped."""

    url: str
    interval: float
    waiting: list[int] = field(default_factory=list)
    times: list[datetime] = field(default_factory=list)
    holds: list[Hold] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    crowded: int = 0

    def run(self) -> None:
        """Sample until stopped; each open hold closes at the first sample without it."""
        open_holds: dict[tuple[int, datetime], Hold] = {}
        with psycopg.connect(self.url, autocommit=True) as conn:
            previous: datetime | None = None
            while not self.stop.is_set():
                rows = conn.execute(SAMPLE).fetchall()
                now = rows[0][0]
                holders, waiting = self.classify(rows)
                self.times.append(now)
                self.waiting.append(waiting)
                for key, hold in list(open_holds.items()):
                    if key not in holders:
                        hold.after = now
                        self.holds.append(open_holds.pop(key))
                for key in holders:
                    if key in open_holds:
                        open_holds[key].last = now
                    else:
                        open_holds[key] = Hold(key[1], previous, now, now)
                previous = now
                time.sleep(self.interval)
        self.holds += open_holds.values()

    def classify(self, rows: list[tuple]) -> tuple[set[tuple[int, datetime]], int]:
        """The (pid, xact_start) holding the row, and how many backends wait for it."""
        holders, waiting = set(), 0
        for _t, pid, xact_start, wait_type, _blockers in rows:
            if pid is None or xact_start is None:
                continue
            if wait_type == "Lock":
                waiting += 1
            else:
                holders.add((pid, xact_start))
        self.crowded += len(holders) > 1
        return holders, waiting


def level_report(deciders: int, decided: int, elapsed: float, latencies: list[float], sampler: Sampler) -> None:
    """One level's throughput, latency, waiters and hold times."""
    spans = [(b - a).total_seconds() for a, b in zip(sampler.times, sampler.times[1:], strict=False)]
    bounds = [b for hold in sampler.holds if (b := hold.bounds()) is not None]
    lower, upper = [b[0] for b in bounds], [b[1] for b in bounds]
    estimate = [(lo + up) / 2 for lo, up in bounds]
    print(f"  {deciders} deciders: {decided / elapsed:6.1f} decisions/s ({decided} in {elapsed:.1f} s)")
    print(
        f"    decide latency      p50 {percentile(latencies, 50) * 1000:7.1f} ms   "
        f"p95 {percentile(latencies, 95) * 1000:7.1f} ms"
    )
    print(
        f"    waiting on the policy row: mean {statistics.fmean(sampler.waiting or [0]):5.2f}   "
        f"max {max(sampler.waiting or [0]):3d} backends   ({len(sampler.waiting)} samples, "
        f"interval mean {statistics.fmean(spans or [0]) * 1000:.1f} ms, p95 {percentile(spans, 95) * 1000:.1f} ms)"
    )
    for name, values in (("estimate", estimate), ("lower", lower), ("upper", upper)):
        print(
            f"    row held, {name:8s}  p50 {percentile(values, 50) * 1000:7.1f} ms   "
            f"p95 {percentile(values, 95) * 1000:7.1f} ms"
        )
    print(
        f"    transactions seen holding it: {len(bounds)} (decisions: {decided}); "
        f"samples seeing two holders at once: {sampler.crowded}"
    )


def run_level(url: str, deciders: int, args: argparse.Namespace, logs: list, level: int) -> bool:
    """One level: its own server, clients logged in, items seeded, sampled while they decide."""
    port = free_port()
    log_path = os.path.join(tempfile.mkdtemp(prefix="rq-bench-contention-"), "gunicorn.log")
    threads = max(1, deciders // 2)
    server = start_server(url, port, log_path, workers=2, threads=threads, conn_max_age=args.conn_max_age)
    # Threaded gunicorn closes a kept-alive connection idle for 2 s (its --keep-alive
    # default); a client idle while the others log in must not reuse one it closed.
    limits = httpx.Limits(keepalive_expiry=1.0)
    clients = [httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120, limits=limits) for _ in range(deciders)]
    mine = logs[:deciders]
    try:
        headers = [login(client, log.username) for client, log in zip(clients, mine, strict=True)]
        seed_items(args.items, f"level-{level}")
        before = sum(len(log.decided) for log in mine)
        latencies_before = sum(len(log.latencies["decide"]) for log in mine)
        sampler = Sampler(url, args.sample_ms / 1000)
        sampling = threading.Thread(target=sampler.run)
        sampling.start()
        try:
            elapsed = timed_round(
                [
                    (lambda b, c=c, h=h, log=log: reviewer_loop(c, h, log, b))
                    for c, h, log in zip(clients, headers, mine, strict=True)
                ]
            )
        finally:
            sampler.stop.set()
            sampling.join()
    finally:
        for client in clients:
            client.close()
        stop_server(server)
    decided = sum(len(log.decided) for log in mine) - before
    latencies = [x for log in mine for x in log.latencies["decide"]][latencies_before:]
    level_report(deciders, decided, elapsed, latencies, sampler)
    return decided == args.items


def main() -> None:
    """Each level in turn on one scratch database, then the checks of bench_http."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deciders", default="16,32", help="comma-separated levels")
    parser.add_argument("--items", type=int, default=600, help="items decided per level")
    parser.add_argument("--sample-ms", type=float, default=5.0)
    parser.add_argument("--database", default="rq_bench_contention")
    parser.add_argument(
        "--conn-max-age", type=int, default=None, help="DB_CONN_MAX_AGE for the server (default: the settings')"
    )
    args = parser.parse_args()
    levels = [int(x) for x in args.deciders.split(",")]
    with scratch_database(args.database) as url:
        setup_django(url)
        from django.db import connections

        try:
            logs = seed_reviewers(max(levels))
            connections.close_all()
            print(
                f"contention: gunicorn -w 2 threaded (deciders / 2 threads each), {args.items} items per level, "
                f"PostgreSQL, {conn_max_age_label(args.conn_max_age)}"
            )
            complete = [run_level(url, n, args, logs, level) for level, n in enumerate(levels)]
            checks = verify(logs, 0)
        finally:
            connections.close_all()
    print(
        f"  double claims {checks['double_claims']}, lost verdicts {checks['lost_verdicts']}, "
        f"left in the queue {checks['left_waiting']}"
    )
    errors = [e for log in logs for e in log.errors]
    if errors:
        print(f"  client errors {len(errors)}; first: {errors[0]}")
    bad = checks["double_claims"] or checks["lost_verdicts"] or checks["left_waiting"] or errors
    sys.exit(0 if all(complete) and not bad else 1)


if __name__ == "__main__":
    main()
