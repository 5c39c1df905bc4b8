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

import logging
import threading
import time
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Max

from .. import policy
from ..models import DEFAULT_QUEUE, PolicyAudit, Queue, RoutingRule
from .errors import InvalidInput

ROUTING_CACHE_SECONDS = 2.0

log = logging.getLogger("reviewqueue.services")


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
# The page, ``manage.py queue route`` and the admin write rules only through
# these. Each write is audited on the rule's queue like a policy change (who,
# when, before -> after; ``user`` None is the command line) and drops this
# process's copy of the rules, as a change must (other processes refresh
# within their TTL).


def describe(rule: RoutingRule) -> str:
    """A rule in one line for the change log: what it matches and where it
    sends the work."""
    parts = [f"producer {rule.producer}" if rule.producer else "", f"kind {rule.task_kind}" if rule.task_kind else ""]
    if rule.min_priority is not None or rule.max_priority is not None:
        low = "" if rule.min_priority is None else rule.min_priority
        high = "" if rule.max_priority is None else rule.max_priority
        parts.append(f"priority {low}..{high}")
    if rule.task_id_prefix:
        parts.append(f"task id {rule.task_id_prefix}*")
    matched = ", ".join(p for p in parts if p) or "any work"
    return f"{matched} -> {rule.queue.slug}{'' if rule.enabled else ' (disabled)'}"


def _audit(queue: Queue, user: AbstractBaseUser | None, rule_id: int, before: object, after: object) -> None:
    PolicyAudit.objects.create(queue=queue, user=user, changes={f"routing rule #{rule_id}": [before, after]})


def _log(what: str, rule_id: int, user: AbstractBaseUser | None) -> None:
    log.info(what, extra={"rule": rule_id, "user": getattr(user, "username", None)})


def _renumber() -> list[RoutingRule]:
    """The rules in order with positions 0, 1, 2, ... (written only where they
    differ), locked for the caller's transaction."""
    rules = list(RoutingRule.objects.select_for_update().order_by("position", "pk"))
    for i, rule in enumerate(rules):
        if rule.position != i:
            rule.position = i
            RoutingRule.objects.filter(pk=rule.pk).update(position=i)
    return rules


def rule_add(*, rule: RoutingRule, user: AbstractBaseUser | None) -> RoutingRule:
    """Save a new (unsaved) rule last in the order. Not safe to repeat: each
    call adds a rule."""
    with transaction.atomic():
        last = RoutingRule.objects.select_for_update().aggregate(p=Max("position"))["p"]
        rule.position = 0 if last is None else last + 1
        rule.save()
        _audit(rule.queue, user, rule.pk, None, describe(rule))
    forget()
    _log("routing rule added", rule.pk, user)
    return rule


def rule_save(*, rule: RoutingRule, user: AbstractBaseUser | None) -> RoutingRule:
    """Save a rule as it is, at its own position (an edited rule, or one the
    command or the admin places). Safe to repeat for an edited rule: an
    unchanged rule writes no audit entry."""
    with transaction.atomic():
        old = None if rule.pk is None else RoutingRule.objects.select_related("queue").filter(pk=rule.pk).first()
        rule.save()
        before = None if old is None else describe(old)
        after = describe(rule)
        if old is not None and old.position != rule.position:
            before, after = f"#{old.position + 1}: {before}", f"#{rule.position + 1}: {after}"
        if before != after:
            _audit(rule.queue, user, rule.pk, before, after)
            if old is not None and old.queue_id != rule.queue_id:  # the queue it no longer receives work from
                _audit(old.queue, user, rule.pk, before, after)
    forget()
    _log("routing rule saved", rule.pk, user)
    return rule


def rule_delete(*, rule_id: int, user: AbstractBaseUser | None) -> None:
    """Delete a rule; the others keep their order. Safe to repeat."""
    with transaction.atomic():
        rule = RoutingRule.objects.select_for_update().select_related("queue").filter(pk=rule_id).first()
        if rule is None:
            return
        rule.delete()
        _audit(rule.queue, user, rule_id, describe(rule), None)
    forget()
    _log("routing rule deleted", rule_id, user)


def rule_move(*, rule_id: int, step: int, user: AbstractBaseUser | None) -> None:
    """Swap a rule with its neighbour ``step`` (-1 above, 1 below) away; the
    first and last stay put. Not safe to repeat (it moves again)."""
    with transaction.atomic():
        rules = _renumber()
        i = next((i for i, r in enumerate(rules) if r.pk == rule_id), None)
        if i is None:
            return
        j = i + step
        if not 0 <= j < len(rules):
            return
        RoutingRule.objects.filter(pk=rules[i].pk).update(position=j)
        RoutingRule.objects.filter(pk=rules[j].pk).update(position=i)
        _audit(rules[i].queue, user, rule_id, f"position #{i + 1}", f"position #{j + 1}")
    forget()
    _log("routing rule moved", rule_id, user)
