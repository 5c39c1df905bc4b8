"""Keypress -> next card for one reviewer with a long history of their own
answers: the browser flow of tests/browser/test_review_latency.py, after
seeding ``REVIEWQUEUE_KEYPRESS_HISTORY`` decided items (default 100,000),
each with a verdict by the reviewer, set-based in SQL as bench_scale seeds
them. bench_keypress.py runs it (``--history``) on PostgreSQL:

    .venv/bin/python bench/bench_keypress.py --history 100000 --only postgresql

It is a bench, not a test: it asserts that every decision was recorded and
measured, never a time, and prints p50 and p95.
"""

from __future__ import annotations

import os
import statistics
from typing import Any

import pytest
from bench_scale import SEED_ITEMS, SEED_VERDICTS
from django.db import connection

from reviewqueue.models import Queue, Verdict
from tests.browser.helpers import card_item, start, wait_for_card_change
from tests.browser.test_review_latency import PROBE

pytestmark = pytest.mark.usefixtures("transactional_db")

HISTORY = int(os.environ.get("REVIEWQUEUE_KEYPRESS_HISTORY", "100000"))
DECISIONS = int(os.environ.get("REVIEWQUEUE_LATENCY_DECISIONS", "40"))


def test_keypress_to_next_card_with_a_long_history(page: Any, login: Any, make_user: Any, admit_item: Any) -> None:
    from django.core.cache import cache

    cache.clear()  # a fresh sign-in budget
    rita = make_user("rita", "reviewer")
    queue = Queue.default()
    Queue.objects.filter(pk=queue.pk).update(capacity=10_000)
    with connection.cursor() as cursor:
        cursor.execute(SEED_ITEMS, {"n": HISTORY, "queue": queue.pk})
        cursor.execute(SEED_VERDICTS, {"reviewer": rita.pk})
        cursor.execute("ANALYZE")
    for _ in range(DECISIONS + 1):
        admit_item()
    login(page, "rita")
    page.evaluate(PROBE)
    start(page)
    for _ in range(DECISIONS):
        current = card_item(page)
        page.keyboard.press("a")
        page.keyboard.press("Enter")
        wait_for_card_change(page, current)

    samples = page.evaluate("window.__decisionMs")
    assert len(samples) == DECISIONS
    assert Verdict.objects.filter(reviewer=rita).count() == DECISIONS + HISTORY
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    print(
        f"\nkeypress -> next card with history, 1 reviewer with {HISTORY} answers, {DECISIONS} decisions: "
        f"p50 {statistics.median(samples):.0f} ms, p95 {cuts[94]:.0f} ms, load {os.getloadavg()[0]:.1f}"
    )
