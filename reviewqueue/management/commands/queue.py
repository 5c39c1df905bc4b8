"""Queues from the command line: list them, create one, archive or restore
one, set who reviews it, and route work to it. The same services as the
operators' pages, so every change is validated and audited alike."""

from __future__ import annotations

import argparse
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from reviewqueue import services
from reviewqueue.models import Queue, RoutingRule
from reviewqueue.services import routing


class Command(BaseCommand):
    help = "List, create, archive or restore queues; set their reviewers; add a routing rule."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        actions.add_parser("list", help="every queue: slug, mode, depth/capacity, step limit, archived")
        create = actions.add_parser("create", help="a new queue with the default policy")
        create.add_argument("slug")
        create.add_argument("--name", default="")
        create.add_argument("--capacity", type=int)
        create.add_argument("--step-limit", type=int)
        create.add_argument("--copy-from", metavar="SLUG", help="start from this queue's policy")
        create.add_argument("--open-to-all", action="store_true", help="every reviewer may review it")
        create.add_argument("--exist-ok", action="store_true", help="a queue with this slug is left as it is")
        for name, text in (("archive", "accept nothing new; keep everything"), ("restore", "accept work again")):
            action = actions.add_parser(name, help=text)
            action.add_argument("slug")
        members = actions.add_parser("members", help="add or remove the queue's reviewers")
        members.add_argument("slug")
        members.add_argument("--add-user", action="append", default=[], metavar="USERNAME")
        members.add_argument("--remove-user", action="append", default=[], metavar="USERNAME")
        members.add_argument("--add-group", action="append", default=[], metavar="GROUP")
        members.add_argument("--remove-group", action="append", default=[], metavar="GROUP")
        members.add_argument("--open-to-all", choices=["yes", "no"], help="every reviewer may review it, or not")
        route = actions.add_parser("route", help="add a routing rule sending matching work to the queue")
        route.add_argument("slug")
        route.add_argument("--producer", default="")
        route.add_argument("--task-kind", default="")
        route.add_argument("--min-priority", type=int)
        route.add_argument("--max-priority", type=int)
        route.add_argument("--task-id-prefix", default="")
        route.add_argument("--position", type=int, default=0)
        route.add_argument("--exist-ok", action="store_true", help="an identical rule is not added twice")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "list":
            self._list()
            return
        try:
            getattr(self, f"_{action}")(options)
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from None
        except services.QueueError as exc:
            raise CommandError(exc.message) from None

    def _queue(self, slug: str) -> Queue:
        queue = Queue.objects.filter(slug=slug).first()
        if queue is None:
            raise CommandError(f"no queue {slug!r}")
        return queue

    def _list(self) -> None:
        Queue.default()
        for q in Queue.objects.order_by("archived_at", "slug"):
            state = "archived" if q.archived else q.mode
            self.stdout.write(f"{q.slug:<24} {state:<9} {q.depth:>6}/{q.capacity:<6} step limit {q.step_limit}")

    def _create(self, options: dict[str, Any]) -> None:
        if options["exist_ok"] and Queue.objects.filter(slug=options["slug"]).exists():
            self.stdout.write(f"{options['slug']} exists")
            return
        settings: dict[str, object] = {}
        if options["copy_from"]:
            settings = self._queue(options["copy_from"]).snapshot()
        for option, field in (("capacity", "capacity"), ("step_limit", "step_limit")):
            if options[option] is not None:
                settings[field] = options[option]
        queue = services.create_queue(user=None, slug=options["slug"], name=options["name"], settings=settings)
        if options["open_to_all"]:
            Queue.objects.filter(pk=queue.pk).update(open_to_all=True)
        self.stdout.write(f"created {queue.slug}")

    def _archive(self, options: dict[str, Any]) -> None:
        services.archive_queue(queue=self._queue(options["slug"]), user=None)
        self.stdout.write(f"archived {options['slug']}")

    def _restore(self, options: dict[str, Any]) -> None:
        services.archive_queue(queue=self._queue(options["slug"]), user=None, archived=False)
        self.stdout.write(f"restored {options['slug']}")

    def _members(self, options: dict[str, Any]) -> None:
        queue = self._queue(options["slug"])
        members = set(queue.members.all())
        groups = set(queue.member_groups.all())
        for key, kept in (("add_user", members), ("remove_user", members)):
            for name in options[key]:
                user = get_user_model().objects.filter(username=name).first()
                if user is None:
                    raise CommandError(f"no user {name!r}")
                (kept.add if key.startswith("add") else kept.discard)(user)
        for key in ("add_group", "remove_group"):
            for name in options[key]:
                group = Group.objects.filter(name=name).first()
                if group is None:
                    raise CommandError(f"no group {name!r}")
                (groups.add if key.startswith("add") else groups.discard)(group)
        everyone = queue.open_to_all if options["open_to_all"] is None else options["open_to_all"] == "yes"
        services.set_reviewers(queue=queue, user=None, open_to_all=everyone, members=members, groups=groups)
        names = sorted(queue.members.values_list("username", flat=True))
        groups = sorted(queue.member_groups.values_list("name", flat=True))
        self.stdout.write(f"{queue.slug}: users {', '.join(names) or '-'}; groups {', '.join(groups) or '-'}")

    def _route(self, options: dict[str, Any]) -> None:
        rule = RoutingRule(
            queue=self._queue(options["slug"]),
            position=options["position"],
            producer=options["producer"],
            task_kind=options["task_kind"],
            min_priority=options["min_priority"],
            max_priority=options["max_priority"],
            task_id_prefix=options["task_id_prefix"],
        )
        rule.full_clean()
        fields = {f: getattr(rule, f) for f in ("queue", "position", "producer", "task_kind", "task_id_prefix")}
        same = RoutingRule.objects.filter(
            **fields, min_priority=rule.min_priority, max_priority=rule.max_priority
        ).first()
        if options["exist_ok"] and same is not None:
            self.stdout.write(f"routing rule #{same.pk} exists")
            return
        routing.rule_save(rule=rule, user=None)
        self.stdout.write(f"routing rule #{rule.pk}: matching work goes to {rule.queue.slug}")
