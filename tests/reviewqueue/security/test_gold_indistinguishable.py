"""A reviewer cannot tell a gold copy from a real item by what the pages show
them (ARCHITECTURE.md rule 11: gold measures the reviewer, who must not know
when they are measured).

A reviewer works through a loop-fed queue where a gold copy is placed
beside half of the real items admitted. For each item served they see: the
card it came on, the card and the panel (their recent verdicts, the queue)
after their verdict, the item's own page, and what another reviewer is told
who then tries to decide it; each view reduced to its shape (digits, which
carry ids, counts and ages, are masked, and so is the CSRF token). Beside
the shapes, the numbers themselves: the item's id against the ids served
before and after it, and how the waiting count moved from the card it came
on to the panel after the verdict. A classifier trained on half of the
items predicts the other half. Its accuracy's Wilson interval (SciPy, 95 % for the family of views)
must reach down to the accuracy of always guessing the more common kind.
"""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from scipy.stats import binomtest

from reviewqueue import services
from reviewqueue.models import LoopRun, ReviewItem

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

HX = {"HTTP_HX_REQUEST": "true"}
SOURCES = 75
REAL = 120
ENOUGH = 50
GOLD_RATE = 0.5


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


def waiting(html: str) -> int | None:
    """The waiting count the part shows, if it shows one."""
    found = re.search(r'class="waiting-count">(\d+)<', html) or re.search(r">(\d+) items? waiting", html)
    return int(found.group(1)) if found else None


def numbers(served: list[int], moved: list[int]) -> list[tuple[str, str]]:
    """What the numbers say of each item served: whether its id is above
    every id served before it and above the next one served (a row written
    when served has the newest id), and how the waiting count moved over its
    verdict."""
    out = []
    for n, pk in enumerate(served):
        above_before = n > 0 and pk > max(served[:n])
        above_next = n + 1 < len(served) and pk > served[n + 1]
        out.append((f"{above_before} {above_next}", str(moved[n])))
    return out


def within_chance(rows: list[tuple[tuple[str, ...], bool]], confidence: float = 0.95) -> tuple[bool, float, float, int]:
    """Whether the classifier's accuracy's Wilson interval (at ``confidence``)
    reaches down to the constant guess's accuracy; with the accuracy, that
    guess's and n."""
    accuracy, chance, n = majority_accuracy(rows)
    low = binomtest(round(accuracy * n), n).proportion_ci(confidence, method="wilson").low
    return low <= chance, accuracy, chance, n


def told_apart(rows: list[tuple[tuple[str, ...], bool]], names: tuple[str, ...]) -> list[tuple[str, float, float, int]]:
    """Each view (named by ``names``, in the rows' feature order) alone, then
    all of them together, that a classifier tells apart beyond chance: the
    view's name, the accuracy, the constant guess's and the test size.

    Every view is a test of its own, so each is held at 95 % for the family
    (Bonferroni: 1 - 0.05 / the number of views): at 95 % each, a dozen views
    of a fair queue would find a "tell" in one run in three or four by chance
    alone, while a real tell (the history, 1.0; the ids, 0.88 against 0.74
    before copies went through the rounds) still stands out."""
    found = []
    views = [(name, [((features[view],), is_copy) for features, is_copy in rows]) for view, name in enumerate(names)]
    confidence = 1 - 0.05 / (len(views) + 1)
    for name, view_rows in [*views, ("all together", rows)]:
        held, accuracy, chance, n = within_chance(view_rows, confidence)
        if not held:
            found.append((name, round(accuracy, 2), round(chance, 2), n))
    return found


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
    services.policy_update(user=None, changes={"gold_rate": GOLD_RATE})
    monkeypatch.setattr("reviewqueue.services.review_quality._rng", random.Random(24))
    for n in range(SOURCES, SOURCES + REAL):
        loop_fed(admit_item, n, "real")

    mine, other = Client(), Client()
    mine.force_login(rita)
    other.force_login(ben)
    rows: list[tuple[tuple[str, ...], bool]] = []
    served_ids: list[int] = []
    moved: list[int] = []
    count = waiting(mine.get(reverse("review:queue")).content.decode())
    while True:
        served = mine.post(reverse("review:next"), **HX).content.decode()
        item = services.current_claim(reviewer=rita)
        if item is None:
            break
        before = waiting(served) if waiting(served) is not None else count
        after = mine.post(reverse("review:decide", args=[item.pk]), {"decision": "approve"}, **HX).content.decode()
        count = waiting(after)
        assert before is not None and count is not None, after[:300]
        opened = mine.get(reverse("review_item", args=[item.pk])).content.decode()
        told = other.post(reverse("review:decide", args=[item.pk]), {"decision": "approve"}, **HX).content.decode()
        views = (card(served), card(after), panel(after, item.pk), page(opened), shape(notice(told)))
        rows.append((views, item.gold_id is not None))
        served_ids.append(item.pk)
        moved.append(before - count)
    rows = [((*views, *seen), is_copy) for (views, is_copy), seen in zip(rows, numbers(served_ids, moved), strict=True)]
    copies = sum(is_copy for _, is_copy in rows)
    left = Counter(ReviewItem.objects.values_list("status", "lease_holder__username"))
    assert copies >= ENOUGH and len(rows) - copies >= ENOUGH, (copies, len(rows) - copies, left)

    names = ("card served", "card after", "panel after", "item page", "notice", "id", "waiting count")
    found = told_apart(rows, names)
    assert not found, found
