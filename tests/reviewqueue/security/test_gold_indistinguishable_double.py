"""With double review on, a reviewer still cannot tell a gold copy from a real
item (ARCHITECTURE.md rule 11): a copy goes through the same rounds as a
real item, chosen for a second review by the same rule on its own id.

Three reviewers take turns on a loop-fed queue where a copy is placed beside
every real item admitted (so the two kinds are about as many) and three
items in four are chosen for a second review, so real items and copies
alike often come back for another reviewer, and a disagreement goes to a
third. Each answers as they would
any item: approve mostly, reject sometimes, whatever the item is. For every
answer, what the reviewer who gave it can see: the card it came on, the card
and panel after it, the item's page then and at the end (whose verdict it
shows, and whether it is their own), what the next reviewer is told who
tries to decide it, whether it is listed in the reviewer's history, its id
against the ids served to them before and after, and how the waiting count
moved over their answer. A classifier trained on half of the answers
predicts the other half, each view alone and all together; its accuracy's
Wilson interval (95 % for the family of views) must reach down to the accuracy of always guessing the
more common kind.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from reviewqueue import services
from reviewqueue.models import Judgement, ReviewItem

from .test_gold_indistinguishable import HX, card, loop_fed, notice, numbers, page, panel, shape, told_apart, waiting

pytestmark = [pytest.mark.django_db, pytest.mark.slow, pytest.mark.double_review]

SOURCES = 150
REAL = 80
ENOUGH = 50
GOLD_RATE = 1.0
DOUBLE_REVIEW_RATE = 0.75
APPROVE_SHARE = 0.7


def history_ids(client: Client) -> set[int]:
    """Every item listed in the reviewer's history, following its pages."""
    ids: set[int] = set()
    url = reverse("review:history")
    query = ""
    for _ in range(100):
        html = client.get(f"{url}?{query}" if query else url).content.decode()
        ids.update(int(pk) for pk in re.findall(r'<tr id="item-(\d+)">', html))
        older = re.search(r'<a href="\?([^"]*)" rel="next"', html)
        if older is None:
            return ids
        query = older.group(1).replace("&amp;", "&")
    raise AssertionError("the history's pages never ended")


def whose(html: str, me: str) -> str:
    """The item page's verdict line reduced to whose it is: the reader's own,
    another reviewer's, or none yet; with the page's shape beside it."""
    found = re.search(r'<p class="item-verdict">.*?</p>', html, re.DOTALL)
    if found is None:
        return "none " + page(html)
    line = found.group(0)
    by = re.search(r" by ([\w.@+-]+),", line)
    who = "mine" if by is not None and by.group(1) == me else "someone" if by is not None else "nobody"
    return f"{who} {shape(line.replace(by.group(1), 'NAME') if by else line)}"


def test_with_double_review_on_a_classifier_over_what_a_reviewer_sees_does_no_better_than_chance(
    admit_item: Callable[..., Any], make_user: Callable[..., User], operator: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    ann = make_user("ann", "reviewer")
    team = [make_user(name, "reviewer") for name in ("rita", "ben", "cy")]
    services.policy_update(
        user=None,
        changes={
            "gold_rate": 0,
            "double_review_rate": 0,
            "sampling_rate": 0,
            "capacity": 1000,
            "escalation_delay_minutes": None,  # a disagreement waits for its third reviewer
        },
    )
    for n in range(SOURCES):
        source = loop_fed(admit_item, n, "sources")
        assert services.claim(reviewer=ann).pk == source.pk
        services.decide(item_id=source.pk, reviewer=ann, approve=True)
        services.mark_gold(item_id=source.pk, operator=operator, expected_decision="approve")
    ann.is_active = False  # decided the gold items; reviews no more
    ann.save()
    services.policy_update(user=None, changes={"gold_rate": GOLD_RATE, "double_review_rate": DOUBLE_REVIEW_RATE})
    monkeypatch.setattr("reviewqueue.services.review_quality._rng", random.Random(24))
    for n in range(SOURCES, SOURCES + REAL):
        loop_fed(admit_item, n, "real")

    clients = {}
    for reviewer in team:
        clients[reviewer.pk] = Client()
        clients[reviewer.pk].force_login(reviewer)
    answers = random.Random(8)
    rows: list[dict[str, Any]] = []
    served: dict[int, list[int]] = {reviewer.pk: [] for reviewer in team}
    moved: dict[int, list[int]] = {reviewer.pk: [] for reviewer in team}
    idle = 0
    turn = 0
    while idle < len(team):
        reviewer, nxt = team[turn % len(team)], team[(turn + 1) % len(team)]
        turn += 1
        mine, other = clients[reviewer.pk], clients[nxt.pk]
        count = waiting(mine.get(reverse("review:queue")).content.decode())
        shown = mine.post(reverse("review:next"), **HX).content.decode()
        item = services.current_claim(reviewer=reviewer)
        if item is None:
            idle += 1
            continue
        idle = 0
        before = waiting(shown) if waiting(shown) is not None else count
        approve = answers.random() < APPROVE_SHARE
        choice = {"decision": "approve"} if approve else {"decision": "reject", "reason_label": "unclear"}
        after = mine.post(reverse("review:decide", args=[item.pk]), choice, **HX).content.decode()
        assert before is not None and waiting(after) is not None, after[:300]
        opened = mine.get(reverse("review_item", args=[item.pk])).content.decode()
        told = other.post(reverse("review:decide", args=[item.pk]), {"decision": "approve"}, **HX).content.decode()
        rows.append(
            {
                "reviewer": reviewer,
                "item": item.pk,
                "copy": item.gold_id is not None,
                "views": (
                    card(shown),
                    card(after),
                    panel(after, item.pk),
                    whose(opened, reviewer.username),
                    shape(notice(told)),
                ),
            }
        )
        served[reviewer.pk].append(item.pk)
        moved[reviewer.pk].append(before - waiting(after))
    assert turn < 10 * (SOURCES + REAL) * len(team)

    listed = {reviewer.pk: history_ids(clients[reviewer.pk]) for reviewer in team}
    said = {reviewer.pk: iter(numbers(served[reviewer.pk], moved[reviewer.pk])) for reviewer in team}
    features: list[tuple[tuple[str, ...], bool]] = []
    for row in rows:
        reviewer = row["reviewer"]
        final = clients[reviewer.pk].get(reverse("review_item", args=[row["item"]])).content.decode()
        id_order, count_moved = next(said[reviewer.pk])
        seen = (whose(final, reviewer.username), str(row["item"] in listed[reviewer.pk]), id_order, count_moved)
        features.append(((*row["views"], *seen, f"{id_order} {count_moved}"), row["copy"]))

    copies = {row["item"] for row in rows if row["copy"]}
    reals = {row["item"] for row in rows if not row["copy"]}
    assert len(copies) >= ENOUGH and len(reals) >= ENOUGH, (len(copies), len(reals))

    # Rows alternate between kinds as the turns go round (a real item, then
    # the copy beside it): train and test halves drawn at random instead.
    random.Random(5).shuffle(features)
    names = (
        "card served",
        "card after",
        "panel after",
        "item page after",
        "notice",
        "item page at the end",
        "history",
        "id",
        "waiting count",
        "id and waiting count",
    )
    found = told_apart(features, names)
    assert not found, found

    # Both kinds were often chosen for a second review, some went to a third,
    # and every one was settled: none waits for nobody.
    second = Judgement.objects.filter(round=2).values_list("item_id", flat=True)
    third = Judgement.objects.filter(round=3).values_list("item_id", flat=True)
    for kind in (copies, reals):
        assert len(kind & set(second)) >= len(kind) / 2, (len(kind), len(kind & set(second)))
        assert kind & set(third)
    left = ReviewItem.all_objects.filter(status__in=ReviewItem.WAITING)
    assert not left.exists(), Counter((item.gold_id is not None, item.review_round, item.status) for item in left)
