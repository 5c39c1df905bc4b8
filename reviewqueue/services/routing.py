"""Which queue a piece of work goes to (ARCHITECTURE.md, "Many queues").

A producer may name the queue (its slug). Otherwise the enabled routing rules
decide, in position order, through ``policy.route``: the first match wins and
work no rule matches goes to the queue ``default``. An unknown slug and an
archived queue are refused, naming the slug.

Admission runs this for every output, so the queues' slugs and the rules are
kept in this process for ``ROUTING_CACHE_SECONDS`` (derived state: a change in
this process drops it at once through ``forget``, a change in another
process is seen within that time; an unknown slug is re-read before it is
refused, so a queue created a moment ago is never refused). Whether a queue
is archived is checked again under its lock by the admission itself. Takes
no lock.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Max

from .. import policy
from ..models import DEFAULT_QUEUE, Queue, RoutingRule
from .errors import InvalidInput

ROUTING_CACHE_SECONDS = 2.0


@dataclass(frozen=True)
class Target:
    """A queue work can be sent to: its pk and slug."""

    pk: int
    slug: str


@dataclass(frozen=True)
class _Routes:
    queues: dict[str, tuple[int, bool]]  # slug -> (pk, archived)
    rules: tuple[policy.RoutingRule, ...]
    read_at: float


_routes: _Routes | None = None
_lock = threading.Lock()


def forget() -> None:
    """Drop the kept queues and rules (a queue or a rule changed)."""
    global _routes
    with _lock:
        _routes = None


def _read() -> _Routes:
    global _routes
    Queue.default()  # the fallback exists
    queues = {
        slug: (pk, archived is not None)
        for pk, slug, archived in Queue.objects.values_list("pk", "slug", "archived_at")
    }
    rules = tuple(
        rule.rule()
        for rule in RoutingRule.objects.filter(enabled=True, queue__archived_at__isnull=True).select_related("queue")
    )
    routes = _Routes(queues, rules, time.monotonic())
    with _lock:
        _routes = routes
    return routes


def _current() -> _Routes:
    routes = _routes
    if routes is None or time.monotonic() - routes.read_at > ROUTING_CACHE_SECONDS:
        routes = _read()
    return routes


def resolve(slug: str | None, *, producer: str, task_kind: str, priority: int, task_id: str) -> Target:
    """The queue this work goes to: ``slug`` when given, else the routing
    rules' choice. ``InvalidInput`` (field ``queue``) names an unknown or
    archived queue."""
    routes = _current()
    if slug is None or slug == "":
        slug = policy.route(
            routes.rules,
            producer=producer,
            task_kind=task_kind,
            priority=priority,
            task_id=task_id,
            default=DEFAULT_QUEUE,
        )
    elif not isinstance(slug, str):
        raise InvalidInput("queue", "must be a queue's slug (text)")
    found = routes.queues.get(slug)
    if found is None or found[1]:
        found = _read().queues.get(slug)  # created or restored a moment ago?
    if found is None:
        raise InvalidInput("queue", f"unknown queue {slug[:60]!r}")
    pk, archived = found
    if archived:
        raise InvalidInput("queue", f"queue {slug!r} is archived: it accepts nothing new")
    return Target(pk, slug)


def target_of(
    queue: Queue | str | None, *, producer: str, task_kind: str, priority: int, task_id: str, check: bool = False
) -> Target:
    """``resolve`` for a caller holding a queue row, a slug or nothing. A row
    is taken as it is, archived or not: the services pass rows only for work
    a queue accepted before (a run's output, a resumed run), which an
    archive does not turn away.

    ``check``: confirm the routed queue in the database (one query), for a
    caller that takes no queue lock to find out, as admission does: the
    process's copy of the queues may be up to ROUTING_CACHE_SECONDS old."""
    if isinstance(queue, Queue):
        return Target(queue.pk, queue.slug)
    target = resolve(queue, producer=producer, task_kind=task_kind, priority=priority, task_id=task_id)
    if check:
        row = Queue.objects.filter(pk=target.pk).values_list("archived_at").first()
        if row is None:  # deleted since it was read (a restored database): read the queues again
            forget()
            return resolve(queue, producer=producer, task_kind=task_kind, priority=priority, task_id=task_id)
        if row[0] is not None:
            raise InvalidInput("queue", f"queue {target.slug!r} is archived: it accepts nothing new")
    return target


# --- changing the rules ---------------------------------------------------------------------------
# The page writes rules only through these; each drops this process's copy of
# the rules, as a change must (other processes refresh within their TTL).


def _renumber() -> list[RoutingRule]:
    """The rules in order with positions 0, 1, 2, ... (written only where they
    differ), locked for the caller's transaction."""
    rules = list(RoutingRule.objects.select_for_update().order_by("position", "pk"))
    for i, rule in enumerate(rules):
        if rule.position != i:
            rule.position = i
            RoutingRule.objects.filter(pk=rule.pk).update(position=i)
    return rules


def rule_add(*, rule: RoutingRule) -> RoutingRule:
    """Save a new (unsaved) rule last in the order. Not safe to repeat: each
    call adds a rule."""
    with transaction.atomic():
        last = RoutingRule.objects.select_for_update().aggregate(p=Max("position"))["p"]
        rule.position = 0 if last is None else last + 1
        rule.save()
    forget()
    return rule


def rule_save(*, rule: RoutingRule) -> RoutingRule:
    """Save a rule as it is, at its own position (an edited rule, or one the
    command places). Safe to repeat for an edited rule."""
    rule.save()
    forget()
    return rule


def rule_delete(*, rule_id: int) -> None:
    """Delete a rule; the others keep their order. Safe to repeat."""
    RoutingRule.objects.filter(pk=rule_id).delete()
    forget()


def rule_move(*, rule_id: int, step: int) -> None:
    """Swap a rule with its neighbour ``step`` (-1 above, 1 below) away; the
    first and last stay put. Not safe to repeat (it moves again)."""
    with transaction.atomic():
        rules = _renumber()
        i = next((i for i, r in enumerate(rules) if r.pk == rule_id), None)
        if i is None:
            return
        j = i + step
        if 0 <= j < len(rules):
            RoutingRule.objects.filter(pk=rules[i].pk).update(position=j)
            RoutingRule.objects.filter(pk=rules[j].pk).update(position=i)
    forget()
