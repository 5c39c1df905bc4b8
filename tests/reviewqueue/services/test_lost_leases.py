"""A reviewer who loses the right to review a queue's items, by any path,
loses the lease they hold on one of them at once: the item waits again for
the queue's other reviewers, and every action on it is refused. The paths:
taken off the queue's members (from either side, the admin form, the queues
page's service), the queue no longer open to all, a member group removed
from the queue or the user from that group, the group deleted, the reviewer
or operator role taken away, the user deactivated or deleted, paused by
gold, and operators' reviewing turned off (the lease sweep releases those,
since a setting changes with no event)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from reviewqueue import services
from reviewqueue.models import Queue, ReviewerStanding, ReviewItem, Verdict

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def team(reviewer: User, make_user: Callable[..., User], admit_item: Callable[..., Any]) -> dict[str, Any]:
    """The queue "team" (the default queue closed), reviewed by rita, ravi and
    the operator otto, by name; "crew", a group that is also one of its
    member groups, holds rita."""
    Queue.objects.filter(pk=Queue.default().pk).update(open_to_all=False)
    queue = services.create_queue(user=None, slug="team", name="Team", settings={"capacity": 50})
    ravi = make_user("ravi", "reviewer")
    otto = make_user("otto", "operator")
    queue.members.add(reviewer, ravi, otto)
    crew = Group.objects.create(name="crew")
    queue.member_groups.add(crew)
    reviewer.groups.add(crew)
    item = admit_item(queue="team", task_description="TEAM task").item
    return {"queue": queue, "ravi": ravi, "otto": otto, "crew": crew, "item": item}


def hold(user: User, item: ReviewItem) -> None:
    assert services.claim(reviewer=user).pk == item.pk


def refused_everywhere(item: ReviewItem, user: User) -> None:
    """The lease is gone and every service action on the item is refused."""
    item.refresh_from_db()
    assert (item.status, item.lease_holder_id, item.lease_expires_at) == (ReviewItem.Status.PENDING, None, None)
    assert services.current_claim(reviewer=user) is None
    actions = [
        lambda: services.renew(item_id=item.pk, reviewer=user),
        lambda: services.decide(item_id=item.pk, reviewer=user, approve=True),
        lambda: services.decide(item_id=item.pk, reviewer=user, approve=True, edited_output="edited"),
        lambda: services.decide(item_id=item.pk, reviewer=user, approve=False, reason_label="unclear"),
        lambda: services.send_back(item_id=item.pk, reviewer=user, note="again"),
        lambda: services.release(item_id=item.pk, reviewer=user),
    ]
    for act in actions:
        with pytest.raises(services.QueueError):
            act()
    assert not Verdict.objects.filter(item_id=item.pk).exists()


def leave_members(team: dict[str, Any], user: User) -> None:
    team["queue"].members.remove(user)
    user.groups.remove(team["crew"])


def leave_from_user_side(team: dict[str, Any], user: User) -> None:
    user.review_queues.remove(team["queue"])
    team["crew"].user_set.remove(user)


def group_off_queue(team: dict[str, Any], user: User) -> None:
    team["queue"].members.remove(user)  # (still in crew; crew leaves the queue)
    # Re-added to crew in case the user is not in it (otto): the group is their only way in.
    user.groups.add(team["crew"])
    team["queue"].member_groups.clear()


def group_deleted(team: dict[str, Any], user: User) -> None:
    team["queue"].members.remove(user)
    user.groups.add(team["crew"])
    team["crew"].delete()


def role_taken(team: dict[str, Any], user: User) -> None:
    user.groups.remove(*Group.objects.filter(name__in=("reviewer", "operator")))


def deactivated(team: dict[str, Any], user: User) -> None:
    user.is_active = False
    user.save()


def paused(team: dict[str, Any], user: User) -> None:
    ReviewerStanding.objects.create(reviewer=user, flagged_at=timezone.now(), paused_at=timezone.now())


def no_longer_open_to_all(team: dict[str, Any], user: User) -> None:
    team["queue"].members.remove(user)
    user.groups.remove(team["crew"])
    Queue.objects.filter(pk=team["queue"].pk).update(open_to_all=True)
    services.set_reviewers(queue=team["queue"], user=None, open_to_all=False, members=[team["ravi"]], groups=[])


PATHS = [leave_members, leave_from_user_side, group_off_queue, group_deleted, role_taken, deactivated, paused]


@pytest.mark.django_db
@pytest.mark.parametrize("holder", ["rita", "otto"])
@pytest.mark.parametrize("path", [*PATHS, no_longer_open_to_all], ids=lambda p: p.__name__)
def test_a_reviewer_who_loses_the_queue_by_any_path_loses_their_lease_at_once(
    team: dict[str, Any], reviewer: User, holder: str, path: Callable[[dict[str, Any], User], None]
) -> None:
    user = reviewer if holder == "rita" else team["otto"]
    item = team["item"]
    hold(user, item)
    path(team, user)
    user = User.objects.get(pk=user.pk)  # as the next request reads it
    refused_everywhere(item, user)
    assert services.claim(reviewer=team["ravi"]).pk == item.pk  # it waits for the others


@pytest.mark.django_db
def test_a_deleted_reviewers_lease_is_released_not_left_held_by_nobody(team: dict[str, Any], reviewer: User) -> None:
    item = team["item"]
    hold(reviewer, item)
    reviewer.delete()
    item.refresh_from_db()
    assert (item.status, item.lease_holder_id) == (ReviewItem.Status.PENDING, None)
    assert services.claim(reviewer=team["ravi"]).pk == item.pk


@pytest.mark.django_db
def test_the_admin_form_taking_a_reviewer_off_a_queue_releases_their_lease(
    team: dict[str, Any], reviewer: User, client: Client
) -> None:
    item, queue = team["item"], team["queue"]
    hold(reviewer, item)
    admin = User.objects.create_superuser("root", password="pw-for-tests-1")
    client.force_login(admin)
    url = reverse("admin:reviewqueue_queue_change", args=[queue.pk])
    page = client.get(url)
    form = page.context["adminform"].form
    data: dict[str, Any] = {}
    for name, field in form.fields.items():
        value = form.initial.get(name, field.initial)
        if value is None:
            continue
        if isinstance(value, bool):
            if value:
                data[name] = "on"
            continue
        if name in ("members", "member_groups"):
            data[name] = [getattr(v, "pk", v) for v in value]
            continue
        data[name] = value
    data["members"] = [team["ravi"].pk]
    data["member_groups"] = []
    answer = client.post(url, data)
    assert answer.status_code == 302, answer.content.decode()[:2000]
    assert set(queue.members.all()) == {team["ravi"]}
    refused_everywhere(item, User.objects.get(pk=reviewer.pk))


@pytest.mark.django_db
def test_the_admin_form_closing_a_queue_open_to_all_releases_the_leases_of_non_members(
    team: dict[str, Any], reviewer: User, client: Client
) -> None:
    item, queue = team["item"], team["queue"]
    queue.members.remove(reviewer)
    reviewer.groups.remove(team["crew"])
    Queue.objects.filter(pk=queue.pk).update(open_to_all=True)
    hold(reviewer, item)
    admin = User.objects.create_superuser("root", password="pw-for-tests-1")
    client.force_login(admin)
    url = reverse("admin:reviewqueue_queue_change", args=[queue.pk])
    form = client.get(url).context["adminform"].form
    data: dict[str, Any] = {}
    for name, field in form.fields.items():
        value = form.initial.get(name, field.initial)
        if value is None or (isinstance(value, bool) and not value):
            continue
        if name == "open_to_all":
            continue  # unticked
        if name in ("members", "member_groups"):
            data[name] = [getattr(v, "pk", v) for v in value]
            continue
        data[name] = "on" if value is True else value
    answer = client.post(url, data)
    assert answer.status_code == 302, answer.content.decode()[:2000]
    assert not Queue.objects.get(pk=queue.pk).open_to_all
    refused_everywhere(item, User.objects.get(pk=reviewer.pk))


@pytest.mark.django_db
def test_operators_reviewing_turned_off_refuses_an_operators_lease_at_once_and_the_sweep_releases_it(
    team: dict[str, Any], settings: Any, client: Client
) -> None:
    otto, item = team["otto"], team["item"]
    hold(otto, item)
    settings.REVIEWQUEUE_OPERATORS_REVIEW = False  # a restart with the setting off: no event tells
    otto = User.objects.get(pk=otto.pk)
    for act in (
        lambda: services.renew(item_id=item.pk, reviewer=otto),
        lambda: services.decide(item_id=item.pk, reviewer=otto, approve=True),
        lambda: services.send_back(item_id=item.pk, reviewer=otto, note="again"),
    ):
        with pytest.raises(services.QueueError):
            act()
    client.force_login(otto)
    assert client.post(reverse("review:decide", args=[item.pk]), {"decision": "approve"}, **HX).status_code == 403
    assert client.post(reverse("review:renew", args=[item.pk]), **HX).status_code == 403
    services.expire_leases()
    refused_everywhere(item, otto)
    assert services.claim(reviewer=team["ravi"]).pk == item.pk


@pytest.mark.django_db
def test_the_pages_refuse_a_reviewer_taken_off_the_queue_at_every_action(
    team: dict[str, Any], reviewer: User, client: Client
) -> None:
    item = team["item"]
    hold(reviewer, item)
    client.force_login(reviewer)
    leave_members(team, reviewer)
    posts = [
        (reverse("review:decide", args=[item.pk]), {"decision": "approve"}),
        (reverse("review:decide", args=[item.pk]), {"decision": "edit", "edited_output": "x"}),
        (reverse("review:decide", args=[item.pk]), {"decision": "reject", "reason_label": "unclear"}),
        (reverse("review:send_back", args=[item.pk]), {"note": "again"}),
        (reverse("review:skip", args=[item.pk]), {}),
        (reverse("review:renew", args=[item.pk]), {}),
    ]
    for url, data in posts:
        body = client.post(url, data, **HX).content.decode()
        assert "TEAM task" not in body
    assert client.get(reverse("review_item", args=[item.pk])).status_code == 404
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.PENDING and not Verdict.objects.exists()
