"""Claim and decide through HTTP: 16 reviewer clients against gunicorn on PostgreSQL.

    .venv/bin/python bench/bench_http.py [--items 2000] [--clients 16] [--workers 2]

A scratch database is seeded with pending items and reviewer users; gunicorn
serves the real WSGI app. Each client thread logs in like a browser (GET the
login page for the CSRF cookie, POST the credentials), then loops POST
/review/next/ -> POST /review/<id>/decide/ with the page's CSRF token and the
``HX-Request`` header htmx sends, until the queue is empty. Prints decisions
per second and p50/p95 latency per request kind, then checks the database:
no item claimed by two clients, every verdict a client saw succeed stored with
that client as its reviewer, and the queue empty.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from benchlib import ROOT, percentile, scratch_database, server_env, setup_django

PASSWORD = "bench-reviewer-password-1"
ITEM_RE = re.compile(r'id="card"[^>]*?data-item="(\d*)"', re.DOTALL)
TOKEN_RE = re.compile(r'"X-CSRFToken": "([^"]+)"')
FORM_TOKEN_RE = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@dataclass
class ClientLog:
    """What one reviewer client saw: its claims, its recorded verdicts, its timings."""

    username: str
    claimed: set[int] = field(default_factory=set)
    decided: dict[int, str] = field(default_factory=dict)
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"next": [], "decide": []})
    errors: list[str] = field(default_factory=list)


def free_port() -> int:
    """A port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def seed(items: int, clients: int) -> list[str]:
    """Pending items and reviewer users; one password hash computed once for all."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from django.utils import timezone

    from reviewqueue.access import ensure_groups
    from reviewqueue.models import QueuePolicy, ReviewItem

    # Capacity above the seeded depth, so nothing is shed and mode stays normal.
    QueuePolicy.objects.update_or_create(pk=1, defaults={"capacity": items + 100})
    groups = ensure_groups()
    hashed = make_password(PASSWORD)
    names = [f"reviewer{i:02d}" for i in range(clients)]
    user_model = get_user_model()
    for name in names:
        user = user_model.objects.create(username=name, password=hashed)
        user.groups.add(groups["reviewer"])
    now = timezone.now()
    ReviewItem.objects.bulk_create(
        [
            ReviewItem(
                idempotency_key=f"http-{i}",
                task_id=f"task-{i}",
                task_description=f"Write is_even (task {i})",
                final_output="def is_even(n):\n    return n % 2 == 0\n",
                cutoff_reason="step_limit",
                last_error="AssertionError:check_2",
                attempt_count=5,
                priority=i % 3,
                created_at=now,
            )
            for i in range(items)
        ],
        batch_size=1000,
    )
    from reviewqueue.services import reconcile_depth

    reconcile_depth()  # rows loaded behind the services' back: the kept depth learns them
    return names


def start_server(url: str, port: int, workers: int, log_path: str, conn_max_age: int) -> subprocess.Popen[bytes]:
    """gunicorn on the real WSGI app, in its own process group so it stops as one."""
    env = {**os.environ, **server_env(url), "PYTHONPATH": str(ROOT), "DB_CONN_MAX_AGE": str(conn_max_age)}
    gunicorn = os.path.join(os.path.dirname(sys.executable), "gunicorn")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [gunicorn, "reviewqueue.wsgi", "-w", str(workers), "-b", f"127.0.0.1:{port}", "--log-level", "warning"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited early; see {log_path}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health/", timeout=1).status_code < 500:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    stop_server(proc)
    raise RuntimeError(f"gunicorn did not answer within 30 s; see {log_path}")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """Graceful stop of the whole group, then a hard one if it lingers."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def card_item(html: str) -> int | None:
    """The item id the card shows, None for the empty card."""
    match = ITEM_RE.search(html)
    return int(match.group(1)) if match and match.group(1) else None


def login(client: httpx.Client, username: str) -> str:
    """Log in like a browser and return the CSRF token the review page hands htmx."""
    page = client.get("/login/")
    token = FORM_TOKEN_RE.search(page.text)
    if token is None:
        raise RuntimeError("no CSRF token on the login page")
    response = client.post(
        "/login/",
        data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token.group(1)},
        headers={"Referer": str(client.base_url) + "/login/"},
    )
    if response.status_code != 302:
        raise RuntimeError(f"login of {username} answered {response.status_code}")
    review = client.get("/review/")
    header = TOKEN_RE.search(review.text)
    if review.status_code != 200 or header is None:
        raise RuntimeError(f"review page answered {review.status_code} without a token")
    return header.group(1)


def reviewer_loop(base: str, log: ClientLog, start: threading.Barrier, n: int) -> None:
    """Next, decide, next ... until the queue hands out nothing; every third verdict rejects."""
    with httpx.Client(base_url=base, timeout=30) as client:
        token = login(client, log.username)
        headers = {"X-CSRFToken": token, "HX-Request": "true", "Referer": base + "/review/"}
        start.wait()
        count = 0
        while True:
            t0 = time.perf_counter()
            response = client.post("/review/next/", headers=headers)
            log.latencies["next"].append(time.perf_counter() - t0)
            item = card_item(response.text) if response.status_code == 200 else None
            if response.status_code != 200:
                log.errors.append(f"next answered {response.status_code}")
            if item is None:
                return
            log.claimed.add(item)
            count += 1
            approve = count % 3 != 0
            data = {"decision": "approve"} if approve else {"decision": "reject", "reason_label": "code_error"}
            t0 = time.perf_counter()
            response = client.post(f"/review/{item}/decide/", data=data, headers=headers)
            log.latencies["decide"].append(time.perf_counter() - t0)
            if response.status_code != 200:
                log.errors.append(f"decide {item} answered {response.status_code}")
                continue
            if f"item #{item}." in response.text and (
                "Approved item" in response.text or "Rejected (" in response.text
            ):
                log.decided[item] = "approve" if approve else "reject"
            else:
                log.errors.append(f"decide {item}: no confirmation")
            # The decide answer already holds the next claim (the page shows it at once).
            following = card_item(response.text)
            if following is not None:
                log.claimed.add(following)
            if count > n:
                log.errors.append("more decisions than items: stopping")
                return


def verify(logs: list[ClientLog], items: int) -> dict[str, int]:
    """Double claims, lost verdicts and leftovers, read from the database."""
    from reviewqueue import services
    from reviewqueue.models import ReviewItem, Verdict

    owner: dict[int, str] = {}
    double = 0
    for log in logs:
        for item in log.claimed:
            if item in owner and owner[item] != log.username:
                double += 1
            owner[item] = log.username
    stored = {v.item_id: (v.reviewer.username, v.decision) for v in Verdict.objects.select_related("reviewer")}
    lost = sum(
        1 for log in logs for item, decision in log.decided.items() if stored.get(item) != (log.username, decision)
    )
    # A verdict stored for a reviewer who never claimed that item would be a double claim too.
    foreign = sum(1 for item, (who, _d) in stored.items() if owner.get(item) != who)
    return {
        "double_claims": double + foreign,
        "lost_verdicts": lost,
        "verdicts": len(stored),
        "client_verdicts": sum(len(log.decided) for log in logs),
        "left_waiting": services.queue_depth(),
        "undecided": ReviewItem.objects.exclude(status__in=ReviewItem.DECIDED).count(),
        "items": items,
    }


def run(items: int, clients: int, workers: int, database: str, conn_max_age: int = 0) -> dict[str, Any]:
    """Seed, serve, review to empty, verify; returns the figures."""
    with scratch_database(database) as url:
        setup_django(url)
        from django.db import connections

        try:
            names = seed(items, clients)
            connections.close_all()
            port = free_port()
            log_path = os.path.join(tempfile.mkdtemp(prefix="rq-bench-http-"), "gunicorn.log")
            server = start_server(url, port, workers, log_path, conn_max_age)
            try:
                logs = [ClientLog(name) for name in names]
                barrier = threading.Barrier(clients + 1)
                threads = [
                    threading.Thread(target=reviewer_loop, args=(f"http://127.0.0.1:{port}", log, barrier, items))
                    for log in logs
                ]
                for t in threads:
                    t.start()
                barrier.wait(timeout=300)
                started = time.perf_counter()
                for t in threads:
                    t.join()
                elapsed = time.perf_counter() - started
            finally:
                stop_server(server)
            checks = verify(logs, items)
        finally:
            connections.close_all()
    decided = checks["client_verdicts"]
    lat = {kind: [x for log in logs for x in log.latencies[kind]] for kind in ("next", "decide")}
    lat["all"] = lat["next"] + lat["decide"]
    errors = [e for log in logs for e in log.errors]
    print(
        f"claim + decide over HTTP: {clients} clients, gunicorn -w {workers}, {items} items, PostgreSQL, "
        f"DB_CONN_MAX_AGE={conn_max_age}"
    )
    print(f"  decisions/s          {decided / elapsed:8.1f}   ({decided} in {elapsed:.1f} s)")
    for kind, values in lat.items():
        p50, p95 = percentile(values, 50), percentile(values, 95)
        print(
            f"  {kind:7s} latency      p50 {p50 * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms   ({len(values)} requests)"
        )
    print(f"  double claims        {checks['double_claims']:8d}")
    print(f"  lost verdicts        {checks['lost_verdicts']:8d}   ({checks['verdicts']} stored, {decided} seen)")
    print(f"  left in the queue    {checks['left_waiting']:8d}   ({checks['undecided']} undecided)")
    if errors:
        print(f"  client errors        {len(errors):8d}   first: {errors[0]}")
    return {
        "decisions_per_s": decided / elapsed,
        "p50_ms": percentile(lat["all"], 50) * 1000,
        "p95_ms": percentile(lat["all"], 95) * 1000,
        **checks,
        "errors": len(errors),
    }


def main() -> None:
    """Parse the sizes and run once."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--database", default="rq_bench_http")
    parser.add_argument(
        "--conn-max-age", type=int, default=0, help="DB_CONN_MAX_AGE for the server (settings' default: 0)"
    )
    args = parser.parse_args()
    result = run(args.items, args.clients, args.workers, args.database, args.conn_max_age)
    bad = result["double_claims"] or result["lost_verdicts"] or result["left_waiting"] or result["errors"]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
