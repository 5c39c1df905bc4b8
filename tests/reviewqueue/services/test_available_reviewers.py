"""Who could take a double review's next round is whom the claim would serve
(ARCHITECTURE.md, "Double review, gold items and reviewer reliability"):
reviewers, and operators while operators review
(``REVIEWQUEUE_OPERATORS_REVIEW``) and may review the queue; never a paused
or inactive user. Users and roles are real (``access.ensure_groups``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from reviewqueue import services
from reviewqueue.forms import QueueMembersForm
from reviewqueue.models import OPERATOR_ROUND, ReviewerStanding, ReviewItem
from reviewqueue.services import review_quality

pytestmark = [pytest.mark.double_review, pytest.mark.django_db]


@pytest.fixture
def ann(make_user: Callable[..., Any]) -> Any:
    return make_user("ann", "reviewer")


@pytest.fixture
def olga(make_user: Callable[..., Any]) -> Any:
    return make_user("olga", "operator")


@pytest.fixture
def twice(small_queue: Callable[..., Any], admit_item: Callable[..., Any]) -> Callable[..., int]:
    """An item in a queue that reviews every item twice."""

    def make(queue: str | None = None) -> int:
        small_queue(capacity=50, double_review_rate=1.0, gold_rate=0, escalation_delay_minutes=60)
        return admit_item(**({"queue": queue} if queue else {})).item.pk

    return make


def answer(reviewer: Any, item_id: int, approve: bool) -> Any:
    held = services.claim(reviewer=reviewer)
    assert held is not None and held.pk == item_id
    return services.decide(item_id=item_id, reviewer=reviewer, approve=approve, reason_label="unclear")


def state(item_id: int) -> tuple[str, int]:
    item = ReviewItem.objects.get(pk=item_id)
    return item.status, item.review_round


@pytest.mark.parametrize("operators_review", [True, False])
def test_an_operator_is_a_second_reviewer_only_while_operators_review(
    settings: Any, operators_review: bool, twice: Callable[..., int], ann: Any, olga: Any
) -> None:
    settings.REVIEWQUEUE_OPERATORS_REVIEW = operators_review
    item_id = twice()
    said = answer(ann, item_id, approve=True)
    if not operators_review:
        assert said.settled_by == "reviewer" and state(item_id) == ("approved", 1)  # nobody else reviews
        return
    assert said.pk is None and state(item_id) == ("pending", 2)
    verdict = answer(olga, item_id, approve=True)  # the operator takes the second round
    assert (verdict.settled_by, verdict.reviewer) == ("agreement", olga)


@pytest.mark.parametrize("operators_review", [True, False])
def test_an_operator_is_a_third_reviewer_only_while_operators_review(
    settings: Any, operators_review: bool, twice: Callable[..., int], ann: Any, olga: Any, make_user: Callable[..., Any]
) -> None:
    settings.REVIEWQUEUE_OPERATORS_REVIEW = operators_review
    ben = make_user("ben", "reviewer")
    item_id = twice()
    answer(ann, item_id, approve=True)
    answer(ben, item_id, approve=False)
    if not operators_review:
        assert state(item_id) == ("pending", OPERATOR_ROUND)  # no third reviewer: to the operators at once
        return
    assert state(item_id) == ("pending", 3)
    verdict = answer(olga, item_id, approve=False)
    assert (verdict.settled_by, verdict.decision) == ("tiebreak", "reject")


@pytest.mark.parametrize("how", ["paused", "inactive"])
def test_a_paused_or_inactive_operator_is_never_counted(
    settings: Any, how: str, twice: Callable[..., int], ann: Any, olga: Any
) -> None:
    settings.REVIEWQUEUE_OPERATORS_REVIEW = True
    if how == "paused":
        ReviewerStanding.objects.create(reviewer=olga, flagged_at=timezone.now(), paused_at=timezone.now())
    else:
        olga.is_active = False
        olga.save()
    item_id = twice()
    assert answer(ann, item_id, approve=True).settled_by == "reviewer"


def test_an_operator_counts_for_a_closed_queue_only_if_it_names_them_or_their_group(
    settings: Any, twice: Callable[..., int], ann: Any, olga: Any
) -> None:
    settings.REVIEWQUEUE_OPERATORS_REVIEW = True
    queue = services.create_queue(user=None, slug="docs", settings={"double_review_rate": 1.0, "gold_rate": 0})
    services.set_reviewers(queue=queue, user=None, open_to_all=False, members=[ann], groups=[])
    first = twice(queue="docs")
    assert answer(ann, first, approve=True).settled_by == "reviewer"  # olga may not review docs
    services.set_reviewers(queue=queue, user=None, open_to_all=False, members=[ann, olga], groups=[])
    named = twice(queue="docs")
    assert answer(ann, named, approve=True).pk is None and state(named) == ("pending", 2)
    services.set_reviewers(
        queue=queue, user=None, open_to_all=False, members=[ann], groups=[Group.objects.get(name="operator")]
    )
    by_group = twice(queue="docs")
    assert answer(ann, by_group, approve=True).pk is None and state(by_group) == ("pending", 2)


def test_who_could_take_the_next_round_is_who_the_review_pages_serve(
    settings: Any, ann: Any, olga: Any, make_user: Callable[..., Any], django_user_model: Any
) -> None:
    nobody = make_user("nora")  # no role
    admin = django_user_model.objects.create_superuser("root", password="pw-for-tests-1")
    settings.REVIEWQUEUE_OPERATORS_REVIEW = True
    others = set(review_quality.other_reviewers(nobody).values_list("username", flat=True))
    assert others == {"ann", "olga"}  # not the user with no role, nor an administrator who holds none
    assert {"ann", "olga", "root"} <= set(
        QueueMembersForm().fields["members"].queryset.values_list("username", flat=True)
    )
    settings.REVIEWQUEUE_OPERATORS_REVIEW = False
    assert set(review_quality.other_reviewers(nobody).values_list("username", flat=True)) == {"ann"}
    members = set(QueueMembersForm().fields["members"].queryset.values_list("username", flat=True))
    assert "olga" not in members and {"ann", "root"} <= members
    assert admin.is_superuser
