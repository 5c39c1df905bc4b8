"""The item list at scale: a filtered page of /ops/items/ at 1,000,000 items
against the same page at 10,000.

    .venv/bin/python bench/bench_items.py [--large 1000000] [--small 10000] [--repeat 30]
                                          [--db-prefix rq_bench_items]

Two scratch PostgreSQL databases are seeded with set-based SQL (``INSERT ...
SELECT generate_series``) in the same proportions: items over the last 30
days in four queues, three in five decided (approved or rejected, with a
verdict), one in five pending, the rest shed; every task names one of five
subjects, so a word search matches the same share at both sizes. Both are
migrated (so the keyset indexes and the full-text index of migration 0016
exist) and analysed. The operator's browser requests are then timed through
Django's test Client, interleaved round by round:

- ``first page``: ``GET /ops/items/?queue=q1&status=approved&q=invoice``
- ``next page``: the same filter, ``after`` the first page's cursor (the
  "Older" link)
- ``deep page``: the same filter, ``after`` a cursor half-way down the list
- ``api page``: ``GET /api/items?status=approved&q=invoice`` with a producer's token
- ``history``: ``GET /review/history/`` for the reviewer who gave every
  verdict (three in five items), and ``new history`` / ``new history q``
  (``?q=invoice``) for a reviewer with 30 answers of their own, on the oldest
  decided items: the sparse case, where a list driven by the items rather
  than by the reviewer's answers walks the whole table
- ``rare page`` and ``rare history``: ``?q=zebra``, a word in three items
  half-way down (decided by the first reviewer), on the item list and in
  that reviewer's history: where walking the keyset index and testing each
  row for the word would cross most of the table

Prints the median of each at both sizes and their ratio (goal <= 1.5), and
writes ``EXPLAIN (ANALYZE, BUFFERS)`` of the first page's list query on the
large database to ``bench/plans/items_page.txt``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import statistics
import time
from pathlib import Path
from typing import Any

from benchlib import ROOT, scratch_database, setup_django

PLANS = Path(os.environ.get("BENCH_PLANS_DIR", ROOT / "bench" / "plans"))
QUEUES = ("q0", "q1", "q2", "q3")
FILTER = {"queue": "q1", "status": "approved", "q": "invoice"}
API_FILTER = {"status": "approved", "q": "invoice"}

SEED_ITEMS = """
INSERT INTO reviewqueue_reviewitem (
    task_id, task_kind, task_description, final_output, output_truncated, last_error, attempt_count,
    cutoff_reason, label, draft, priority, status, lease_expiries, source_run_id, producer,
    idempotency_key, filter_reason, reviewed_attempt, failing_checks, created_at, updated_at, decided_at, queue_id
)
SELECT 'task-' || g, 'code',
       'Fix the ' || (ARRAY['invoice', 'ledger', 'parser', 'cache', 'router'])[1 + mod(g / 4, 5)]
           || ' module (task ' || g || ')',
       'def handle(x):\n    return x  # attempt ' || g, false, 'AssertionError:check_2', 5,
       'step_limit', 'unverified', false, mod(g, 3),
       CASE WHEN mod(g, 5) < 2 THEN 'approved' WHEN mod(g, 5) = 2 THEN 'rejected'
            WHEN mod(g, 5) = 3 THEN 'pending' ELSE 'shed' END,
       0, 'run-' || mod(g, 1000), 'producer-' || mod(g, 7),
       'key-' || g, '', 0, '', t, t, CASE WHEN mod(g, 5) < 3 THEN t + interval '5 minutes' END,
       (%(queues)s::bigint[])[1 + mod(g, 4)]
FROM (SELECT g, now() - interval '30 days' * (1 - g::float / %(n)s) AS t FROM generate_series(1, %(n)s) AS g) AS s
"""
SEED_VERDICTS = """
INSERT INTO reviewqueue_verdict (item_id, reviewer_id, decision, reason_label, note, counts_for_tuner, created_at,
                                 queue_id, edited_output, settled_by)
SELECT id, %(reviewer)s, CASE WHEN status = 'approved' THEN 'approve' ELSE 'reject' END,
       CASE WHEN status = 'approved' THEN '' ELSE 'code_error' END, '', true, decided_at, queue_id, '', 'reviewer'
FROM reviewqueue_reviewitem WHERE status IN ('approved', 'rejected')
"""

# A new reviewer's 30 answers, on the oldest decided items.
SEED_NEW_REVIEWER = """
UPDATE reviewqueue_verdict SET reviewer_id = %(reviewer)s
WHERE item_id IN (SELECT item_id FROM reviewqueue_verdict ORDER BY item_id LIMIT 30)
"""

# Three decided items half-way down name a word no other item has.
SEED_RARE_WORD = """
UPDATE reviewqueue_reviewitem SET task_description = 'Fix the zebra module (task ' || id || ')'
WHERE id IN (SELECT id FROM reviewqueue_reviewitem WHERE status IN ('approved', 'rejected')
             ORDER BY id OFFSET %(half)s LIMIT 3)
"""


def seed(n: int) -> float:
    """Queues, an operator, a reviewer, a producer's token, n items; returns seconds."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from reviewqueue.access import ensure_groups
    from reviewqueue.models import Queue, ReviewItem
    from reviewqueue.tokens import issue_token

    started = time.perf_counter()
    groups = ensure_groups()
    users = get_user_model().objects
    users.create(username="otto").groups.add(groups["operator"])
    rita = users.create(username="rita")
    rita.groups.add(groups["reviewer"])
    newbie = users.create(username="nina")
    newbie.groups.add(groups["reviewer"])
    queues = [Queue.objects.create(slug=slug, name=slug.upper(), open_to_all=True, capacity=10**7) for slug in QUEUES]
    _, plain = issue_token(name="producer-3", scopes=["outputs"])
    Path(os.environ["REVIEWQUEUE_VAR_DIR"], "bench_items_token").write_text(plain)
    # The full-text index is built after the rows, as a restore would: a
    # million GIN insertions one by one take many times longer.
    search = importlib.import_module("reviewqueue.migrations.0016_item_search").search_index()
    with connection.schema_editor() as editor:
        editor.remove_index(ReviewItem, search)
    with connection.cursor() as cursor:
        cursor.execute(SEED_ITEMS, {"n": n, "queues": [q.pk for q in queues]})
        cursor.execute(SEED_VERDICTS, {"reviewer": rita.pk})
        cursor.execute(SEED_NEW_REVIEWER, {"reviewer": newbie.pk})
        cursor.execute(SEED_RARE_WORD, {"half": n * 3 // 10})  # half of the decided
    with connection.schema_editor() as editor:
        editor.add_index(ReviewItem, search)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    return time.perf_counter() - started


def load_average_text() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def use_database(name: str) -> None:
    from django.db import connection

    connection.close()
    connection.settings_dict["NAME"] = name


class Pages:
    """The timed requests on whichever database is current."""

    def __init__(self, token: str) -> None:
        from django.contrib.auth import get_user_model
        from django.test import Client

        from reviewqueue.models import ReviewItem
        from reviewqueue.selectors.items import encode_cursor

        self.client = Client()
        self.client.force_login(get_user_model().objects.get(username="otto"))
        self.reviewers = {}
        for name in ("rita", "nina"):
            self.reviewers[name] = Client()
            self.reviewers[name].force_login(get_user_model().objects.get(username=name))
        self.headers = {"Authorization": f"Bearer {token}"}
        self.next_cursor = self._cursor(self.first_page())
        middle = ReviewItem.objects.order_by("-created_at", "-pk")[ReviewItem.objects.count() // 2]
        self.deep_cursor = encode_cursor(middle)

    @staticmethod
    def _cursor(body: str) -> str:
        found = re.search(r"after=([A-Za-z0-9_-]+)\" rel=\"next\"", body)
        assert found, "the first page has no Older link"
        return found.group(1)

    def _get(self, extra: dict[str, str]) -> str:
        response = self.client.get("/ops/items/", {**FILTER, **extra})
        assert response.status_code == 200, response.status_code
        body = response.content.decode()
        assert body.count('<tr id="item-') == 50, "a full page"
        return body

    def first_page(self) -> str:
        return self._get({})

    def next_page(self) -> str:
        return self._get({"after": self.next_cursor})

    def deep_page(self) -> str:
        return self._get({"after": self.deep_cursor})

    def api_page(self) -> str:
        response = self.client.get("/api/items", API_FILTER, headers=self.headers)
        assert response.status_code == 200, response.status_code
        assert response.json()["items"], "a page of items"
        return ""

    def _history(self, who: str, rows: int, query: dict[str, str]) -> str:
        response = self.reviewers[who].get("/review/history/", query)
        assert response.status_code == 200, response.status_code
        body = response.content.decode()
        assert body.count('<tr id="item-') == rows, f"{who}'s history shows {rows} rows"
        return body

    def history(self) -> str:
        return self._history("rita", 50, {})

    def new_history(self) -> str:
        return self._history("nina", 30, {})

    def new_history_q(self) -> str:
        return self._history("nina", 8, {"q": "invoice"})

    def rare_page(self) -> str:
        response = self.client.get("/ops/items/", {"q": "zebra"})
        assert response.status_code == 200, response.status_code
        assert response.content.decode().count('<tr id="item-') == 3, "the three items with the word"
        return ""

    def rare_history(self) -> str:
        return self._history("rita", 3, {"q": "zebra"})


ORDER = (
    "first_page",
    "next_page",
    "deep_page",
    "api_page",
    "history",
    "new_history",
    "new_history_q",
    "rare_page",
    "rare_history",
)


def measure(names: dict[str, str], tokens: dict[str, str], repeat: int) -> dict[str, dict[str, float]]:
    pages = {}
    for size, db in names.items():
        use_database(db)
        pages[size] = Pages(tokens[size])
    samples: dict[str, dict[str, list[float]]] = {size: {a: [] for a in ORDER} for size in names}
    for r in range(repeat + 3):
        for size in names if r % 2 == 0 else reversed(list(names)):
            use_database(names[size])
            for action in ORDER:
                start = time.perf_counter()
                getattr(pages[size], action)()
                if r >= 3:  # the first rounds warm caches, templates and connections
                    samples[size][action].append(time.perf_counter() - start)
    return {size: {a: statistics.median(v) for a, v in per.items()} for size, per in samples.items()}


def write_plan(n: int) -> None:
    from django.db import connection

    from reviewqueue.item_filters import ItemFilterForm
    from reviewqueue.models import Queue, ReviewItem
    from reviewqueue.selectors.items import matching

    form = ItemFilterForm(FILTER, queues=Queue.objects.all())
    assert form.is_valid(), form.errors
    rows = matching(ReviewItem.objects.all(), form.item_filter()).order_by("-created_at", "-pk")[:51]
    sql, params = rows.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    PLANS.mkdir(exist_ok=True)
    shown = sql % tuple(f"'{p}'" for p in params)
    (PLANS / "items_page.txt").write_text(f"-- items page: {n:,} items; PostgreSQL\n{shown}\n\n{plan}\n")


def run(large: int, small: int, repeat: int, prefix: str) -> dict[str, Any]:
    sizes = {"small": small, "large": large}
    names = {size: f"{prefix}_{size}" for size in sizes}
    tokens: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        urls = {size: stack.enter_context(scratch_database(names[size])) for size in sizes}
        setup_django(urls["small"])
        from django.core.management import call_command
        from django.db import connections

        try:
            for size, n in sizes.items():
                use_database(names[size])
                call_command("migrate", verbosity=0, interactive=False)
                print(f"seeded {size}: {n:,} items in {seed(n):.1f} s")
                tokens[size] = Path(os.environ["REVIEWQUEUE_VAR_DIR"], "bench_items_token").read_text()
            medians = measure(names, tokens, repeat)
            use_database(names["large"])
            write_plan(large)
        finally:
            connections.close_all()
    print(f"item list, filter {FILTER} (median of {repeat}, interleaved); load {load_average_text()}")
    ratios = {}
    for action in ORDER:
        base, value = medians["small"][action], medians["large"][action]
        ratios[action] = value / base
        flag = "ok" if ratios[action] <= 1.5 else "OVER 1.5"
        print(
            f"  {action:13s} {small:>9,}: {base * 1000:7.2f} ms   {large:>9,}: {value * 1000:7.2f} ms"
            f" ({ratios[action]:4.2f}x)  {flag}"
        )
    print(f"  plan written to {PLANS}/items_page.txt")
    return {"medians": medians, "ratios": ratios}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--db-prefix", default="rq_bench_items")
    args = parser.parse_args()
    run(args.large, args.small, args.repeat, args.db_prefix)


if __name__ == "__main__":
    main()
