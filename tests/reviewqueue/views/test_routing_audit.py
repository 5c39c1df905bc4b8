"""Routing-rule changes appear in the policy audit log, whoever makes them:
the routing page, ``manage.py queue route`` and the admin all write through
services.routing."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from reviewqueue import services
from reviewqueue.models import PolicyAudit, Queue, RoutingRule

pytestmark = pytest.mark.django_db


@pytest.fixture
def docs(db: None) -> Queue:
    return services.create_queue(user=None, slug="docs")


def _rule_log(queue: Queue) -> list[tuple[str | None, dict[str, Any]]]:
    audits = PolicyAudit.objects.filter(queue=queue).select_related("user").order_by("pk")
    return [
        (a.user.username if a.user else None, a.changes)
        for a in audits
        if any(k.startswith("routing rule #") for k in a.changes)
    ]


def _rule_data(**fields: Any) -> dict[str, Any]:
    data = {"producer": "", "task_kind": "", "min_priority": "", "max_priority": "", "task_id_prefix": ""}
    data.update({"queue": "docs", "enabled": "on"})
    data.update(fields)
    return data


def test_the_routing_page_audits_each_change(client: Client, operator: User, docs: Queue) -> None:
    client.force_login(operator)
    client.post(reverse("ops:routing"), _rule_data(producer="bot"))
    client.post(reverse("ops:routing"), _rule_data(task_kind="open"))
    first, second = RoutingRule.objects.order_by("position")
    client.post(reverse("ops:routing_rule", args=[first.pk]), _rule_data(producer="bot", task_id_prefix="docs/"))
    client.post(reverse("ops:routing_rule_move", args=[second.pk, "up"]))
    client.post(reverse("ops:routing_rule_delete", args=[first.pk]))
    key1, key2 = f"routing rule #{first.pk}", f"routing rule #{second.pk}"
    assert _rule_log(docs) == [
        ("otto", {key1: [None, "producer bot -> docs"]}),
        ("otto", {key2: [None, "kind open -> docs"]}),
        ("otto", {key1: ["producer bot -> docs", "producer bot, task id docs/* -> docs"]}),
        ("otto", {key2: ["position #2", "position #1"]}),
        ("otto", {key1: ["producer bot, task id docs/* -> docs", None]}),
    ]
    policy_page = client.get(reverse("ops:policy") + "?queue=docs").content.decode()
    assert f"<code>{key1}</code>" in policy_page


def test_the_command_audits_the_rule_it_adds(docs: Queue) -> None:
    call_command("queue", "route", "docs", "--task-kind", "open", "--exist-ok", stdout=StringIO())
    call_command("queue", "route", "docs", "--task-kind", "open", "--exist-ok", stdout=StringIO())
    rule = RoutingRule.objects.get()
    assert _rule_log(docs) == [(None, {f"routing rule #{rule.pk}": [None, "kind open -> docs"]})]


def test_the_admin_audits_each_change(client: Client, operator: User, docs: Queue) -> None:
    operator.is_staff = True
    operator.save()
    client.force_login(operator)
    add = {"queue": docs.pk, "position": 3, "producer": "admin-bot", "task_kind": "", "task_id_prefix": ""}
    assert client.post("/admin/reviewqueue/routingrule/add/", {**add, "enabled": "on"}).status_code == 302
    rule = RoutingRule.objects.get()
    assert client.post(f"/admin/reviewqueue/routingrule/{rule.pk}/change/", add).status_code == 302
    assert client.post(f"/admin/reviewqueue/routingrule/{rule.pk}/delete/", {"post": "yes"}).status_code == 302
    key = f"routing rule #{rule.pk}"
    assert _rule_log(docs) == [
        ("otto", {key: [None, "producer admin-bot -> docs"]}),
        ("otto", {key: ["producer admin-bot -> docs", "producer admin-bot -> docs (disabled)"]}),
        ("otto", {key: ["producer admin-bot -> docs (disabled)", None]}),
    ]
