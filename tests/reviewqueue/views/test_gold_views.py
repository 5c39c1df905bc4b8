"""What a reviewer is told and shown of a gold copy is what they would be told
and shown of a real item in its place: its fate after their lease ran out,
the verdict another reviewer's answer settled, and their own history."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from reviewqueue import services
from reviewqueue.models import ReviewItem
from reviewqueue.services import review_quality

pytestmark = [pytest.mark.double_review, pytest.mark.django_db]

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def twins(
    admit_item: Callable[..., Any], make_user: Callable[..., Any], operator: Any, settings: Any
) -> tuple[int, int]:
    """A real item and the copy placed beside it, in a queue that reviews every item twice."""
    settings.REVIEWQUEUE_OPERATORS_REVIEW = False
    review_quality.forget_gold_settings()
    services.policy_update(user=None, changes={"gold_rate": 0, "double_review_rate": 0, "capacity": 50})
    dan = make_user("dan", "reviewer")
    source = admit_item().item.pk
    services.claim(reviewer=dan)
    services.decide(item_id=source, reviewer=dan, approve=True)
    services.mark_gold(item_id=source, operator=operator, expected_decision="approve")
    dan.is_active = False
    dan.save()
    services.policy_update(user=None, changes={"gold_rate": 1.0, "double_review_rate": 1.0})
    make_user("ann", "reviewer")  # a copy is placed only where someone could be shown it
    real = admit_item().item.pk
    assert ReviewItem.all_objects.get(pk=real + 1).gold_id is not None
    return real, real + 1


def ann_of() -> Any:
    """ann, made by ``twins`` before the real item arrived."""
    return User.objects.get(username="ann")


def client_of(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_lease_that_ran_out_on_a_copy_is_told_as_on_a_real_item(
    twins: tuple[int, int], make_user: Callable[..., Any]
) -> None:
    ann, ben = ann_of(), make_user("ben", "reviewer")
    told = {}
    for pk, other in ((twins[0], twins[1]), (twins[1], twins[0])):
        assert services.claim(reviewer=ann, exclude=[other]).pk == pk
        ReviewItem.all_objects.filter(pk=pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        assert services.claim(reviewer=ben, exclude=[other]).pk == pk  # ben takes it meanwhile
        html = client_of(ann).post(reverse("review:decide", args=[pk]), {"decision": "approve"}, **HX)
        told[pk] = re.sub(r"\d+", "#", re.search(r"ran out before.*?</p>", html.content.decode()).group(0))
        services.release(item_id=pk, reviewer=ben)
        services.release(item_id=services.current_claim(reviewer=ann).pk, reviewer=ann)
    assert told[twins[0]] == told[twins[1]]
    assert "Another reviewer has it now." in told[twins[1]]


def test_the_verdict_another_reviewer_settled_shows_on_a_copy_as_on_a_real_item(
    twins: tuple[int, int], make_user: Callable[..., Any]
) -> None:
    ann, ben, cy = (ann_of(), make_user("ben", "reviewer"), make_user("cy", "reviewer"))
    pages, notices = {}, {}
    for pk, other in ((twins[0], twins[1]), (twins[1], twins[0])):
        for who, approve in ((ann, True), (ben, True)):
            assert services.claim(reviewer=who, exclude=[other]).pk == pk
            services.decide(item_id=pk, reviewer=who, approve=approve)
        page = client_of(ann).get(reverse("review_item", args=[pk])).content.decode()
        pages[pk] = re.sub(r"\d+", "#", re.search(r'<p class="item-verdict">.*?</p>', page, re.DOTALL).group(0))
        said = client_of(cy).post(reverse("review:decide", args=[pk]), {"decision": "approve"}, **HX)
        notices[pk] = re.sub(
            r"\d+", "#", re.search(r"Item #\d+ was already.*?recorded\.", said.content.decode()).group(0)
        )
        held = services.current_claim(reviewer=cy)  # the next card the refusal came with
        if held is not None:
            services.release(item_id=held.pk, reviewer=cy)
    assert "by ben," in pages[twins[1]]  # the settling answer's reviewer, not ann's own
    assert pages[twins[0]] == pages[twins[1]]
    assert "approved by ben" in notices[twins[1]] and notices[twins[0]] == notices[twins[1]]


def test_a_reviewer_s_history_lists_the_copies_they_answered(
    twins: tuple[int, int], make_user: Callable[..., Any]
) -> None:
    ann, ben = ann_of(), make_user("ben", "reviewer")
    real, copy = twins
    for pk, other in ((real, copy), (copy, real)):
        assert services.claim(reviewer=ann, exclude=[other]).pk == pk
        services.decide(item_id=pk, reviewer=ann, approve=False, reason_label="unclear")
    html = client_of(ann).get(reverse("review:history")).content.decode()
    assert f'<tr id="item-{real}">' in html and f'<tr id="item-{copy}">' in html
    rejected = client_of(ann).get(reverse("review:history"), {"decision": "reject"}).content.decode()
    assert f'<tr id="item-{copy}">' in rejected
    assert f'<tr id="item-{copy}">' not in client_of(ben).get(reverse("review:history")).content.decode()


def test_a_send_back_that_settles_a_copy_is_told_as_on_a_real_item(
    twins: tuple[int, int], make_user: Callable[..., Any]
) -> None:
    services.policy_update(user=None, changes={"double_review_rate": 0})  # one answer settles either
    ann = ann_of()
    told = {}
    for pk, other in ((twins[0], twins[1]), (twins[1], twins[0])):
        assert services.claim(reviewer=ann, exclude=[other]).pk == pk
        said = client_of(ann).post(reverse("review:send_back", args=[pk]), {"note": "name the file"}, **HX)
        told[pk] = re.sub(r"\d+", "#", re.search(r"Sent back item.*?takes it back\.", said.content.decode()).group(0))
        held = services.current_claim(reviewer=ann)
        if held is not None:
            services.release(item_id=held.pk, reviewer=ann)
    assert "its producer gets your note" in told[twins[0]]
    assert told[twins[0]] == told[twins[1]]
