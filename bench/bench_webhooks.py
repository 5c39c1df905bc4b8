"""Webhooks: verdict -> webhook received latency, and what delivery costs the decide path.

    .venv/bin/python bench/bench_webhooks.py [--items 150] [--rounds 4] [--clients 16] [--workers 2]
                                             [--celery-concurrency 2]

A scratch database gets reviewer users and a producer token with a signing
secret; gunicorn serves the real WSGI app; a Celery worker (prefork, the
deployed task settings) delivers webhooks to a receiver in this process (a
ThreadingHTTPServer on loopback that checks every signature and notes when
each event arrived). With REDIS_URL set the broker is Redis, as deployed at
scale; without, the embedded broker.

The reviewers are bench_http's: 16 clients log in like a browser, press Start,
then send one POST /review/<id>/decide/ per decision with htmx's headers,
until the card comes back empty. Rounds alternate, webhooks on then off, each
on ``--items`` freshly seeded items: "on" items carry the receiver as their
callback URL (every verdict writes an outbox row and announces it after the
commit, and the worker sends it while the reviewers go on deciding); "off"
items carry none (no row, no announcement). The worker runs in both, idle in
"off". Prints decisions/s per round and the ratio of medians (on / off: the
cost of delivery to the decide path, goal >= 0.90), then the latency from a
verdict (the event's ``created``) to its arrival at the receiver, p50 and
p95, and checks: every "on" verdict's event arrived with a valid signature,
duplicates (at least once allows them; counted), nothing sent for "off".
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from bench_http import ClientLog, login, reviewer_loop, seed_reviewers, timed_round
from benchlib import (
    DESCRIPTION,
    OUTPUT,
    ROOT,
    free_port,
    gunicorn_env,
    percentile,
    print_rounds,
    scratch_database,
    setup_django,
    start_server,
    stop_server,
)

PRODUCER = "bench-producer"


@dataclass
class Inbox:
    """What the receiver saw: arrival time per event id, bad signatures, copies."""

    secret: str = ""
    arrived: dict[str, float] = field(default_factory=dict)
    created: dict[str, float] = field(default_factory=dict)
    copies: int = 0
    bad_signatures: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def start_receiver(inbox: Inbox) -> tuple[ThreadingHTTPServer, int]:
    """The producer's endpoint: verify, note the arrival, answer 204 at once."""
    from reviewqueue.webhooks import verify

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            now = time.time()
            event = json.loads(body)
            good = verify(inbox.secret, self.headers, body) and self.headers.get("webhook-id") == event["id"]
            with inbox.lock:
                if not good:
                    inbox.bad_signatures += 1
                elif event["id"] in inbox.arrived:
                    inbox.copies += 1
                else:
                    inbox.arrived[event["id"]] = now
                    inbox.created[event["id"]] = datetime.fromisoformat(event["created"]).timestamp()
            self.send_response(204 if good else 401)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, port


def seed_items(items: int, prefix: str, callback_url: str) -> None:
    """Pending items, with or without a callback URL, then the kept depth told."""
    from django.utils import timezone

    from reviewqueue.models import ReviewItem
    from reviewqueue.services import reconcile_depth

    now = timezone.now()
    ReviewItem.objects.bulk_create(
        [
            ReviewItem(
                idempotency_key=f"{prefix}-{i}",
                task_id=f"task-{i}",
                task_description=DESCRIPTION,
                final_output=OUTPUT,
                cutoff_reason="step_limit",
                last_error="AssertionError:check_2",
                attempt_count=5,
                priority=i % 3,
                producer=PRODUCER,
                callback_url=callback_url,
                created_at=now,
            )
            for i in range(items)
        ],
        batch_size=1000,
    )
    reconcile_depth()


def start_worker(url: str, allowed: str, concurrency: int, log_path: str) -> subprocess.Popen[bytes]:
    """A Celery worker as deployed (prefork), allowed to call the receiver only."""
    env = {
        **gunicorn_env(url, None),
        "WEBHOOK_ALLOWED_HOSTS": allowed,
        "LOG_LEVEL": "WARNING",
        "CELERY_TASK_ALWAYS_EAGER": "0",
    }
    argv = [sys.executable, "-m", "celery", "-A", "reviewqueue.celery", "worker", "--pool=prefork"]
    argv += [f"--concurrency={concurrency}", "--without-gossip", "--without-mingle", "--without-heartbeat"]
    with open(log_path, "wb") as log:
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_delivered(inbox: Inbox, expected: set[str], timeout: float = 120) -> None:
    """Until every expected event arrived; the sweep is run here now and then,
    as beat would, in case an announcement was lost."""
    from reviewqueue import webhooks

    deadline = time.monotonic() + timeout
    next_sweep = time.monotonic() + 5
    while time.monotonic() < deadline:
        with inbox.lock:
            if expected <= inbox.arrived.keys():
                return
        if time.monotonic() >= next_sweep:
            webhooks.sweep()
            next_sweep = time.monotonic() + 5
        time.sleep(0.05)


@dataclass
class Rounds:
    on: list[float] = field(default_factory=list)
    off: list[float] = field(default_factory=list)
    on_events: set[str] = field(default_factory=set)


def one_round(clients: list[httpx.Client], headers: list[dict[str, str]], logs: list[ClientLog]) -> float:
    """Every reviewer decides until the queue is empty; decisions per second."""
    before = sum(len(log.decided) for log in logs)
    elapsed = timed_round(
        [
            (lambda b, c=c, h=h, log=log: reviewer_loop(c, h, log, b))
            for c, h, log in zip(clients, headers, logs, strict=True)
        ]
    )
    return (sum(len(log.decided) for log in logs) - before) / elapsed


def paused(worker: subprocess.Popen[bytes] | None, stop: bool) -> None:
    """SIGSTOP / SIGCONT the worker's whole process group (--pause-worker)."""
    if worker is not None:
        os.killpg(worker.pid, signal.SIGSTOP if stop else signal.SIGCONT)


def run_rounds(
    base: str, hook_url: str, inbox: Inbox, logs: list[ClientLog], args: argparse.Namespace, worker: Any
) -> Rounds:
    """Log every client in, then "on" and "off" rounds in turn on fresh items."""
    from reviewqueue.models import WebhookDelivery

    clients = [httpx.Client(base_url=base, timeout=60) for _ in logs]
    try:
        headers = [login(client, log.username) for client, log in zip(clients, logs, strict=True)]
        result = Rounds()
        for n in range(args.rounds):
            known = set(WebhookDelivery.objects.values_list("event_id", flat=True))
            seed_items(args.items, f"on-{n}", hook_url)
            paused(worker, True)
            result.on.append(one_round(clients, headers, logs))
            paused(worker, False)
            fresh = set(WebhookDelivery.objects.values_list("event_id", flat=True)) - known
            result.on_events |= fresh
            wait_delivered(inbox, fresh)  # the next round starts with the worker idle
            seed_items(args.items, f"off-{n}", "")
            paused(worker, True)
            result.off.append(one_round(clients, headers, logs))
            paused(worker, False)
        return result
    finally:
        for client in clients:
            client.close()


def report(args: argparse.Namespace, result: Rounds, inbox: Inbox, logs: list[ClientLog]) -> dict[str, Any]:
    """Print the rounds, the ratio, the latencies and the checks; returns them."""
    from reviewqueue.models import WebhookDelivery

    broker = "Redis" if os.environ.get("REDIS_URL") else "the embedded broker"
    print(
        f"decide with webhooks on vs off: {args.clients} reviewers over HTTP, gunicorn -w {args.workers}, "
        f"a Celery worker (prefork x {args.celery_concurrency}), {broker}, {args.rounds} rounds x {args.items} items"
    )
    ratio = print_rounds("on", result.on, "off", result.off, "decisions/s")
    where = "worker paused while deciding" if args.pause_worker else "worker delivering on the same cores"
    print(f"  ratio of medians, on / off: {ratio:.2f}   ({where}; goal >= 0.90: delivery costs decide < 10 %)")
    with inbox.lock:
        latencies = [inbox.arrived[e] - inbox.created[e] for e in result.on_events if e in inbox.arrived]
        missing = len(result.on_events - inbox.arrived.keys())
        copies, bad = inbox.copies, inbox.bad_signatures
    p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
    print(
        f"  verdict -> webhook received   p50 {p50 * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms   "
        f"mean {statistics.fmean(latencies) * 1000 if latencies else 0:7.1f} ms   ({len(latencies)} events)"
    )
    off_rows = WebhookDelivery.objects.exclude(event_id__in=result.on_events).count()
    decided = sum(len(log.decided) for log in logs)
    errors = [e for log in logs for e in log.errors]
    print(f"  events missing       {missing:8d}   ({len(result.on_events)} written for {decided} verdicts)")
    print(f"  bad signatures       {bad:8d}")
    print(f"  duplicates           {copies:8d}   (at least once: receivers dedupe on the id)")
    print(f"  rows for 'off'       {off_rows:8d}")
    if errors:
        print(f"  client errors        {len(errors):8d}   first: {errors[0]}")
    expected_on = args.items * args.rounds
    ok = not (missing or bad or off_rows or errors) and len(result.on_events) == expected_on
    return {"ratio": ratio, "p50": p50, "p95": p95, "ok": ok}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Seed, serve, deliver, decide in interleaved rounds, verify."""
    with scratch_database(args.database) as url:
        setup_django(url)
        from django.db import connections

        from reviewqueue.tokens import issue_token

        inbox = Inbox()
        receiver, receiver_port = start_receiver(inbox)
        hook_url = f"http://127.0.0.1:{receiver_port}/hook"
        token, _ = issue_token(name=PRODUCER, scopes=["outputs"], webhook_url=hook_url)
        inbox.secret = token.webhook_secret
        logs = seed_reviewers(args.clients)
        connections.close_all()
        logdir = tempfile.mkdtemp(prefix="rq-bench-webhooks-")
        worker = start_worker(url, f"127.0.0.1:{receiver_port}", args.celery_concurrency, f"{logdir}/worker.log")
        port = free_port()
        server = start_server(url, port, f"{logdir}/gunicorn.log", workers=args.workers)
        try:
            pause = worker if args.pause_worker else None
            result = run_rounds(f"http://127.0.0.1:{port}", hook_url, inbox, logs, args, pause)
            figures = report(args, result, inbox, logs)
        finally:
            stop_server(server)
            stop_server(worker)  # type: ignore[arg-type]
            receiver.shutdown()
            connections.close_all()
    return figures


def main() -> None:
    """Parse the sizes and run once; exit 1 if any check failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=150, help="items per round per side")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--celery-concurrency", type=int, default=2)
    parser.add_argument("--database", default="rq_bench_webhooks")
    parser.add_argument(
        "--pause-worker",
        action="store_true",
        help="stop the worker while reviewers decide (both sides): the decide path's own cost, as with workers "
        "on other hosts; latency then includes the pause",
    )
    args = parser.parse_args()
    sys.exit(0 if run(args)["ok"] else 1)


if __name__ == "__main__":
    main()
