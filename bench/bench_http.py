"""Reviewers through HTTP as the browser drives them, against a baseline view on the same server.

    .venv/bin/python bench/bench_http.py [--items 150] [--rounds 4] [--clients 16] [--workers 2]
                                         [--conn-max-age N]

A scratch database gets reviewer users; gunicorn serves the real WSGI app with
``bench_settings`` (the project's settings plus the baseline views of
``bench_urls``). Each client thread logs in like a browser (GET the login page
for the CSRF cookie, POST the credentials, GET /review/ for the token the page
hands htmx), then reviews as the page does: one POST /review/next/ (the Start
button), then ONE request per decision, POST /review/<id>/decide/ with the
headers htmx sends (``HX-Request``, ``HX-Target: card``, ``HX-Trigger``,
``HX-Current-URL``, ``X-CSRFToken``); its answer is the next card, whose item
id the client decides next, until the card comes back empty.

Rounds alternate, real, then the session baseline, then the bare baseline,
each on ``--items`` freshly seeded pending items. The session baseline's
clients POST /bench/session-decide/ with the same session cookie and CSRF
header as the real request: one indexed SELECT FOR UPDATE SKIP LOCKED, one
UPDATE, a small card, behind the same session authentication (see
bench_urls); the goal, real / session baseline >= 0.25, is held to it. The
bare baseline (POST /bench/decide/, the same two statements with no session,
login or CSRF) is reported beside it, as earlier figures were measured
against it. Each side runs until it answers an empty card. Prints
decisions/s per round, both ratios of medians, the load average, and
latency percentiles, then checks the
database: no item claimed by two clients, every verdict a client saw succeed
stored with that client as its reviewer, the kept depth equal to a count after
every real round, every baseline item decided once, and the queue empty.

The connection lifetime is the settings' deployed default unless
``--conn-max-age`` sets DB_CONN_MAX_AGE for the server.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from benchlib import (
    conn_max_age_label,
    free_port,
    percentile,
    print_rounds,
    scratch_database,
    setup_django,
    start_server,
    stop_server,
)

PASSWORD = "bench-reviewer-password-1"
ITEM_RE = re.compile(r'id="card"[^>]*?data-item="(\d*)"', re.DOTALL)
TOKEN_RE = re.compile(r'"X-CSRFToken": "([^"]+)"')
FORM_TOKEN_RE = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
SETTINGS = "bench_settings"


@dataclass
class ClientLog:
    """What one reviewer client saw: its claims, its recorded verdicts, its timings."""

    username: str
    user_id: int = 0
    claimed: set[int] = field(default_factory=set)
    decided: dict[int, str] = field(default_factory=dict)
    baseline_items: list[int] = field(default_factory=list)
    session_items: list[int] = field(default_factory=list)
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"decide": [], "session": [], "baseline": []})
    errors: list[str] = field(default_factory=list)


def seed_reviewers(clients: int) -> list[ClientLog]:
    """Reviewer users with one password hash computed once for all; capacity
    far above anything seeded, so nothing is shed and the mode stays normal.
    One review per item, as the baseline does, so the checks (no item
    claimed twice, every verdict stored) hold as stated: double review's
    cost is a share of extra reviews, which the simulation reports
    (``extra_review_load_pct``), not a change to a decision's path."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password

    from reviewqueue.access import ensure_groups
    from reviewqueue.models import Queue

    Queue.objects.filter(pk=Queue.default().pk).update(capacity=1_000_000, double_review_rate=0)
    groups = ensure_groups()
    hashed = make_password(PASSWORD)
    logs = []
    for i in range(clients):
        user = get_user_model().objects.create(username=f"reviewer{i:02d}", password=hashed)
        user.groups.add(groups["reviewer"])
        logs.append(ClientLog(user.username, user.pk))
    return logs


def seed_items(items: int, prefix: str) -> None:
    """``items`` pending items loaded in bulk, then the kept depth told about them."""
    from django.utils import timezone

    from reviewqueue.models import ReviewItem
    from reviewqueue.services import reconcile_depth

    now = timezone.now()
    ReviewItem.objects.bulk_create(
        [
            ReviewItem(
                idempotency_key=f"{prefix}-{i}",
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
    reconcile_depth()  # rows loaded behind the services' back: the kept depth learns them


def card_item(html: str) -> int | None:
    """The item id the card shows, None for the empty card."""
    match = ITEM_RE.search(html)
    return int(match.group(1)) if match and match.group(1) else None


def login(client: httpx.Client, username: str) -> dict[str, str]:
    """Log in like a browser; the headers htmx sends with the decide form."""
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
    page_url = str(client.base_url) + "/review/"
    return {
        "X-CSRFToken": header.group(1),
        "HX-Request": "true",
        "HX-Current-URL": page_url,
        "HX-Target": "card",
        "Referer": page_url,
    }


def decide_once(client: httpx.Client, headers: dict[str, str], log: ClientLog, item: int, count: int) -> int | None:
    """One decision as the page sends it (every third rejects); the next card's item."""
    approve = count % 3 != 0
    data = {"decision": "approve"} if approve else {"decision": "reject", "reason_label": "code_error"}
    t0 = time.perf_counter()
    response = client.post(f"/review/{item}/decide/", data=data, headers={**headers, "HX-Trigger": "decide-form"})
    log.latencies["decide"].append(time.perf_counter() - t0)
    if response.status_code != 200:
        log.errors.append(f"decide {item} answered {response.status_code}")
        return None
    if re.search(rf"(Approved|Rejected) item #{item}\b", response.text):
        log.decided[item] = "approve" if approve else "reject"
    else:
        log.errors.append(f"decide {item}: no confirmation")
    following = card_item(response.text)
    if following is not None:
        log.claimed.add(following)
    return following


def reviewer_loop(client: httpx.Client, headers: dict[str, str], log: ClientLog, start: threading.Barrier) -> None:
    """Start (one POST /review/next/), then decide whatever card the last answer showed, until none.

    A transport error ends this client and is counted, so the run fails its checks.
    """
    start.wait()
    try:
        review_until_empty(client, headers, log)
    except httpx.TransportError as exc:
        log.errors.append(f"transport error: {exc!r}")


def review_until_empty(client: httpx.Client, headers: dict[str, str], log: ClientLog) -> None:
    """The Start button's request, then one decide per card until the answer is the empty card."""
    response = client.post("/review/next/", headers={**headers, "HX-Trigger": "next-button"})
    item = card_item(response.text) if response.status_code == 200 else None
    if response.status_code != 200:
        log.errors.append(f"next answered {response.status_code}")
    count = 0
    while item is not None:
        log.claimed.add(item)
        count += 1
        item = decide_once(client, headers, log, item, count)
        if count > 100_000:
            log.errors.append("runaway client: stopping")
            return


def baseline_loop(client: httpx.Client, log: ClientLog, start: threading.Barrier) -> None:
    """POST /bench/decide/ until it answers the empty card."""
    start.wait()
    while True:
        t0 = time.perf_counter()
        response = client.post("/bench/decide/", data={"reviewer": str(log.user_id)})
        log.latencies["baseline"].append(time.perf_counter() - t0)
        item = card_item(response.text) if response.status_code == 200 else None
        if response.status_code != 200:
            log.errors.append(f"baseline answered {response.status_code}")
        if item is None:
            return
        log.baseline_items.append(item)


def session_baseline_loop(
    client: httpx.Client, headers: dict[str, str], log: ClientLog, start: threading.Barrier
) -> None:
    """POST /bench/session-decide/ (session cookie, CSRF header) until it answers the empty card."""
    start.wait()
    while True:
        t0 = time.perf_counter()
        response = client.post("/bench/session-decide/", headers=headers)
        log.latencies["session"].append(time.perf_counter() - t0)
        item = card_item(response.text) if response.status_code == 200 else None
        if response.status_code != 200:
            log.errors.append(f"session baseline answered {response.status_code}")
        if item is None:
            return
        log.session_items.append(item)


def timed_round(targets: list[Callable[[threading.Barrier], None]]) -> float:
    """Start every client at once; seconds until the last one finds the queue empty."""
    barrier = threading.Barrier(len(targets) + 1)
    threads = [threading.Thread(target=target, args=(barrier,)) for target in targets]
    for t in threads:
        t.start()
    barrier.wait(timeout=300)
    started = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - started


def depth_drift() -> int:
    """Kept depth minus a real count of waiting items (0 when the services kept it right)."""
    from reviewqueue.models import Queue, ReviewItem

    waiting = ReviewItem.objects.filter(status__in=ReviewItem.WAITING).count()
    return Queue.default().depth - waiting


def verify(logs: list[ClientLog], baseline_seeded: int) -> dict[str, int]:
    """Double claims, lost verdicts and leftovers, read from the database."""
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
    baseline = [item for log in logs for item in log.baseline_items]
    session = [item for log in logs for item in log.session_items]
    return {
        "double_claims": double + foreign,
        "lost_verdicts": lost,
        "verdicts": len(stored),
        "client_verdicts": sum(len(log.decided) for log in logs),
        "baseline_twice": len(baseline) - len(set(baseline)),
        "baseline_missed": baseline_seeded - len(set(baseline)),
        "session_twice": len(session) - len(set(session)),
        "session_missed": baseline_seeded - len(set(session)),
        "left_waiting": ReviewItem.objects.filter(status__in=ReviewItem.WAITING).count(),
    }


@dataclass
class Rounds:
    """Per-round rates of both sides and the depth drift seen after real rounds."""

    real: list[float] = field(default_factory=list)
    session: list[float] = field(default_factory=list)
    baseline: list[float] = field(default_factory=list)
    drift: list[int] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)


def run_rounds(base: str, logs: list[ClientLog], items: int, rounds: int) -> Rounds:
    """Log every client in, then real and baseline rounds in turn on fresh items."""
    clients = [httpx.Client(base_url=base, timeout=60) for _ in logs]
    try:
        headers = [login(client, log.username) for client, log in zip(clients, logs, strict=True)]
        result = Rounds()
        for n in range(rounds):
            seed_items(items, f"real-{n}")
            before = sum(len(log.decided) for log in logs)
            elapsed = timed_round(
                [
                    (lambda b, c=c, h=h, log=log: reviewer_loop(c, h, log, b))
                    for c, h, log in zip(clients, headers, logs, strict=True)
                ]
            )
            result.real.append((sum(len(log.decided) for log in logs) - before) / elapsed)
            result.drift.append(depth_drift())
            seed_items(items, f"sess-{n}")
            before = sum(len(log.session_items) for log in logs)
            elapsed = timed_round(
                [
                    (lambda b, c=c, h=h, log=log: session_baseline_loop(c, h, log, b))
                    for c, h, log in zip(clients, headers, logs, strict=True)
                ]
            )
            result.session.append((sum(len(log.session_items) for log in logs) - before) / elapsed)
            seed_items(items, f"base-{n}")
            before = sum(len(log.baseline_items) for log in logs)
            elapsed = timed_round(
                [(lambda b, c=c, log=log: baseline_loop(c, log, b)) for c, log in zip(clients, logs, strict=True)]
            )
            result.baseline.append((sum(len(log.baseline_items) for log in logs) - before) / elapsed)
            result.loads.append(os.getloadavg()[0])
        from reviewqueue.services import reconcile_depth

        reconcile_depth()  # the baseline moved items behind the kept depth's back
        return result
    finally:
        for client in clients:
            client.close()


def report(args: argparse.Namespace, result: Rounds, logs: list[ClientLog], checks: dict[str, int]) -> float:
    """Print the rounds, the ratio, the latencies and the checks; returns the ratio."""
    print(
        f"reviewer over HTTP, one request per decision: {args.clients} clients, gunicorn -w {args.workers}, "
        f"{args.rounds} rounds x {args.items} items per side, PostgreSQL, {conn_max_age_label(args.conn_max_age)}"
    )
    ratio = print_rounds("real", result.real, "session baseline", result.session, "decisions/s")
    print(f"  ratio of medians, real / session baseline (1 SELECT + 1 UPDATE): {ratio:.2f}   (goal >= 0.25)")
    bare = print_rounds("real", result.real, "bare baseline", result.baseline, "decisions/s")
    print(f"  ratio of medians, real / bare baseline (no session): {bare:.2f}")
    loads = ", ".join(f"{load:.1f}" for load in result.loads)
    print(f"  load average (1 min) after each round: {loads}")
    for kind in ("decide", "session", "baseline"):
        values = [x for log in logs for x in log.latencies[kind]]
        p50, p95 = percentile(values, 50), percentile(values, 95)
        print(f"  {kind:8s} latency    p50 {p50 * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms   ({len(values)} requests)")
    decided = checks["client_verdicts"]
    print(f"  double claims        {checks['double_claims']:8d}")
    print(f"  lost verdicts        {checks['lost_verdicts']:8d}   ({checks['verdicts']} stored, {decided} seen)")
    print(f"  kept depth drift     {max(map(abs, result.drift), default=0):8d}   (after each real round)")
    print(f"  baseline twice/missed {checks['baseline_twice']:7d} / {checks['baseline_missed']}")
    print(f"  session  twice/missed {checks['session_twice']:7d} / {checks['session_missed']}")
    print(f"  left in the queue    {checks['left_waiting']:8d}")
    errors = [e for log in logs for e in log.errors]
    if errors:
        print(f"  client errors        {len(errors):8d}   first: {errors[0]}")
    return ratio


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Seed, serve, review in interleaved rounds, verify; returns the figures."""
    with scratch_database(args.database) as url:
        setup_django(url)
        from django.db import connections

        try:
            logs = seed_reviewers(args.clients)
            connections.close_all()
            port = free_port()
            log_path = os.path.join(tempfile.mkdtemp(prefix="rq-bench-http-"), "gunicorn.log")
            server = start_server(
                url, port, log_path, workers=args.workers, conn_max_age=args.conn_max_age, settings_module=SETTINGS
            )
            try:
                result = run_rounds(f"http://127.0.0.1:{port}", logs, args.items, args.rounds)
            finally:
                stop_server(server)
            checks = verify(logs, args.items * args.rounds)
            ratio = report(args, result, logs, checks)
        finally:
            connections.close_all()
    keys = ("double_claims", "lost_verdicts", "baseline_twice", "baseline_missed", "session_twice", "session_missed")
    bad = [checks[k] for k in (*keys, "left_waiting")]
    bad += [max(map(abs, result.drift), default=0), sum(len(log.errors) for log in logs)]
    return {"ratio": ratio, "ok": not any(bad), **checks}


def main() -> None:
    """Parse the sizes and run once; exit 1 if any check failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=150, help="items per round per side")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--database", default="rq_bench_http")
    parser.add_argument(
        "--conn-max-age", type=int, default=None, help="DB_CONN_MAX_AGE for the server (default: the settings')"
    )
    args = parser.parse_args()
    sys.exit(0 if run(args)["ok"] else 1)


if __name__ == "__main__":
    main()
