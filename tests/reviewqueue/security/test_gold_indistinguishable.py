"""A reviewer cannot tell a gold copy from a real item by what the pages show
them (ARCHITECTURE.md rule 11: gold measures the reviewer, who must not know
when they are measured).

A reviewer works through a loop-fed queue where gold is served half the
time. For each item served they see: the card it came on, the card and the
panel (their recent verdicts, the queue) after their verdict, the item's
own page, and what another reviewer is told who then tries to decide it. A classifier trained on half of the items (each
view reduced to its shape: digits, which carry ids, counts and ages, are
masked, and so is the CSRF token) predicts the other half. It must do no
better than always guessing the more common kind, within that guess's 95 %
interval.

Not covered here: the numbers themselves. A copy's id and the waiting
counts around it are masked above, because a copy is still created when it
is served (a fresh id) and is not counted as waiting.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from reviewqueue import services
from reviewqueue.models import LoopRun, ReviewItem

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

HX = {"HTTP_HX_REQUEST": "true"}
SOURCES = 75
REAL = 75
ENOUGH = 50


def loop_fed(admit_item: Callable[..., Any], n: int, kind: str) -> ReviewItem:
    """An item cut off by one of our loops, with its run, as every item of a loop-fed queue has."""
    item = admit_item(
        task_description=f"Write the parser for format {n}",
        final_output=f"def parse_{n}(text):\n    return text.split()\n",
        cutoff_reason="step_limit",
        last_error="AssertionError:check_2",
        attempt_count=5,
        source_run_id=f"{kind}-{n}",
        producer="loop:nightly",
    ).item
    LoopRun.objects.create(
        run_id=f"nightly-{kind}-{n}", task_id=f"parse-{n}", task={}, item=item, outcome="cut_off", attempts=5
    )
    return item


def shape(html: str) -> str:
    """The part's shape: CSRF tokens, and digits (ids, counts, ages), masked."""
    html = re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", html)
    html = re.sub(r'"X-CSRFToken": "[^"]*"', "", html)
    html = re.sub(r"(sources|real)-", "kind-", html)  # the test's own run names
    html = re.sub(r"\bitems?\b", "item", html)  # "1 item waiting", "2 items waiting"
    return re.sub(r"\d+", "#", html)


def card(html: str) -> str:
    found = re.search(r'<section id="card".*?\n</section>', html, re.DOTALL)
    assert found is not None, html[:300]
    return shape(found.group(0))


def panel(html: str, item_id: int) -> str:
    """The context panel after a verdict: whether the item heads the
    reviewer's recent verdicts, and the rest of the panel's shape (the list's
    length and the pace grow with the session, whatever the items were)."""
    found = re.search(r'<aside id="context".*?</aside>', html, re.DOTALL)
    assert found is not None
    aside = found.group(0)
    recent = re.findall(r'<a href="/review/items/(\d+)/">', aside)
    heads = bool(recent) and recent[0] == str(item_id)
    aside = re.sub(r'<ol class="recent">.*?</ol>', "", aside, flags=re.DOTALL)
    aside = re.sub(r"<h#>Your pace</h#>.*?<h#>", "", shape(aside), flags=re.DOTALL)
    return f"{heads} {aside}"


def page(html: str) -> str:
    found = re.search(r"<article.*?</article>", html, re.DOTALL)
    assert found is not None
    return shape(found.group(0))


def notice(html: str) -> str:
    return " | ".join(re.findall(r'<p class="notice notice-\w+">(.*?)</p>', html, re.DOTALL))


def majority_accuracy(rows: list[tuple[tuple[str, ...], bool]]) -> tuple[float, float, int]:
    """Train on even rows (the majority kind for each seen shape), test on odd
    rows; answers the accuracy, the constant guess's accuracy and the test size."""
    train, test = rows[::2], rows[1::2]
    by_shape: dict[tuple[str, ...], Counter[bool]] = defaultdict(Counter)
    for features, is_copy in train:
        by_shape[features][is_copy] += 1
    overall = Counter(is_copy for _, is_copy in train).most_common(1)[0][0]
    right = 0
    for features, is_copy in test:
        seen = by_shape.get(features)
        guess = seen.most_common(1)[0][0] if seen else overall
        right += guess == is_copy
    base = Counter(is_copy for _, is_copy in test)
    chance = max(base.values()) / len(test)
    return right / len(test), chance, len(test)


def test_a_classifier_over_what_a_reviewer_sees_does_no_better_than_chance(
    admit_item: Callable[..., Any], make_user: Callable[..., User], operator: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    ann, rita, ben = (make_user(name, "reviewer") for name in ("ann", "rita", "ben"))
    services.policy_update(
        user=None, changes={"gold_rate": 0, "double_review_rate": 0, "sampling_rate": 0, "capacity": 1000}
    )
    for n in range(SOURCES):
        source = loop_fed(admit_item, n, "sources")
        assert services.claim(reviewer=ann).pk == source.pk
        services.decide(item_id=source.pk, reviewer=ann, approve=True)
        services.mark_gold(item_id=source.pk, operator=operator, expected_decision="approve")
    for n in range(SOURCES, SOURCES + REAL):
        loop_fed(admit_item, n, "real")
    services.policy_update(user=None, changes={"gold_rate": 0.5})
    monkeypatch.setattr("reviewqueue.services.review_quality._rng", random.Random(24))

    mine, other = Client(), Client()
    mine.force_login(rita)
    other.force_login(ben)
    rows: list[tuple[tuple[str, ...], bool]] = []
    while True:
        served = mine.post(reverse("review:next"), **HX).content.decode()
        item = services.current_claim(reviewer=rita)
        if item is None:
            break
        after = mine.post(reverse("review:decide", args=[item.pk]), {"decision": "approve"}, **HX).content.decode()
        opened = mine.get(reverse("review_item", args=[item.pk])).content.decode()
        told = other.post(reverse("review:decide", args=[item.pk]), {"decision": "approve"}, **HX).content.decode()
        views = (card(served), card(after), panel(after, item.pk), page(opened), shape(notice(told)))
        rows.append((views, item.gold_id is not None))
    copies = sum(is_copy for _, is_copy in rows)
    left = Counter(ReviewItem.objects.values_list("status", "lease_holder__username"))
    assert copies >= ENOUGH and len(rows) - copies >= ENOUGH, (copies, len(rows) - copies, left)

    for view in range(len(rows[0][0])):  # each view alone, then all of them together
        accuracy, chance, n = majority_accuracy([((features[view],), is_copy) for features, is_copy in rows])
        assert accuracy <= chance + 1.96 * math.sqrt(chance * (1 - chance) / n), ("view", view, accuracy, chance)
    accuracy, chance, n = majority_accuracy(rows)
    assert accuracy <= chance + 1.96 * math.sqrt(chance * (1 - chance) / n), (accuracy, chance)
