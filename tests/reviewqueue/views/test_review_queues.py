"""A reviewer across several queues: the order claim serves them in
(policy.next_queue: priority, then fullness against capacity, then age, then
slug), focusing on one queue, membership by name and by group, and the
walls between queues: a reviewer never claims, opens, decides, skips or
renews an item of a queue they do not review, and hears of such an item what
they would hear of one that does not exist. Operators read every queue."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from reviewqueue import policy, services
from reviewqueue.models import Queue, ReviewItem, Verdict
from reviewqueue.services.leases import NotAQueueOfYours, queue_heads

HX = {"HTTP_HX_REQUEST": "true"}
AdmitItem = Callable[..., Any]


def make_queue(slug: str, *members: User, capacity: int = 50, **settings: Any) -> Queue:
    queue = services.create_queue(user=None, slug=slug, name=slug.title(), settings={"capacity": capacity, **settings})
    queue.members.add(*members)
    return queue


def close_default() -> None:
    """The default queue is open to every reviewer; these tests name their queues' reviewers."""
    Queue.objects.filter(pk=Queue.default().pk).update(open_to_all=False)


def drain(reviewer: User) -> list[str]:
    """Claim and approve until nothing is left; the queue of each item, in order."""
    served = []
    while (item := services.claim(reviewer=reviewer)) is not None:
        served.append(Queue.objects.get(pk=item.queue_id).slug)
        services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    return served


# --- the serving rule ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_it_serves_the_highest_priority_across_three_queues_first(reviewer: User, admit_item: AdmitItem) -> None:
    close_default()
    for slug in ("alpha", "beta", "gamma"):
        make_queue(slug, reviewer)
    admit_item(queue="alpha", priority=1)  # the oldest, but the lowest priority
    admit_item(queue="gamma", priority=2)
    admit_item(queue="beta", priority=3)
    admit_item(queue="alpha", priority=5)  # the newest, and the highest
    assert drain(reviewer) == ["alpha", "beta", "gamma", "alpha"]


@pytest.mark.django_db
def test_among_equal_priorities_it_serves_the_fuller_queue_against_its_capacity(
    reviewer: User, admit_item: AdmitItem
) -> None:
    close_default()
    make_queue("big", reviewer, capacity=20)  # 4 of 20: a fifth full
    make_queue("small", reviewer, capacity=4)  # 2 of 4: half full
    make_queue("mid", reviewer, capacity=10)  # 3 of 10
    for slug, n in (("big", 4), ("mid", 3), ("small", 2)):  # the fullest queue's items arrive last
        for _ in range(n):
            admit_item(queue=slug, priority=1)
    # A claimed item counts in its queue's depth until decided; each verdict
    # makes its queue less full, so the queues take turns. Ties in fullness go
    # to the item that waited longest (big's items arrived first).
    order = drain(reviewer)
    assert order == ["small", "mid", "small", "big", "mid", "big", "big", "mid", "big"]
    assert Counter(order) == {"big": 4, "mid": 3, "small": 2}


@pytest.mark.django_db
def test_it_follows_policy_next_queue_at_every_claim(reviewer: User, admit_item: AdmitItem) -> None:
    """Whatever the mix, each claim comes from the queue next_queue names from
    the heads claim reads: the live queue and the rule are one."""
    close_default()
    for slug, capacity in (("alpha", 10), ("beta", 6), ("gamma", 8)):
        make_queue(slug, reviewer, capacity=capacity)
    for i in range(12):
        admit_item(queue=("alpha", "beta", "gamma")[i * 7 % 3], priority=i * 5 % 3)
    while True:
        heads, _, _ = queue_heads(reviewer=reviewer, now=timezone.now())
        expected = policy.next_queue(head.head for head in heads)
        item = services.claim(reviewer=reviewer)
        if item is None:
            assert expected is None
            break
        assert Queue.objects.get(pk=item.queue_id).slug == expected
        services.decide(item_id=item.pk, reviewer=reviewer, approve=False, reason_label="unclear")


@pytest.mark.django_db
def test_among_equal_priority_and_fullness_it_serves_the_longest_waiting_item(
    reviewer: User, admit_item: AdmitItem
) -> None:
    close_default()
    for slug in ("alpha", "beta", "gamma"):
        make_queue(slug, reviewer, capacity=10)
    now = timezone.now()
    for age, slug in ((30, "beta"), (20, "gamma"), (10, "alpha")):
        item = admit_item(queue=slug).item
        ReviewItem.objects.filter(pk=item.pk).update(created_at=now - timedelta(seconds=age))
    assert drain(reviewer) == ["beta", "gamma", "alpha"]


@pytest.mark.django_db
def test_it_claims_under_the_lease_of_the_items_queue(reviewer: User, admit_item: AdmitItem) -> None:
    close_default()
    make_queue("quick", reviewer, lease_seconds=60)
    admit_item(queue="quick")
    now = timezone.now()
    item = services.claim(reviewer=reviewer, now=now)
    assert item.lease_expires_at == now + timedelta(seconds=60)
    renewed = services.renew(item_id=item.pk, reviewer=reviewer, now=now + timedelta(seconds=30))
    assert renewed.lease_expires_at == now + timedelta(seconds=90)


@pytest.mark.django_db
def test_it_claims_the_waiting_items_of_an_archived_queue(reviewer: User, admit_item: AdmitItem) -> None:
    close_default()
    make_queue("old", reviewer)
    item = admit_item(queue="old").item
    services.archive_queue(queue=Queue.objects.get(slug="old"), user=None)
    assert services.claim(reviewer=reviewer).pk == item.pk


# --- focus ---------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_focused_claim_takes_only_that_queues_items(reviewer: User, admit_item: AdmitItem) -> None:
    close_default()
    make_queue("alpha", reviewer)
    make_queue("beta", reviewer)
    admit_item(queue="alpha", priority=9)
    low = admit_item(queue="beta", priority=0).item
    assert services.claim(reviewer=reviewer, queue="beta").pk == low.pk
    services.decide(item_id=low.pk, reviewer=reviewer, approve=True)
    assert services.claim(reviewer=reviewer, queue=Queue.objects.get(slug="beta")) is None


@pytest.mark.django_db
def test_a_focus_on_a_queue_not_yours_is_refused_alike_whether_it_exists_or_not(
    reviewer: User, make_user: Callable[..., User], admit_item: AdmitItem
) -> None:
    make_queue("walled", make_user("ravi", "reviewer"))
    admit_item(queue="walled")
    with pytest.raises(NotAQueueOfYours) as walled:
        services.claim(reviewer=reviewer, queue="walled")
    with pytest.raises(NotAQueueOfYours) as missing:
        services.claim(reviewer=reviewer, queue="nowhere")
    assert walled.value.message.replace("walled", "X") == missing.value.message.replace("nowhere", "X")


# --- membership ------------------------------------------------------------------------------------------


@pytest.fixture
def walled(make_user: Callable[..., User], reviewer: User, admit_item: AdmitItem) -> dict[str, Any]:
    """Queue "mine" reviewed by rita, queue "walled" by ravi only; the walled
    item has the higher priority and carries a text rita must never see."""
    close_default()
    ravi = make_user("ravi", "reviewer")
    make_queue("mine", reviewer)
    make_queue("walled", ravi)
    theirs = admit_item(queue="walled", priority=9, task_description="WALLED-SECRET task").item
    return {"ravi": ravi, "theirs": theirs}


@pytest.mark.django_db
def test_a_reviewer_never_claims_an_item_of_a_queue_they_do_not_review(
    walled: dict[str, Any], reviewer: User, admit_item: AdmitItem
) -> None:
    assert services.claim(reviewer=reviewer) is None
    mine = admit_item(queue="mine", priority=0).item
    assert services.claim(reviewer=reviewer).pk == mine.pk
    services.decide(item_id=mine.pk, reviewer=reviewer, approve=True)
    assert services.claim(reviewer=reviewer) is None
    assert services.claim(reviewer=walled["ravi"]).pk == walled["theirs"].pk


@pytest.mark.django_db
def test_a_reviewer_cannot_decide_skip_or_renew_an_item_of_another_queue(
    walled: dict[str, Any], reviewer: User
) -> None:
    theirs = walled["theirs"]
    services.claim(reviewer=walled["ravi"])
    for act in (
        lambda: services.decide(item_id=theirs.pk, reviewer=reviewer, approve=True),
        lambda: services.send_back(item_id=theirs.pk, reviewer=reviewer, note="again"),
        lambda: services.release(item_id=theirs.pk, reviewer=reviewer),
        lambda: services.renew(item_id=theirs.pk, reviewer=reviewer),
    ):
        with pytest.raises(NotAQueueOfYours):
            act()
    theirs.refresh_from_db()
    assert (theirs.status, theirs.lease_holder) == (ReviewItem.Status.CLAIMED, walled["ravi"])


@pytest.mark.django_db
def test_a_group_makes_its_users_reviewers_of_a_queue(
    walled: dict[str, Any], reviewer: User, make_user: Callable[..., User]
) -> None:
    team = Group.objects.create(name="walled-team")
    Queue.objects.get(slug="walled").member_groups.add(team)
    assert services.claim(reviewer=reviewer) is None
    reviewer.groups.add(team)
    assert services.claim(reviewer=reviewer).pk == walled["theirs"].pk


@pytest.mark.django_db
def test_a_queue_open_to_all_serves_every_reviewer(walled: dict[str, Any], reviewer: User) -> None:
    Queue.objects.filter(slug="walled").update(open_to_all=True)
    assert services.claim(reviewer=reviewer).pk == walled["theirs"].pk


# --- the pages ---------------------------------------------------------------------------------------------


def _notices(body: str) -> list[str]:
    return re.findall(r'<p class="notice notice-\w+">(.*?)</p>', body, re.DOTALL)


@pytest.mark.django_db
def test_an_items_page_is_404_to_a_reviewer_outside_its_queue_as_if_it_did_not_exist(
    walled: dict[str, Any], client: Client, reviewer: User
) -> None:
    theirs = walled["theirs"]
    held = services.claim(reviewer=walled["ravi"])
    services.decide(item_id=held.pk, reviewer=walled["ravi"], approve=True)
    client.force_login(reviewer)
    seen = client.get(reverse("review_item", args=[theirs.pk]))
    missing = client.get(reverse("review_item", args=[theirs.pk + 1000]))
    assert seen.status_code == missing.status_code == 404
    assert "WALLED-SECRET" not in seen.content.decode()
    client.force_login(walled["ravi"])
    assert "WALLED-SECRET" in client.get(reverse("review_item", args=[theirs.pk])).content.decode()


@pytest.mark.django_db
def test_an_operator_reads_the_items_of_every_queue(walled: dict[str, Any], client: Client, operator: User) -> None:
    client.force_login(operator)
    response = client.get(reverse("review_item", args=[walled["theirs"].pk]))
    assert response.status_code == 200
    assert "WALLED-SECRET" in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["decide", "send_back", "skip", "renew"])
@pytest.mark.parametrize("state", ["waiting", "held by another", "decided"])
def test_an_action_on_another_queues_item_says_what_it_says_of_no_item(
    walled: dict[str, Any], client: Client, reviewer: User, action: str, state: str
) -> None:
    theirs = walled["theirs"]
    if state != "waiting":
        services.claim(reviewer=walled["ravi"])
    if state == "decided":
        services.decide(item_id=theirs.pk, reviewer=walled["ravi"], approve=False, reason_label="unclear")
    before = ReviewItem.objects.values().get(pk=theirs.pk)
    client.force_login(reviewer)
    data = {"decision": "approve", "note": "again"}
    seen = client.post(reverse(f"review:{action}", args=[theirs.pk]), data, **HX).content.decode()
    ghost = theirs.pk + 1000
    missing = client.post(reverse(f"review:{action}", args=[ghost]), data, **HX).content.decode()
    assert "WALLED-SECRET" not in seen
    assert _notices(seen) == [n.replace(str(ghost), str(theirs.pk)) for n in _notices(missing)]
    assert ReviewItem.objects.values().get(pk=theirs.pk) == before
    assert not Verdict.objects.filter(reviewer=reviewer).exists()


@pytest.fixture
def three(reviewer: User, admit_item: AdmitItem) -> None:
    """rita reviews alpha (2 waiting, draft), beta (empty) and the default queue (1 waiting)."""
    make_queue("alpha", reviewer, instructions="**Alpha rule**: approve only tested code.")
    make_queue("beta", reviewer, instructions="Beta rule.")
    admit_item(queue="alpha", priority=2, task_description="ALPHA task")
    admit_item(queue="alpha", priority=2, task_description="ALPHA task")
    admit_item(task_description="DEFAULT task")
    Queue.objects.filter(slug="alpha").update(mode="draft")


@pytest.mark.django_db
def test_the_switcher_lists_each_queue_with_its_waiting_count_and_mode(three: None, client: Client, reviewer: User):
    client.force_login(reviewer)
    body = client.get(reverse("review:queue")).content.decode()
    switcher = re.search(r'<nav id="queue-switcher".*?</nav>', body, re.DOTALL).group(0)
    assert re.search(r'aria-current="page">All my queues <span class="queue-count" title="waiting">3</span>', switcher)
    alpha = re.search(r'data-queue="alpha">(.*?)</a>', switcher, re.DOTALL).group(1)
    assert 'title="waiting">2</span>' in alpha and "draft" in alpha
    beta = re.search(r'data-queue="beta">(.*?)</a>', switcher, re.DOTALL).group(1)
    assert 'title="waiting">0</span>' in beta and "draft" not in beta
    assert 'href="/review/?queue=alpha"' in switcher


@pytest.mark.django_db
def test_a_focus_survives_next_skip_decide_and_undo(three: None, client: Client, reviewer: User) -> None:
    client.force_login(reviewer)
    page = client.get(reverse("review:queue") + "?queue=alpha").content.decode()
    assert 'aria-current="page">Alpha' in page
    assert 'hx-post="/review/next/?queue=alpha"' in page
    card = client.post(reverse("review:next") + "?queue=alpha", **HX).content.decode()
    first = services.current_claim(reviewer=reviewer)
    assert first.queue.slug == "alpha" and "ALPHA task" in card
    assert f'hx-post="/review/{first.pk}/decide/?queue=alpha"' in card
    assert f'hx-post="/review/{first.pk}/skip/?queue=alpha"' in card
    assert 'hx-post="/review/undo/?queue=alpha"' in card
    client.post(reverse("review:skip", args=[first.pk]) + "?queue=alpha", **HX)
    second = services.current_claim(reviewer=reviewer)
    assert second.queue.slug == "alpha" and second.pk != first.pk
    # a plain form's redirect keeps the focus too
    response = client.post(reverse("review:decide", args=[second.pk]) + "?queue=alpha", {"decision": "approve"})
    assert response.status_code == 302 and response["Location"] == "/review/?queue=alpha"
    # the focused queue's skipped item comes back before any other queue's
    assert services.current_claim(reviewer=reviewer).pk == first.pk
    undone = client.post(reverse("review:undo") + "?queue=alpha", {"current": first.pk})
    assert undone["Location"] == "/review/?queue=alpha"


def _form_url(card: str, form_id: str) -> str:
    form = re.search(rf'<form id="{form_id}"[^>]*>', card).group(0)
    action = re.search(r' action="([^"]*)"', form).group(1)
    assert re.search(r'hx-post="([^"]*)"', form).group(1) == action
    return action.replace("&amp;", "&")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("form_id", "data"),
    [("edit-form", {"decision": "edit", "edited_output": "fixed"}), ("send-back-form", {"note": "try again"})],
)
def test_a_focus_survives_edit_and_send_back(
    client: Client, reviewer: User, admit_item: AdmitItem, form_id: str, data: dict[str, str]
) -> None:
    """The focused queue's items come next after an edit or a send-back,
    even while another queue of the reviewer's has a more urgent item."""
    make_queue("alpha", reviewer)
    admit_item(queue="alpha", priority=0, task_description="ALPHA one")
    admit_item(queue="alpha", priority=0, task_description="ALPHA two")
    admit_item(priority=5, task_description="DEFAULT urgent")
    client.force_login(reviewer)
    card = client.post(reverse("review:next") + "?queue=alpha", **HX).content.decode()
    first = services.current_claim(reviewer=reviewer)
    assert first.queue.slug == "alpha"
    url = _form_url(card, form_id)
    assert url.endswith("?queue=alpha"), url
    client.post(url, data, **HX)
    assert ReviewItem.objects.get(pk=first.pk).status in ("approved", "sent_back")
    following = services.current_claim(reviewer=reviewer)
    assert following is not None and following.queue.slug == "alpha" and following.pk != first.pk


@pytest.mark.django_db
def test_a_focus_on_a_queue_not_yours_is_404(three: None, client: Client, reviewer: User, make_user: Any) -> None:
    make_queue("walled", make_user("ravi", "reviewer"))
    client.force_login(reviewer)
    for url in ("/review/?queue=walled", "/review/?queue=nowhere"):
        assert client.get(url).status_code == 404
    assert client.post("/review/next/?queue=walled", **HX).status_code == 404
    assert services.current_claim(reviewer=reviewer) is None


@pytest.mark.django_db
def test_the_card_names_the_items_queue_and_shows_its_instructions(three: None, client: Client, reviewer: User):
    client.force_login(reviewer)
    card = client.post(reverse("review:next"), **HX).content.decode()
    assert "ALPHA task" in card  # priority 2 beats the default queue's 1
    assert "in <strong>Alpha</strong>" in card
    instructions = re.search(r'<details class="queue-instructions".*?</details>', card, re.DOTALL).group(0)
    assert "<strong>Alpha rule</strong>: approve only tested code." in instructions
    assert "Beta rule" not in card


@pytest.mark.django_db
def test_the_empty_state_says_which_queues_are_empty(three: None, client: Client, reviewer: User) -> None:
    client.force_login(reviewer)
    body = client.get(reverse("review:queue")).content.decode()
    assert "3 items waiting" in body
    assert "Nothing waits in Beta." in body
    focused = client.get("/review/?queue=beta").content.decode()
    assert "The queue is empty" in focused and "Nothing waits in Beta." in focused


@pytest.mark.django_db
def test_hostile_queue_names_and_instructions_are_inert(client: Client, reviewer: User, admit_item: AdmitItem):
    queue = make_queue("hostile", reviewer, instructions='<img src=x onerror="alert(1)"> **ok**')
    Queue.objects.filter(pk=queue.pk).update(name='<script>alert("n")</script>')
    admit_item(queue="hostile", priority=5)
    client.force_login(reviewer)
    card = client.post(reverse("review:next"), **HX).content.decode()
    assert "<script>alert" not in card and "<img" not in card
    assert "&lt;script&gt;alert" in card and "&lt;img src=x" in card
    assert "<strong>ok</strong>" in card


# --- concurrency -------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_reviewers_claiming_across_two_queues_never_get_the_same_item(make_user: Callable[..., User]) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's; SQLite serialises writers")
    from ..services.threads import in_threads

    reviewers = [make_user(f"c{i}", "reviewer") for i in range(2)]
    for slug in ("north", "south"):
        make_queue(slug, *reviewers, capacity=1000)
    for i in range(200):
        services.admit(
            idempotency_key=f"race-{i}",
            task_description="t",
            final_output="o",
            cutoff_reason="step_limit",
            priority=i % 3,
            queue=("north", "south")[i % 2],
        )

    def work(i: int) -> list[int]:
        mine = []
        while (item := services.claim(reviewer=reviewers[i])) is not None:
            mine.append(item.pk)
            services.decide(item_id=item.pk, reviewer=reviewers[i], approve=True)
        return mine

    got = in_threads(2, work)
    claimed = got[0] + got[1]
    assert len(claimed) == len(set(claimed)) == 200
    assert all(got)
    assert ReviewItem.objects.filter(status__in=ReviewItem.WAITING).count() == 0


@pytest.mark.django_db
def test_a_reviewer_who_left_a_queue_no_longer_opens_the_items_they_decided_there(
    client: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    close_default()
    team = make_queue("team", reviewer)
    item = admit_item(queue="team", task_description="TEAM task").item
    services.decide(item_id=services.claim(reviewer=reviewer).pk, reviewer=reviewer, approve=True)
    client.force_login(reviewer)
    assert "TEAM task" in client.get(reverse("review_item", args=[item.pk])).content.decode()
    team.members.remove(reviewer)
    assert client.get(reverse("review_item", args=[item.pk])).status_code == 404


@pytest.fixture
def held_in_team(reviewer: User, admit_item: AdmitItem) -> tuple[Queue, ReviewItem]:
    """rita reviews the queue "team" (and nothing else) and holds its one item."""
    close_default()
    team = make_queue("team", reviewer)
    item = admit_item(queue="team", task_description="TEAM task").item
    assert services.claim(reviewer=reviewer).pk == item.pk
    return team, item


def every_action(item: ReviewItem, reviewer: User) -> list[Callable[[], Any]]:
    return [
        lambda: services.renew(item_id=item.pk, reviewer=reviewer),
        lambda: services.decide(item_id=item.pk, reviewer=reviewer, approve=True),
        lambda: services.decide(item_id=item.pk, reviewer=reviewer, approve=True, edited_output="edited"),
        lambda: services.decide(item_id=item.pk, reviewer=reviewer, approve=False, reason_label="unclear"),
        lambda: services.send_back(item_id=item.pk, reviewer=reviewer, note="again"),
        lambda: services.release(item_id=item.pk, reviewer=reviewer),
    ]


@pytest.mark.django_db
def test_a_reviewer_taken_off_a_queue_loses_their_lease_on_its_item(
    held_in_team: tuple[Queue, ReviewItem], reviewer: User, operator: User
) -> None:
    team, item = held_in_team
    services.set_reviewers(queue=team, user=operator, open_to_all=False, members=[operator], groups=[])
    item.refresh_from_db()
    assert (item.status, item.lease_holder, item.lease_expires_at) == (ReviewItem.Status.PENDING, None, None)
    assert services.current_claim(reviewer=reviewer) is None
    for act in every_action(item, reviewer):
        with pytest.raises(NotAQueueOfYours):
            act()
    assert services.claim(reviewer=operator).pk == item.pk  # it waits for the queue's reviewers


@pytest.mark.django_db
def test_membership_is_checked_at_every_action_on_a_lease_kept_from_before(
    held_in_team: tuple[Queue, ReviewItem], reviewer: User, client: Client
) -> None:
    """Taken off the queue some other way (its members edited directly, a
    group changed), the reviewer's lease is released too and they can do
    nothing with the item."""
    team, item = held_in_team
    team.members.remove(reviewer)
    for act in every_action(item, reviewer):
        with pytest.raises(NotAQueueOfYours):
            act()
    assert services.current_claim(reviewer=reviewer) is None and services.claim(reviewer=reviewer) is None
    client.force_login(reviewer)
    seen = client.post(reverse("review:decide", args=[item.pk]), {"decision": "approve"}, **HX).content.decode()
    ghost = item.pk + 1000
    missing = client.post(reverse("review:decide", args=[ghost]), {"decision": "approve"}, **HX).content.decode()
    assert "TEAM task" not in seen
    assert _notices(seen) == [n.replace(str(ghost), str(item.pk)) for n in _notices(missing)]
    item.refresh_from_db()
    assert (item.status, item.lease_holder) == (ReviewItem.Status.PENDING, None) and not Verdict.objects.exists()


@pytest.mark.django_db
def test_a_reviewer_taken_off_a_queue_cannot_undo_a_verdict_there(
    held_in_team: tuple[Queue, ReviewItem], reviewer: User
) -> None:
    team, item = held_in_team
    services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    team.members.remove(reviewer)
    with pytest.raises(services.UndoRefused, match="no longer review"):
        services.undo(reviewer=reviewer)
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.APPROVED and Verdict.objects.filter(item=item).exists()


# --- gold copies ---------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_gold_comes_only_from_the_reviewers_queues_and_belongs_to_its_gold_items_queue(
    reviewer: User, make_user: Callable[..., User], operator: User, admit_item: AdmitItem
) -> None:
    from reviewqueue.services import review_quality

    close_default()
    ravi = make_user("ravi", "reviewer")
    mine = make_queue("mine", reviewer, ravi, gold_rate=1.0)
    make_queue("walled", ravi, gold_rate=1.0)
    review_quality.forget_gold_settings()
    for slug in ("walled", "mine"):  # ravi decides one item in each; both become gold
        admit_item(queue=slug, task_description=f"gold of {slug}")
        held = services.claim(reviewer=ravi, queue=slug)
        services.decide(item_id=held.pk, reviewer=ravi, approve=True)
        services.mark_gold(item_id=held.pk, operator=operator, expected_decision="approve")
    real = admit_item(queue="mine", priority=4).item  # its copy is placed beside it, in its queue
    assert services.claim(reviewer=reviewer).pk == real.pk
    services.decide(item_id=real.pk, reviewer=reviewer, approve=True)
    served = services.claim(reviewer=reviewer)
    assert served.gold_id is not None and served.task_description == "gold of mine"
    assert served.queue_id == mine.pk
    assert (served.created_at, served.priority) == (real.created_at, real.priority)  # its neighbour's place
    services.decide(item_id=served.pk, reviewer=reviewer, approve=True)
    # The walled queue's gold item is never served to rita: nothing is left for her.
    assert services.claim(reviewer=reviewer) is None
