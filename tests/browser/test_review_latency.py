"""Keypress -> next card, measured in the browser: the README's figures.

Prints p50 and p95 for one reviewer, then for four reviewers deciding at
once. Nothing here asserts a time (the machine's load decides those); the
assertions are that every decision was recorded and measured. Rerun on an
otherwise idle machine with:

    python3 dev.py test tests/browser/test_review_latency.py -s
"""

from __future__ import annotations

import os
import statistics

import pytest

from reviewqueue.models import Judgement, Queue, Verdict
from tests.browser.helpers import card_item, start, wait_for_card_change

pytestmark = pytest.mark.usefixtures("transactional_db")

DECISIONS = int(os.environ.get("REVIEWQUEUE_LATENCY_DECISIONS", "40"))
REVIEWERS = 4

# Milliseconds from the Enter keypress to the next card being swapped in,
# collected in the page by the test (not shipped with the page).
PROBE = """
() => {
  window.__decisionMs = [];
  document.addEventListener('keydown', (e) => { if (e.key === 'Enter') window.__t0 = performance.now(); }, true);
  document.addEventListener('htmx:afterSwap', (e) => {
    if (window.__t0 && e.target.id === 'card') {
      window.__decisionMs.push(performance.now() - window.__t0);
      window.__t0 = null;
    }
  });
}
"""


@pytest.fixture(autouse=True)
def _fresh_login_budget():
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def _room_for_every_item(db):
    # More items than the default capacity: none may be shed before it is decided.
    Queue.current()
    Queue.objects.filter(pk=Queue.default().pk).update(capacity=10_000)


def percentiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return statistics.median(samples), cuts[94]


def test_it_measures_keypress_to_next_card_for_one_reviewer(page, login, make_user, admit_item):
    make_user("rita", "reviewer")
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
    assert Verdict.objects.count() == DECISIONS
    p50, p95 = percentiles(samples)
    print(f"\nkeypress -> next card, 1 reviewer, {DECISIONS} decisions: p50 {p50:.0f} ms, p95 {p95:.0f} ms")


def test_it_measures_keypress_to_next_card_with_four_reviewers_at_once(new_context, login, make_user, admit_item):
    names = [f"reviewer{n}" for n in range(REVIEWERS)]
    for name in names:
        make_user(name, "reviewer")
    per_reviewer = DECISIONS // 2
    for _ in range(REVIEWERS * per_reviewer + REVIEWERS):
        admit_item()
    pages = []
    for name in names:
        page = new_context().new_page()
        login(page, name)
        page.evaluate(PROBE)
        start(page)
        pages.append(page)

    for _ in range(per_reviewer):
        # Each round, all four press Enter before any answer is awaited, so
        # their requests overlap on the server.
        current = [card_item(page) for page in pages]
        for page in pages:
            page.keyboard.press("a")
            page.keyboard.press("Enter")
        for page, item in zip(pages, current, strict=True):
            wait_for_card_change(page, item)

    samples = [ms for page in pages for ms in page.evaluate("window.__decisionMs")]
    assert len(samples) == REVIEWERS * per_reviewer
    # Every keypress recorded one answer: a verdict, or (double review, on by
    # default) an answer that waits for a second reviewer.
    answers = set(Verdict.objects.values_list("item_id", "reviewer_id")) | set(
        Judgement.objects.values_list("item_id", "reviewer_id")
    )
    assert len(answers) == REVIEWERS * per_reviewer
    p50, p95 = percentiles(samples)
    print(
        f"\nkeypress -> next card, {REVIEWERS} reviewers at once, {len(samples)} decisions: "
        f"p50 {p50:.0f} ms, p95 {p95:.0f} ms"
    )
