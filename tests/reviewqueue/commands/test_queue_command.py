"""``manage.py queue``: the operators' queue work from the command line,
through the same services as the pages."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from reviewqueue import services
from reviewqueue.models import PolicyAudit, Queue, RoutingRule

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("queue", *args, stdout=out)
    return out.getvalue()


def test_create_list_archive_and_restore() -> None:
    assert "created payments" in run("create", "payments", "--name", "Payments", "--capacity", "12")
    queue = Queue.objects.get(slug="payments")
    assert (queue.name, queue.capacity, queue.open_to_all) == ("Payments", 12, False)
    assert PolicyAudit.objects.filter(queue=queue).exists()
    listing = run("list")
    assert "payments" in listing and "0/12" in listing and "default" in listing
    run("archive", "payments")
    assert Queue.objects.get(slug="payments").archived and "archived" in run("list")
    run("restore", "payments")
    assert not Queue.objects.get(slug="payments").archived


def test_create_can_copy_another_queues_policy() -> None:
    services.policy_update(user=None, changes={"capacity": 77, "step_limit": 9, "max_step_limit": 20})
    run("create", "copy", "--copy-from", "default", "--open-to-all")
    copy = Queue.objects.get(slug="copy")
    assert (copy.capacity, copy.step_limit, copy.max_step_limit, copy.open_to_all) == (77, 9, 20, True)
    assert (copy.depth, copy.mode) == (0, "normal")  # the policy, not the state


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("create", "Bad Slug"), "slug"),
        (("create", "default"), "already exists"),
        (("create", "x", "--capacity", "0"), "capacity"),
        (("archive", "default"), "cannot be archived"),
        (("archive", "ghost"), "no queue 'ghost'"),
        (("members", "default", "--add-user", "nobody"), "no user 'nobody'"),
        (("route", "default", "--min-priority", "5", "--max-priority", "1"), "max_priority"),
    ],
)
def test_bad_input_is_a_clear_error_and_changes_nothing(args: tuple[str, ...], message: str) -> None:
    Queue.default()
    before = list(Queue.objects.values())
    with pytest.raises(CommandError, match=message):
        run(*args)
    assert list(Queue.objects.values()) == before
    assert not RoutingRule.objects.exists()


def test_members_and_routes(make_user: Any, roles: dict[str, Any]) -> None:
    make_user("ann", "reviewer")
    run("create", "docs")
    out = run("members", "docs", "--add-user", "ann", "--add-group", roles["reviewer"].name)
    assert "users ann" in out and roles["reviewer"].name in out
    run("members", "docs", "--remove-user", "ann", "--open-to-all", "yes")
    docs = Queue.objects.get(slug="docs")
    assert docs.open_to_all and not docs.members.exists()
    run("route", "docs", "--task-kind", "open", "--task-id-prefix", "docs/")
    assert services.routing.resolve(None, producer="p", task_kind="open", priority=1, task_id="docs/a").slug == "docs"


def test_exist_ok_makes_create_and_route_repeatable() -> None:
    for _ in range(2):
        run("create", "docs", "--exist-ok", "--capacity", "5")
        run("route", "docs", "--task-kind", "open", "--exist-ok")
    assert Queue.objects.filter(slug="docs").count() == 1
    assert RoutingRule.objects.count() == 1
