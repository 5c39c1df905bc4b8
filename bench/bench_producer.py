"""Producers through HTTP: POST /api/outputs against a bare-INSERT view on the same server.

    .venv/bin/python bench/bench_producer.py [--per-round 400] [--rounds 6] [--clients 8] [--workers 2]
                                             [--conn-max-age N]

A scratch database gets one producer token (scope ``outputs``, issued as an
operator issues it) and a capacity far above everything this bench sends, so
every output is admitted as a plain enqueue: nothing shed, no draft mode.
gunicorn serves the real WSGI app with ``bench_settings``. Each client is an
``httpx.Client`` kept alive across requests, as a producer SDK holds one.

Rounds alternate, real then baseline: in each, the clients send
``--per-round`` outputs between them, to POST /api/outputs with the bearer
token, or to POST /bench/outputs (the same JSON body parsed, then ONE bare
INSERT of an equivalent row; the token is not checked there, see bench_urls).
Prints outputs/s per round, the ratio of medians (real / baseline; the goal is
>= 0.5) and p50/p95 latency per side, then checks the database: every real
answer 201 "enqueued", one row per output on each side, the kept depth equal
to a count.

The connection lifetime is the settings' deployed default unless
``--conn-max-age`` sets DB_CONN_MAX_AGE for the server.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

import httpx
from benchlib import (
    conn_max_age_label,
    free_port,
    issue_producer_token,
    percentile,
    print_rounds,
    produced_output,
    scratch_database,
    setup_django,
    start_server,
    stop_server,
)

PRODUCER = "bench-producer"


@dataclass
class Side:
    """One side's answers and timings over all rounds."""

    path: str
    headers: dict[str, str]
    rates: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    sent: int = 0
    created: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def producer_loop(client: httpx.Client, side: Side, keys: list[int], start: threading.Barrier) -> None:
    """Send one output per key, one after another, on this client's kept-alive connection."""
    latencies, created, errors = [], 0, []
    start.wait()
    for n in keys:
        t0 = time.perf_counter()
        response = client.post(side.path, json=produced_output(f"{side.path}-{n}", n), headers=side.headers)
        latencies.append(time.perf_counter() - t0)
        if response.status_code == 201 and response.json().get("outcome") == "enqueued":
            created += 1
        else:
            errors.append(f"{side.path} answered {response.status_code}: {response.text[:200]}")
    with side.lock:
        side.latencies += latencies
        side.created += created
        side.sent += len(keys)
        side.errors += errors


def one_round(clients: list[httpx.Client], side: Side, keys: list[int]) -> None:
    """All clients at once, the keys dealt out between them; appends the round's rate."""
    barrier = threading.Barrier(len(clients) + 1)
    threads = [
        threading.Thread(target=producer_loop, args=(client, side, keys[i :: len(clients)], barrier))
        for i, client in enumerate(clients)
    ]
    for t in threads:
        t.start()
    barrier.wait(timeout=120)
    started = time.perf_counter()
    for t in threads:
        t.join()
    side.rates.append(len(keys) / (time.perf_counter() - started))


def run_rounds(base: str, token: str, args: argparse.Namespace) -> tuple[Side, Side]:
    """Warm every connection on both paths, then the interleaved rounds."""
    real = Side("/api/outputs", {"Authorization": f"Bearer {token}"})
    baseline = Side("/bench/outputs", {})
    counter = itertools.count()
    clients = [httpx.Client(base_url=base, timeout=60) for _ in range(args.clients)]
    try:
        for side in (real, baseline):
            warm = Side(side.path, side.headers)
            one_round(clients, warm, [next(counter) for _ in range(args.clients)])
            side.errors += warm.errors
            side.sent += warm.sent
            side.created += warm.created
        for _ in range(args.rounds):
            for side in (real, baseline):
                one_round(clients, side, [next(counter) for _ in range(args.per_round)])
    finally:
        for client in clients:
            client.close()
    return real, baseline


def verify(real: Side, baseline: Side) -> dict[str, int]:
    """Rows per side against what the clients were told, and the kept depth against a count."""
    from bench_urls import BASELINE_PRODUCER

    from reviewqueue.models import Queue, ReviewItem

    real_rows = ReviewItem.objects.filter(producer=PRODUCER, status="pending").count()
    baseline_rows = ReviewItem.objects.filter(producer=BASELINE_PRODUCER).count()
    waiting = ReviewItem.objects.filter(status__in=ReviewItem.WAITING).count()
    return {
        "real_missing": real.sent - real_rows,
        "real_not_enqueued": real.sent - real.created,
        "baseline_missing": baseline.sent - baseline_rows,
        "depth_drift": Queue.default().depth - real_rows,
        "waiting": waiting,
    }


def report(args: argparse.Namespace, real: Side, baseline: Side, checks: dict[str, int]) -> float:
    """Print the rounds, the ratio, the latencies and the checks; returns the ratio."""
    print(
        f"producers over HTTP: {args.clients} kept-alive clients, gunicorn -w {args.workers}, "
        f"{args.rounds} rounds x {args.per_round} outputs per side, PostgreSQL, {conn_max_age_label(args.conn_max_age)}"
    )
    ratio = print_rounds("real", real.rates, "baseline", baseline.rates, "outputs/s")
    print(f"  ratio of medians, real / baseline: {ratio:.2f}   (goal >= 0.5)")
    for name, side in (("real", real), ("baseline", baseline)):
        p50, p95 = percentile(side.latencies, 50), percentile(side.latencies, 95)
        print(f"  {name:8s} latency    p50 {p50 * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms   ({side.sent} requests)")
    print(f"  real: sent {real.sent}, answered 201 enqueued {real.created}, rows {real.sent - checks['real_missing']}")
    print(f"  baseline: sent {baseline.sent}, rows {baseline.sent - checks['baseline_missing']}")
    print(f"  kept depth drift     {checks['depth_drift']:8d}")
    for side in (real, baseline):
        if side.errors:
            print(f"  {side.path} errors {len(side.errors)}; first: {side.errors[0]}")
    return ratio


def run(args: argparse.Namespace) -> bool:
    """Seed, serve, send in interleaved rounds, verify; True when every check held."""
    with scratch_database(args.database) as url:
        setup_django(url)
        from django.db import connections

        from reviewqueue.models import Queue

        try:
            Queue.objects.filter(pk=Queue.default().pk).update(capacity=10_000_000)
            token = issue_producer_token(PRODUCER)
            connections.close_all()
            port = free_port()
            log_path = os.path.join(tempfile.mkdtemp(prefix="rq-bench-producer-"), "gunicorn.log")
            server = start_server(
                url,
                port,
                log_path,
                workers=args.workers,
                conn_max_age=args.conn_max_age,
                settings_module="bench_settings",
            )
            try:
                real, baseline = run_rounds(f"http://127.0.0.1:{port}", token, args)
            finally:
                stop_server(server)
            checks = verify(real, baseline)
            report(args, real, baseline, checks)
        finally:
            connections.close_all()
    bad = [checks[k] for k in ("real_missing", "real_not_enqueued", "baseline_missing", "depth_drift")]
    return not any(bad) and not real.errors and not baseline.errors


def main() -> None:
    """Parse the sizes and run once; exit 1 if any check failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-round", type=int, default=400, help="outputs per round per side")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--database", default="rq_bench_producer")
    parser.add_argument(
        "--conn-max-age", type=int, default=None, help="DB_CONN_MAX_AGE for the server (default: the settings')"
    )
    sys.exit(0 if run(parser.parse_args()) else 1)


if __name__ == "__main__":
    main()
