"""Gold copies beside the cases the classifier tests do not draw: a copy of a
version-2 gold item reads exactly as a real version 2 (the card's header,
the item page's header and "Follows" row, the history block and its diff),
and a copy is shown only to someone who sees real items the same way: never
to an operator reviewing (whose pages show them what an item is), and never
placed in a queue nobody else reviews, where it would only wait."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from reviewqueue import services
from reviewqueue.models import Queue, ReviewItem
from reviewqueue.services import review_quality

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def _send_backs_final_at_once(settings: Any) -> None:
    """A revision follows only a final send-back (reviewqueue/finality.py):
    with no undo window, the revisions these tests build follow at once."""
    settings.REVIEWQUEUE_UNDO_SECONDS = 0


def shape(html: str) -> str:
    html = re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", html)
    html = re.sub(r'"X-CSRFToken": "[^"]*"', "", html)
    return re.sub(r"\d+", "#", html)


def card(html: str) -> str:
    found = re.search(r'<section id="card".*?\n</section>', html, re.DOTALL)
    assert found is not None, html[:300]
    return shape(found.group(0))


def article(html: str) -> str:
    found = re.search(r"<article.*?</article>", html, re.DOTALL)
    assert found is not None, html[:300]
    return shape(found.group(0))


def revision(admit_item: Callable[..., Any], ann: User, n: int) -> ReviewItem:
    """Version 1 of task ``n``, sent back by ann, and its version 2 (waiting)."""
    v1 = admit_item(task_description=f"Write the parser for format {n}", final_output=f"def parse_{n}(t):\n    pass\n")
    assert services.claim(reviewer=ann).pk == v1.item.pk
    services.send_back(item_id=v1.item.pk, reviewer=ann, note=f"handle format {n} too")
    return admit_item(
        task_description=f"Write the parser for format {n}",
        final_output=f"def parse_{n}(t):\n    return t.split()\n",
        previous_version=v1.item,
    ).item


def test_a_copy_of_a_version_2_gold_item_reads_exactly_as_a_real_version_2(
    admit_item: Callable[..., Any], make_user: Callable[..., User], operator: User
) -> None:
    ann, rita = make_user("ann", "reviewer"), make_user("rita", "reviewer")
    services.policy_update(user=None, changes={"gold_rate": 0, "double_review_rate": 0, "sampling_rate": 0})
    source = revision(admit_item, ann, 1)
    assert services.claim(reviewer=ann).pk == source.pk
    services.decide(item_id=source.pk, reviewer=ann, approve=True)
    services.mark_gold(item_id=source.pk, operator=operator, expected_decision="approve")
    services.policy_update(user=None, changes={"gold_rate": 1.0})
    real = revision(admit_item, ann, 2)  # its copy is placed beside it
    mine = Client()
    mine.force_login(rita)
    seen: dict[bool, tuple[str, str]] = {}
    for _ in range(2):
        served = mine.post(reverse("review:next"), **HX).content.decode()
        item = services.current_claim(reviewer=rita)
        assert item is not None
        mine.post(reverse("review:decide", args=[item.pk]), {"decision": "approve"}, **HX)
        opened = mine.get(reverse("review_item", args=[item.pk])).content.decode()
        seen[item.gold_id is not None] = (card(served), article(opened))
    assert set(seen) == {True, False}, "one copy and the real version 2 were served"
    assert real.version == 2
    copy_card, copy_page = seen[True]
    real_card, real_page = seen[False]
    assert "version #" in real_card and "Follows" in real_page and "· version #" in real_page
    assert copy_card == real_card
    assert copy_page == real_page


def test_an_operator_reviewing_is_never_served_a_copy_and_the_reviewers_are(
    admit_item: Callable[..., Any], make_user: Callable[..., User], operator: User
) -> None:
    ann, rita = make_user("ann", "reviewer"), make_user("rita", "reviewer")
    services.policy_update(user=None, changes={"gold_rate": 0, "double_review_rate": 0, "sampling_rate": 0})
    for n in range(3):
        admit_item(task_description=f"source {n}")
        held = services.claim(reviewer=ann)
        services.decide(item_id=held.pk, reviewer=ann, approve=True)
        services.mark_gold(item_id=held.pk, operator=operator, expected_decision="approve")
    services.policy_update(user=None, changes={"gold_rate": 1.0})
    for n in range(3):
        admit_item(task_description=f"real {n}")
    assert ReviewItem.all_objects.filter(gold__isnull=False, status=ReviewItem.Status.PENDING).count() == 3
    served = []
    while (item := services.claim(reviewer=operator)) is not None:
        served.append(item.gold_id)
        services.decide(item_id=item.pk, reviewer=operator, approve=True)
    assert served == [None, None, None]
    copies = []
    while (item := services.claim(reviewer=rita)) is not None:
        copies.append(item.gold_id is not None)
        services.decide(item_id=item.pk, reviewer=rita, approve=True)
    assert copies == [True, True, True]


def test_no_copy_is_placed_in_a_queue_only_operators_review(
    admit_item: Callable[..., Any], make_user: Callable[..., User], operator: User
) -> None:
    ann = make_user("ann", "reviewer")
    services.policy_update(user=None, changes={"gold_rate": 0, "double_review_rate": 0, "sampling_rate": 0})
    admit_item(task_description="source")
    held = services.claim(reviewer=ann)
    services.decide(item_id=held.pk, reviewer=ann, approve=True)
    services.mark_gold(item_id=held.pk, operator=operator, expected_decision="approve")
    services.policy_update(user=None, changes={"gold_rate": 1.0})
    default = Queue.default()
    services.set_reviewers(queue=default, user=None, open_to_all=False, members=[operator], groups=[])
    review_quality.forget_gold_settings()
    admit_item(task_description="real, only the operator reviews it")
    assert not ReviewItem.all_objects.filter(gold__isnull=False).exists()
    assert Queue.objects.get(pk=default.pk).gold_waiting == 0
    services.set_reviewers(queue=default, user=None, open_to_all=False, members=[operator, ann], groups=[])
    review_quality.forget_gold_settings()
    admit_item(task_description="real, ann reviews it too")
    assert ReviewItem.all_objects.filter(gold__isnull=False).count() == 1


def test_a_copy_of_a_gold_item_sent_back_and_revised_does_not_show_the_revision_that_followed_it(
    admit_item: Callable[..., Any], make_user: Callable[..., User], operator: User
) -> None:
    """A real item is followed by a version 2 only after it is sent back, and
    later; a copy of a gold item whose send-back brought one must not show it."""
    ann, rita = make_user("ann", "reviewer"), make_user("rita", "reviewer")
    services.policy_update(user=None, changes={"gold_rate": 0, "double_review_rate": 0, "sampling_rate": 0})
    v2 = revision(admit_item, ann, 1)
    assert services.claim(reviewer=ann).pk == v2.pk
    services.decide(item_id=v2.pk, reviewer=ann, approve=True)
    source = v2.previous_version
    services.mark_gold(item_id=source.pk, operator=operator, expected_decision="reject")
    services.policy_update(user=None, changes={"gold_rate": 1.0})
    admit_item(task_description="Write the parser for format 2", final_output="def parse_2(t):\n    pass\n")
    mine = Client()
    mine.force_login(rita)
    pages: dict[bool, str] = {}
    while (item := services.claim(reviewer=rita)) is not None:
        services.decide(item_id=item.pk, reviewer=rita, approve=True)
        pages[item.gold_id is not None] = article(mine.get(reverse("review_item", args=[item.pk])).content.decode())
    assert set(pages) == {True, False}
    assert "Followed by" not in pages[True]
    assert pages[True] == pages[False]


def test_copies_waiting_leave_a_queue_once_nobody_could_be_shown_them(
    admit_item: Callable[..., Any], make_user: Callable[..., User], operator: User
) -> None:
    ann = make_user("ann", "reviewer")
    services.policy_update(user=None, changes={"gold_rate": 0, "double_review_rate": 0, "sampling_rate": 0})
    admit_item(task_description="source")
    held = services.claim(reviewer=ann)
    services.decide(item_id=held.pk, reviewer=ann, approve=True)
    services.mark_gold(item_id=held.pk, operator=operator, expected_decision="approve")
    services.policy_update(user=None, changes={"gold_rate": 1.0})
    admit_item(task_description="real")
    default = Queue.default()
    assert Queue.objects.get(pk=default.pk).gold_waiting == 1
    ann.groups.clear()  # the last reviewer who could be shown it loses the role
    assert not ReviewItem.all_objects.filter(gold__isnull=False).exists()
    assert Queue.objects.get(pk=default.pk).gold_waiting == 0
    assert Queue.objects.get(pk=default.pk).waiting == 1  # the real item, which the operator reviews
