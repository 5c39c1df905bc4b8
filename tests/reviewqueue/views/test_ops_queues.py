"""Operators and many queues: every operator page is about one queue, the
overview of all queues, creating, archiving and restoring a queue, its
reviewers, and the routing rules."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from reviewqueue import services
from reviewqueue.models import (
    CircuitBreakerEntry,
    FilterRule,
    ModeChange,
    PolicyAudit,
    Queue,
    ReviewItem,
    RoutingRule,
    SimulationRun,
    Verdict,
)
from reviewqueue.services import routing

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_queues(db: None) -> tuple[Queue, Queue]:
    Queue.default()
    a = services.create_queue(user=None, slug="team-a", name="Team A", settings={"capacity": 10})
    b = services.create_queue(user=None, slug="team-b", name="Team B", settings={"capacity": 20})
    return a, b


def _verdict(item: ReviewItem, decision: str = "approve", **extra: Any) -> Verdict:
    """A settled verdict written directly: these tests read numbers, they do not review."""
    item.status = ReviewItem.Status.APPROVED if decision == "approve" else ReviewItem.Status.REJECTED
    item.save(update_fields=["status"])
    label = "" if decision == "approve" else "logic_error"
    return Verdict.objects.create(item=item, queue_id=item.queue_id, decision=decision, reason_label=label, **extra)


# --- access -------------------------------------------------------------------------------------

PAGES = [
    ("ops:queues", ()),
    ("ops:queue", ("default",)),
    ("ops:queue_archive", ("default", "archive")),
    ("ops:routing", ()),
]


@pytest.mark.parametrize(("name", "args"), PAGES)
def test_queue_pages_send_anonymous_users_to_sign_in(client: Client, name: str, args: tuple[str, ...]) -> None:
    Queue.default()
    response = client.get(reverse(name, args=args))
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


@pytest.mark.parametrize(("name", "args"), PAGES)
def test_queue_pages_refuse_reviewers(client: Client, reviewer: User, name: str, args: tuple[str, ...]) -> None:
    Queue.default()
    client.force_login(reviewer)
    assert client.get(reverse(name, args=args)).status_code == 403


@pytest.mark.parametrize(("name", "args"), PAGES)
def test_queue_pages_open_for_operators(client: Client, operator: User, name: str, args: tuple[str, ...]) -> None:
    Queue.default()
    client.force_login(operator)
    assert client.get(reverse(name, args=args)).status_code == 200


def test_reviewers_cannot_create_archive_route_or_change_members(
    client: Client, reviewer: User, two_queues: tuple[Queue, Queue]
) -> None:
    a, _ = two_queues
    rule = RoutingRule.objects.create(queue=a, producer="p")
    client.force_login(reviewer)
    posts = [
        (reverse("ops:queues"), {"slug": "mine", "capacity": "5"}),
        (reverse("ops:queue_archive", args=["team-a", "archive"]), {}),
        (reverse("ops:queue", args=["team-a"]), {"open_to_all": "on"}),
        (reverse("ops:routing"), {"queue": "team-a", "enabled": "on"}),
        (reverse("ops:routing_rule", args=[rule.pk]), {"queue": "team-b"}),
        (reverse("ops:routing_rule_delete", args=[rule.pk]), {}),
        (reverse("ops:routing_rule_move", args=[rule.pk, "up"]), {}),
    ]
    for url, data in posts:
        assert client.post(url, data).status_code == 403, url
    assert not Queue.objects.filter(slug="mine").exists()
    a.refresh_from_db()
    assert not a.archived and not a.open_to_all
    rule.refresh_from_db()
    assert rule.queue == a


def test_queue_posts_need_csrf(operator: User, two_queues: tuple[Queue, Queue]) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.post(reverse("ops:queue_archive", args=["team-a", "archive"])).status_code == 403
    assert client.post(reverse("ops:queues"), {"slug": "x", "capacity": "1"}).status_code == 403
    assert not Queue.objects.get(slug="team-a").archived


# --- scoping ------------------------------------------------------------------------------------

SCOPED = ["ops:dashboard", "ops:policy", "ops:whatif", "ops:export", "ops:export_download"]


@pytest.mark.parametrize("name", SCOPED)
def test_an_unknown_queue_is_a_404_that_names_it(client: Client, operator: User, name: str) -> None:
    client.force_login(operator)
    response = client.get(reverse(name), {"queue": "no-such-team"})
    assert response.status_code == 404
    assert "no-such-team" in response.content.decode()


def test_the_unknown_queue_page_escapes_the_slug(client: Client, operator: User) -> None:
    client.force_login(operator)
    body = client.get(reverse("ops:dashboard"), {"queue": "<script>alert(1)</script>"}).content.decode()
    assert "<script>alert(1)</script>" not in body
    assert "&lt;script&gt;" in body


def test_the_unknown_queue_page_is_for_operators_only(client: Client, reviewer: User) -> None:
    client.force_login(reviewer)
    assert client.get(reverse("ops:dashboard"), {"queue": "no-such-team"}).status_code == 403


def test_each_dashboard_shows_its_own_queue(
    client: Client, operator: User, two_queues: tuple[Queue, Queue], admit_item: Any
) -> None:
    a, b = two_queues
    for _ in range(3):
        admit_item(queue="team-a")
    admit_item(queue="team-b")
    FilterRule.objects.create(queue=a, label="format", gate="gate_for_a", description="a's gate")
    FilterRule.objects.create(queue=b, label="format", gate="gate_for_b", description="b's gate")
    shed = admit_item(queue="team-b", task_id="shed-in-b").item
    CircuitBreakerEntry.objects.create(item=shed, priority=0, depth=20, capacity=20, incoming=True)
    client.force_login(operator)
    page_a = client.get(reverse("ops:dashboard"), {"queue": "team-a"})
    ctx = page_a.context
    assert ctx["queue"].slug == "team-a"
    assert ctx["depth"] == 3
    assert [r.gate for r in ctx["rules"]] == ["gate_for_a"]
    assert list(ctx["breaker"]) == []
    body_a = page_a.content.decode()
    assert "gate_for_b" not in body_a and "shed-in-b" not in body_a
    assert 'hx-get="/ops/?queue=team-a"' in body_a  # the poll stays on the queue
    ctx_b = client.get(reverse("ops:dashboard"), {"queue": "team-b"}).context
    assert ctx_b["depth"] == 2
    assert [e.item.task_id for e in ctx_b["breaker"]] == ["shed-in-b"]
    assert ctx_b["shed_by_priority"] == {0: 1}


def test_the_dashboard_poll_answers_for_its_queue(
    client: Client, operator: User, two_queues: tuple[Queue, Queue], admit_item: Any
) -> None:
    admit_item(queue="team-b")
    client.force_login(operator)
    response = client.get(reverse("ops:dashboard"), {"queue": "team-b"}, headers={"HX-Request": "true"})
    assert response.context["depth"] == 1
    assert '<section id="live"' in response.content.decode()


def test_the_mode_history_is_the_queues_own(two_queues: tuple[Queue, Queue], admit_item: Any) -> None:
    from reviewqueue import stats

    a, b = two_queues
    now = timezone.now()
    admit_item(queue="team-a", now=now - timedelta(hours=2))
    admit_item(queue="team-b", now=now - timedelta(hours=2))
    ModeChange.objects.create(queue=a, previous="normal", mode="draft", depth=9, created_at=now - timedelta(minutes=30))
    assert stats.mode_durations(timedelta(hours=1), now=now, queue=a)["draft"] == pytest.approx(30 * 60)
    assert stats.mode_durations(timedelta(hours=1), now=now, queue=b)["draft"] == 0


def test_a_policy_post_changes_only_its_queue(client: Client, operator: User, two_queues: tuple[Queue, Queue]) -> None:
    a, b = two_queues
    client.force_login(operator)
    form = client.get(reverse("ops:policy"), {"queue": "team-a"}).context["form"]
    data = {name: value for name, value in form.initial.items() if value is not None and name in form.fields}
    data.update(capacity=33, queue="team-a")
    data.pop("gold_pause", None)
    response = client.post(reverse("ops:policy"), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert response["Location"] == "/ops/policy/?queue=team-a"
    a.refresh_from_db()
    b.refresh_from_db()
    assert (a.capacity, b.capacity) == (33, 20)
    assert Queue.default().capacity == 50
    audits = client.get(reverse("ops:policy"), {"queue": "team-a"}).context["audits"]
    assert [x.changes.get("capacity") for x in audits if "capacity" in x.changes] == [[10, 33]]
    assert not any(
        "capacity" in x.changes for x in client.get(reverse("ops:policy"), {"queue": "team-b"}).context["audits"]
    )


def test_a_policy_error_keeps_the_queue_and_the_input(
    client: Client, operator: User, two_queues: tuple[Queue, Queue]
) -> None:
    client.force_login(operator)
    form = client.get(reverse("ops:policy"), {"queue": "team-b"}).context["form"]
    data = {name: value for name, value in form.initial.items() if value is not None and name in form.fields}
    data.pop("gold_pause", None)
    data.update(capacity=0, queue="team-b")
    response = client.post(reverse("ops:policy"), data)
    assert response.status_code == 400
    body = response.content.decode()
    assert 'name="queue" value="team-b"' in body
    assert Queue.objects.get(slug="team-b").capacity == 20


def test_a_filter_rule_decision_returns_to_its_queues_dashboard(
    client: Client, operator: User, two_queues: tuple[Queue, Queue]
) -> None:
    _, b = two_queues
    rule = FilterRule.objects.create(queue=b, label="format", gate="nonempty", description="d")
    client.force_login(operator)
    response = client.post(reverse("ops:rule_decide", args=[rule.pk, "dismiss"]))
    assert response["Location"] == "/ops/?queue=team-b"


def test_the_rule_preview_tries_the_gate_on_its_queues_items(
    client: Client, operator: User, two_queues: tuple[Queue, Queue], admit_item: Any
) -> None:
    from loops.gates import GATES

    a, _ = two_queues
    admit_item(queue="team-a")
    admit_item(queue="team-b")
    admit_item(queue="team-b")
    rule = FilterRule.objects.create(queue=a, label="format", gate=next(iter(GATES)), description="d")
    client.force_login(operator)
    preview = client.get(reverse("ops:rule_preview", args=[rule.pk])).context["preview"]
    assert preview.checked == 1


def test_the_export_holds_only_its_queues_verdicts_and_names_the_queue(
    client: Client, operator: User, two_queues: tuple[Queue, Queue], admit_item: Any
) -> None:
    _verdict(admit_item(queue="team-a", task_id="in-a").item)
    _verdict(admit_item(queue="team-b", task_id="in-b").item, "reject")
    client.force_login(operator)
    response = client.get(reverse("ops:export_download"), {"format": "csv", "queue": "team-b"})
    assert response.status_code == 200
    assert "verdicts-team-b-" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["task_id"], r["queue"], r["decision"]) for r in rows] == [("in-b", "team-b", "reject")]
    jsonl = client.get(reverse("ops:export_download"), {"format": "jsonl", "queue": "team-a"})
    lines = [json.loads(x) for x in b"".join(jsonl.streaming_content).decode().splitlines()]
    assert [(x["task_id"], x["queue"]) for x in lines] == [("in-a", "team-a")]


def test_the_export_form_carries_its_queue(client: Client, operator: User, two_queues: tuple[Queue, Queue]) -> None:
    client.force_login(operator)
    body = client.get(reverse("ops:export"), {"queue": "team-a"}).content.decode()
    assert 'name="queue" value="team-a"' in body


def test_whatif_from_live_data_reads_its_queue(
    client: Client, operator: User, two_queues: tuple[Queue, Queue], admit_item: Any
) -> None:
    for _ in range(4):
        admit_item(queue="team-b")
    client.force_login(operator)
    ctx = client.get(reverse("ops:whatif"), {"queue": "team-b", "live": "1", "window": "15m"}).context
    assert ctx["live_flow"].arrivals == 4
    assert ctx["form"].initial["capacity"] == 20
    ctx_a = client.get(reverse("ops:whatif"), {"queue": "team-a", "live": "1", "window": "15m"}).context
    assert ctx_a["live_flow"].arrivals == 0
    assert ctx_a["form"].initial["capacity"] == 10


def test_a_whatif_run_belongs_to_its_queue(client: Client, operator: User, two_queues: tuple[Queue, Queue]) -> None:
    client.force_login(operator)
    form = client.get(reverse("ops:whatif"), {"queue": "team-b", "preset": "A"}).context["form"]
    data = {name: value for name, value in form.initial.items() if value is not None}
    data.update(replications=2, duration_min=30, queue="team-b")
    response = client.post(reverse("ops:whatif_run"), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    run = SimulationRun.objects.get()
    assert run.queue.slug == "team-b"
    assert list(client.get(reverse("ops:whatif"), {"queue": "team-a"}).context["runs"]) == []
    assert [r.pk for r in client.get(reverse("ops:whatif"), {"queue": "team-b"}).context["runs"]] == [run.pk]


def test_the_switcher_lists_active_queues_and_keeps_the_page(
    client: Client, operator: User, two_queues: tuple[Queue, Queue]
) -> None:
    services.create_queue(user=None, slug="gone")
    services.archive_queue(queue=Queue.objects.get(slug="gone"), user=None)
    client.force_login(operator)
    body = client.get(reverse("ops:policy"), {"queue": "team-b"}).content.decode()
    switcher = body.split('id="queue-switcher"')[1].split("</form>")[0]
    assert 'action="" class="queue-switcher"' in body
    assert '<option value="team-b" selected>' in switcher
    assert 'value="team-a"' in switcher and 'value="default"' in switcher
    assert 'value="gone"' not in switcher
    assert 'href="/ops/whatif/?queue=team-b"' in body  # the menu stays on the queue


# --- the overview -----------------------------------------------------------------------------


def test_the_overview_shows_each_queues_numbers(
    client: Client, operator: User, two_queues: tuple[Queue, Queue], admit_item: Any
) -> None:
    _, b = two_queues
    now = timezone.now()
    admit_item(queue="team-a", now=now - timedelta(minutes=30))
    admit_item(queue="team-a")
    for decision in ("approve", "approve", "reject", "approve"):
        _verdict(admit_item(queue="team-b").item, decision)
    Queue.objects.filter(pk=b.pk).update(mode="draft")
    services.create_queue(user=None, slug="old")
    services.archive_queue(queue=Queue.objects.get(slug="old"), user=None)
    client.force_login(operator)
    response = client.get(reverse("ops:queues"))
    ctx = response.context
    active = {r["row"].queue.slug: r for r in ctx["active"]}
    assert list(active) == ["default", "team-a", "team-b"]
    assert [r["row"].queue.slug for r in ctx["archived"]] == ["old"]
    assert (active["team-a"]["row"].depth, active["team-a"]["row"].queue.capacity) == (2, 10)
    assert active["team-a"]["row"].oldest_seconds == pytest.approx(30 * 60, abs=60)
    assert active["team-a"]["ratio_text"] == "∞"  # arrivals, no decisions
    assert active["team-b"]["row"].queue.mode == "draft"
    assert active["team-b"]["row"].approve.approved == 3 and active["team-b"]["row"].approve.n == 4
    assert active["team-b"]["ratio_text"] == "1.00"
    assert active["team-a"]["dashboard_url"] == "/ops/?queue=team-a"
    body = response.content.decode()
    assert 'href="/ops/?queue=team-b"' in body
    assert 'id="archived-queues"' in body


def test_the_overview_costs_the_same_for_3_or_12_queues(client: Client, operator: User, admit_item: Any) -> None:
    client.force_login(operator)
    for i in range(2):
        services.create_queue(user=None, slug=f"few-{i}")
    admit_item(queue="few-0")
    client.get(reverse("ops:queues"))  # warm the session and permission caches
    with CaptureQueriesContext(connection) as few:
        client.get(reverse("ops:queues"))
    for i in range(9):
        services.create_queue(user=None, slug=f"many-{i}")
        admit_item(queue=f"many-{i}")
    with CaptureQueriesContext(connection) as many:
        client.get(reverse("ops:queues"))
    assert len(many.captured_queries) == len(few.captured_queries)


def test_the_overview_escapes_queue_names(client: Client, operator: User) -> None:
    services.create_queue(user=None, slug="evil", name="<img src=x onerror=alert(1)>")
    client.force_login(operator)
    body = client.get(reverse("ops:queues")).content.decode()
    assert "<img src=x" not in body
    assert "&lt;img src=x" in body


# --- creating, archiving, restoring -----------------------------------------------------------


def test_an_operator_creates_a_queue_copying_another_policy(
    client: Client, operator: User, two_queues: tuple[Queue, Queue]
) -> None:
    services.policy_update(user=None, changes={"step_limit": 7, "max_step_limit": 9}, queue=two_queues[1])
    client.force_login(operator)
    response = client.post(
        reverse("ops:queues"), {"slug": "night-shift", "name": "Night shift", "capacity": "15", "copy_from": "team-b"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/ops/queues/night-shift/"
    queue = Queue.objects.get(slug="night-shift")
    assert (queue.name, queue.capacity, queue.step_limit, queue.max_step_limit) == ("Night shift", 15, 7, 9)
    assert PolicyAudit.objects.filter(queue=queue, user=operator).exists()


def test_a_bad_or_taken_slug_is_said_next_to_the_field(
    client: Client, operator: User, two_queues: tuple[Queue, Queue]
) -> None:
    client.force_login(operator)
    for slug in ("Team A!", "team-a"):
        response = client.post(reverse("ops:queues"), {"slug": slug, "name": "Kept name", "capacity": "5"})
        assert response.status_code == 400
        form = response.context["form"]
        assert "slug" in form.errors, slug
        body = response.content.decode()
        assert 'id="id_slug_error"' in body
        assert 'value="Kept name"' in body
    assert Queue.objects.count() == 3


def test_archive_asks_first_then_archives_and_restores(
    client: Client, operator: User, two_queues: tuple[Queue, Queue]
) -> None:
    client.force_login(operator)
    url = reverse("ops:queue_archive", args=["team-a", "archive"])
    page = client.get(url)
    assert 'id="confirm-archive"' in page.content.decode()
    assert not Queue.objects.get(slug="team-a").archived
    assert client.post(url)["Location"] == "/ops/queues/"
    assert Queue.objects.get(slug="team-a").archived
    with pytest.raises(services.InvalidInput):
        routing.resolve("team-a", producer="p", task_kind="", priority=0, task_id="t")
    client.post(reverse("ops:queue_archive", args=["team-a", "restore"]))
    assert not Queue.objects.get(slug="team-a").archived
    assert routing.resolve("team-a", producer="p", task_kind="", priority=0, task_id="t").slug == "team-a"


def test_an_archived_queue_keeps_its_dashboard(
    client: Client, operator: User, two_queues: tuple[Queue, Queue], admit_item: Any
) -> None:
    admit_item(queue="team-a")
    services.archive_queue(queue=two_queues[0], user=None)
    client.force_login(operator)
    response = client.get(reverse("ops:dashboard"), {"queue": "team-a"})
    assert response.status_code == 200
    assert response.context["depth"] == 1
    assert 'id="archived-banner"' in response.content.decode()


def test_the_default_queue_cannot_be_archived(client: Client, operator: User) -> None:
    Queue.default()
    client.force_login(operator)
    response = client.post(reverse("ops:queue_archive", args=["default", "archive"]))
    assert response.status_code == 400
    assert "cannot be archived" in response.content.decode()
    assert not Queue.default().archived


def test_an_unknown_archive_action_or_queue_is_refused(client: Client, operator: User) -> None:
    Queue.default()
    client.force_login(operator)
    assert client.post(reverse("ops:queue_archive", args=["default", "delete"])).status_code == 400
    assert client.post(reverse("ops:queue_archive", args=["nope", "archive"])).status_code == 404


# --- reviewers ------------------------------------------------------------------------------------


def test_an_operator_sets_a_queues_reviewers(
    client: Client, operator: User, reviewer: User, make_user: Any, two_queues: tuple[Queue, Queue], admit_item: Any
) -> None:
    a, _ = two_queues
    admit_item(queue="team-a")
    Queue.objects.filter(pk=a.pk).update(mode="draft")
    team = Group.objects.create(name="night-team")
    client.force_login(operator)
    page = client.get(reverse("ops:queue", args=["team-a"]))
    members = page.context["form"].fields["members"].queryset
    assert list(members) == [operator, reviewer]  # who may review: operators too, while operators review
    with override_settings(REVIEWQUEUE_OPERATORS_REVIEW=False):
        kept_apart = client.get(reverse("ops:queue", args=["team-a"]))
        assert list(kept_apart.context["form"].fields["members"].queryset) == [reviewer]
    response = client.post(
        reverse("ops:queue", args=["team-a"]), {"members": [reviewer.pk], "member_groups": [team.pk]}
    )
    assert response.status_code == 302
    a.refresh_from_db()
    assert list(a.members.all()) == [reviewer]
    assert list(a.member_groups.all()) == [team]
    assert not a.open_to_all
    assert (a.depth, a.mode) == (1, "draft")  # the services' state is left alone
    audit = PolicyAudit.objects.filter(queue=a, user=operator).latest("created_at")
    assert audit.changes["members"] == [[], ["rita"]]
    assert list(Queue.objects.reviewable_by(reviewer).filter(slug="team-a")) == [a]


def test_the_reviewers_page_of_an_unknown_queue_is_a_404(client: Client, operator: User) -> None:
    client.force_login(operator)
    response = client.get(reverse("ops:queue", args=["nope"]))
    assert response.status_code == 404
    assert "nope" in response.content.decode()


# --- routing rules ------------------------------------------------------------------------------


def _rule_data(**fields: Any) -> dict[str, Any]:
    data = {"producer": "", "task_kind": "", "min_priority": "", "max_priority": "", "task_id_prefix": ""}
    data.update({"queue": "team-a", "enabled": "on"})
    data.update(fields)
    return data


def test_rules_are_added_last_and_routing_follows_at_once(
    client: Client, operator: User, two_queues: tuple[Queue, Queue]
) -> None:
    client.force_login(operator)
    assert routing.resolve(None, producer="bot", task_kind="", priority=0, task_id="x").slug == "default"
    client.post(reverse("ops:routing"), _rule_data(producer="bot"))
    client.post(reverse("ops:routing"), _rule_data(producer="bot", queue="team-b"))
    rules = list(RoutingRule.objects.order_by("position"))
    assert [(r.position, r.queue.slug) for r in rules] == [(0, "team-a"), (1, "team-b")]
    assert routing.resolve(None, producer="bot", task_kind="", priority=0, task_id="x").slug == "team-a"


def test_a_rule_is_validated_next_to_its_fields(
    client: Client, operator: User, two_queues: tuple[Queue, Queue]
) -> None:
    services.archive_queue(queue=two_queues[1], user=None)
    client.force_login(operator)
    response = client.post(reverse("ops:routing"), _rule_data(min_priority="5", max_priority="2", producer="kept"))
    assert response.status_code == 400
    assert "max_priority" in response.context["form"].errors
    assert 'value="kept"' in response.content.decode()
    for target in ("team-b", "nope"):  # archived, unknown
        response = client.post(reverse("ops:routing"), _rule_data(queue=target))
        assert response.status_code == 400
        assert "queue" in response.context["form"].errors
    assert not RoutingRule.objects.exists()


def test_a_rule_is_edited_moved_and_deleted(client: Client, operator: User, two_queues: tuple[Queue, Queue]) -> None:
    a, b = two_queues
    first = RoutingRule.objects.create(queue=a, position=0, producer="one")
    second = RoutingRule.objects.create(queue=b, position=1, producer="two")
    third = RoutingRule.objects.create(queue=b, position=2, producer="three")
    client.force_login(operator)
    client.post(
        reverse("ops:routing_rule", args=[first.pk]), _rule_data(producer="one", task_kind="open", queue="team-b")
    )
    first.refresh_from_db()
    assert (first.task_kind, first.queue) == ("open", b)
    client.post(reverse("ops:routing_rule_move", args=[third.pk, "up"]))
    assert list(RoutingRule.objects.order_by("position").values_list("producer", flat=True)) == ["one", "three", "two"]
    client.post(reverse("ops:routing_rule_move", args=[first.pk, "up"]))  # already first: stays
    assert list(RoutingRule.objects.order_by("position").values_list("producer", flat=True)) == ["one", "three", "two"]
    client.post(reverse("ops:routing_rule_move", args=[first.pk, "down"]))
    assert list(RoutingRule.objects.order_by("position").values_list("producer", flat=True)) == ["three", "one", "two"]
    assert client.post(reverse("ops:routing_rule_move", args=[first.pk, "sideways"])).status_code == 400
    client.post(reverse("ops:routing_rule_delete", args=[second.pk]))
    assert not RoutingRule.objects.filter(pk=second.pk).exists()
    assert routing.resolve(None, producer="two", task_kind="", priority=0, task_id="x").slug == "default"


def test_the_preview_says_where_work_would_go(client: Client, operator: User, two_queues: tuple[Queue, Queue]) -> None:
    a, b = two_queues
    RoutingRule.objects.create(queue=a, position=0, min_priority=5)
    RoutingRule.objects.create(queue=b, position=1, task_id_prefix="nightly-")
    RoutingRule.objects.create(queue=a, position=2, producer="off", enabled=False)
    client.force_login(operator)
    cases = [
        ({"priority": "5", "task_id": "nightly-1"}, "team-a"),
        ({"priority": "4", "task_id": "nightly-1"}, "team-b"),
        ({"priority": "4", "task_id": "daily-1"}, "default"),
        ({"priority": "0", "producer": "off"}, "default"),  # a disabled rule is skipped
    ]
    for query, expected in cases:
        response = client.get(reverse("ops:routing"), query)
        assert response.context["target"].queue == expected, query
        assert f"It goes to <strong>{expected}</strong>" in response.content.decode()


def test_the_preview_names_the_rule_that_matched(
    client: Client, operator: User, two_queues: tuple[Queue, Queue]
) -> None:
    a, b = two_queues
    RoutingRule.objects.create(queue=a, position=0, producer="off", enabled=False)
    RoutingRule.objects.create(queue=a, position=1, min_priority=5)
    RoutingRule.objects.create(queue=b, position=2, producer="ci-bot", task_kind="open")
    client.force_login(operator)
    body = client.get(reverse("ops:routing"), {"producer": "ci-bot", "task_kind": "open", "priority": "0"})
    text = body.content.decode()
    assert "matched rule #3: producer=ci-bot, task kind=open → queue team-b" in text
    body = client.get(reverse("ops:routing"), {"producer": "x", "priority": "0"}).content.decode()
    assert "no enabled rule matches, so it goes to the default queue" in body


def test_task_kind_is_chosen_from_the_kinds_seen(
    client: Client, operator: User, two_queues: tuple[Queue, Queue], admit_item: Any
) -> None:
    from django.core.cache import cache

    from reviewqueue.selectors import routing as routing_selectors

    cache.delete(routing_selectors.TASK_KINDS_CACHE_KEY)
    admit_item(task_kind="essay")
    client.force_login(operator)
    body = client.get(reverse("ops:routing")).content.decode()
    for form_id in ("add-route", "route-preview"):
        form = re.search(rf'<form[^>]*id="{form_id}".*?</form>', body, re.DOTALL).group(0)
        select = re.search(r'<select name="task_kind".*?</select>', form, re.DOTALL)
        assert select is not None, form_id
        options = re.findall(r'<option value="([^"]*)"', select.group(0))
        assert options == ["", "essay", "grey", "open", "verifiable"]
    response = client.post(reverse("ops:routing"), _rule_data(task_kind="made-up"))
    assert response.status_code == 400
    assert not RoutingRule.objects.exists()
    assert client.post(reverse("ops:routing"), _rule_data(task_kind="essay")).status_code == 302
    assert RoutingRule.objects.get().task_kind == "essay"


# --- the admin ------------------------------------------------------------------------------------


@pytest.fixture
def staff_operator(operator: User) -> User:
    operator.is_staff = True
    operator.save()
    return operator


def test_the_admin_adds_a_queue_through_the_service(client: Client, staff_operator: User) -> None:
    Queue.default()
    client.force_login(staff_operator)
    form = client.get("/admin/reviewqueue/queue/add/").context["adminform"].form
    data = {name: form.initial.get(name, form.fields[name].initial) for name in Queue.EDITABLE_FIELDS}
    data = {k: v for k, v in data.items() if v is not None and k != "gold_pause"}
    data.update(slug="from-admin", name="From the admin", capacity=12)
    response = client.post("/admin/reviewqueue/queue/add/", data)
    assert response.status_code == 302, response.content.decode()[:3000]
    queue = Queue.objects.get(slug="from-admin")
    assert queue.capacity == 12
    assert PolicyAudit.objects.get(queue=queue).changes == {"created": [None, "from-admin"]}


def test_the_admin_changes_its_own_queue_only(
    client: Client, staff_operator: User, two_queues: tuple[Queue, Queue], admit_item: Any
) -> None:
    a, b = two_queues
    admit_item(queue="team-b")
    client.force_login(staff_operator)
    url = f"/admin/reviewqueue/queue/{b.pk}/change/"
    form = client.get(url).context["adminform"].form
    data = {name: form.initial[name] for name in Queue.EDITABLE_FIELDS if form.initial.get(name) is not None}
    data.pop("gold_pause", None)
    data.update(name="Team B renamed", capacity=44)
    assert client.post(url, data).status_code == 302
    a.refresh_from_db()
    b.refresh_from_db()
    assert (b.capacity, b.name, b.depth) == (44, "Team B renamed", 1)
    assert a.capacity == 10
    assert Queue.default().capacity == 50


def test_the_admin_archives_restores_and_never_deletes(
    client: Client, staff_operator: User, two_queues: tuple[Queue, Queue]
) -> None:
    a, _ = two_queues
    client.force_login(staff_operator)
    changelist = "/admin/reviewqueue/queue/"
    client.post(changelist, {"action": "archive", "_selected_action": [a.pk]})
    assert Queue.objects.get(pk=a.pk).archived
    client.post(changelist, {"action": "restore", "_selected_action": [a.pk]})
    assert not Queue.objects.get(pk=a.pk).archived
    assert client.post(f"/admin/reviewqueue/queue/{a.pk}/delete/", {"post": "yes"}).status_code == 403
    default = Queue.default()
    client.post(changelist, {"action": "archive", "_selected_action": [default.pk]})
    assert not Queue.default().archived


def test_the_admin_edits_routing_rules_and_routing_follows(
    client: Client, staff_operator: User, two_queues: tuple[Queue, Queue]
) -> None:
    a, b = two_queues
    client.force_login(staff_operator)
    response = client.post(
        "/admin/reviewqueue/routingrule/add/",
        {"queue": b.pk, "position": 0, "producer": "admin-bot", "task_kind": "", "task_id_prefix": "", "enabled": "on"},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert routing.resolve(None, producer="admin-bot", task_kind="", priority=0, task_id="x").slug == "team-b"
    services.archive_queue(queue=a, user=None)
    choices = client.get("/admin/reviewqueue/routingrule/add/").context["adminform"].form.fields["queue"].queryset
    assert a not in choices and b in choices


@pytest.mark.parametrize("slug", ["Team_A", "team_a", "Team A!", "9lives"])
def test_a_bad_slug_gets_one_error_stating_our_rule(client: Client, operator: User, slug: str) -> None:
    """Not Django's own slug message (letters, underscores allowed) beside ours."""
    client.force_login(operator)
    response = client.post(reverse("ops:queues"), {"slug": slug, "name": "Kept name", "capacity": "5"})
    assert response.status_code == 400
    errors = response.context["form"].errors["slug"]
    assert len(errors) == 1, errors
    assert "lowercase letters, digits and hyphens" in errors[0]
    assert "underscores" not in response.content.decode()


@pytest.mark.parametrize("name", ["Night\x07shift", "Night\x1b[31mshift", "Night\nshift", "Night\u2028shift"])
def test_a_queue_name_with_control_characters_is_refused_beside_the_field(
    client: Client, operator: User, name: str
) -> None:
    """A bell, an escape or a line break in a name would travel into every
    page, log line and export that shows the queue."""
    client.force_login(operator)
    response = client.post(reverse("ops:queues"), {"slug": "night-shift", "name": name, "capacity": "5"})
    assert response.status_code == 400
    errors = response.context["form"].errors["name"]
    assert errors == ["A queue's name is printable text: no control characters or line breaks."]
    assert 'id="id_name_error"' in response.content.decode()
    assert not Queue.objects.filter(slug="night-shift").exists()


def test_the_routing_page_has_no_duplicate_id_and_each_label_points_into_its_own_form(
    client: Client, operator: User
) -> None:
    client.force_login(operator)
    body = client.get(reverse("ops:routing") + "?producer=ci-bot&task_kind=&priority=5&task_id=x").content.decode()
    ids = re.findall(r'\bid="([^"]+)"', body)
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    for form_id in ("add-route", "route-preview"):
        form = re.search(rf'<form[^>]*id="{form_id}".*?</form>', body, re.DOTALL)
        assert form is not None
        for target in re.findall(r'<label[^>]*\bfor="([^"]+)"', form.group(0)):
            assert f'id="{target}"' in form.group(0), (form_id, target)
