"""Operator decisions on the queues: creating and archiving a queue, its
policy settings and its filter rules (ARCHITECTURE.md rule 8, "Many queues").

``policy_update`` and ``archive_queue`` lock the queue's row
(``Queue.locked(queue)``), as every change to watermarks or depth does. ``decide_rule`` changes one filter rule's
row with a single UPDATE and takes no lock of its own.
Not to be confused with ``reviewqueue.policy``, the pure decisions.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, Group
from django.db import transaction
from django.utils import timezone

from ..models import DEFAULT_QUEUE, FilterRule, PolicyAudit, Queue, StepLimitChange
from . import routing
from .depth import after_depth_change, queue_depth
from .errors import InvalidInput, QueueError, UnknownGate
from .leases import release_lost_leases
from .review_quality import forget_gold_settings

log = logging.getLogger("reviewqueue.services")


def create_queue(
    *, user: AbstractBaseUser | None, slug: str, name: str = "", settings: dict[str, object] | None = None
) -> Queue:
    """A new queue with the default policy, changed by ``settings`` (policy
    fields); audited as its first policy change. Raises ValidationError
    naming the field (a bad or taken slug, a bad setting)."""
    unknown = set(settings or {}) - set(Queue.EDITABLE_FIELDS)
    if unknown:
        raise InvalidInput(min(unknown), "is not a policy setting")
    queue = Queue(slug=slug, name=name or slug, **(settings or {}))
    queue.full_clean()
    with transaction.atomic():
        queue.save()
        PolicyAudit.objects.create(queue=queue, user=user, changes={"created": [None, queue.slug]})
    routing.forget()
    log.info("queue created", extra={"queue": queue.slug, "user": getattr(user, "username", None)})
    return queue


def archive_queue(*, queue: Queue | int, user: AbstractBaseUser | None, archived: bool = True) -> Queue:
    """Archive a queue (or bring it back): it accepts nothing new (producers
    naming it get a 400, routing rules to it are skipped) and keeps its items
    and history; waiting items can still be reviewed. The default queue,
    where unrouted work goes, cannot be archived. Safe to repeat."""
    with transaction.atomic():
        locked = Queue.locked(queue)
        if archived and locked.slug == DEFAULT_QUEUE:
            raise InvalidInput("queue", "the default queue takes all unrouted work; it cannot be archived")
        if locked.archived == archived:
            return locked
        locked.archived_at = timezone.now() if archived else None
        locked.save(update_fields=["archived_at", "updated_at"])
        PolicyAudit.objects.create(queue=locked, user=user, changes={"archived": [not archived, archived]})
    routing.forget()
    log.info(
        "queue archived" if archived else "queue restored",
        extra={"queue": locked.slug, "user": getattr(user, "username", None)},
    )
    return locked


def set_reviewers(
    *,
    queue: Queue,
    user: AbstractBaseUser | None,
    open_to_all: bool,
    members: Iterable[AbstractBaseUser],
    groups: Iterable[Group],
) -> dict[str, list[Any]]:
    """Set who reviews ``queue``: every reviewer (``open_to_all``), or these
    users and the users of these groups; audited like a policy change.
    Writes only those columns, never the row's depth or mode (the services'
    state), and takes no lock: membership is not queue state. Leases held
    on the queue's items by users no longer among its reviewers are released
    in the same transaction. Answers the changes made (field: [before, after])."""
    members, groups = list(members), list(groups)
    before = {
        "open_to_all": queue.open_to_all,
        "members": sorted(queue.members.values_list("username", flat=True)),
        "member_groups": sorted(queue.member_groups.values_list("name", flat=True)),
    }
    after = {
        "open_to_all": bool(open_to_all),
        "members": sorted(u.get_username() for u in members),
        "member_groups": sorted(g.name for g in groups),
    }
    diff = {name: [before[name], after[name]] for name in after if before[name] != after[name]}
    if not diff:
        return diff
    with transaction.atomic():
        Queue.objects.filter(pk=queue.pk).update(open_to_all=after["open_to_all"])
        queue.open_to_all = after["open_to_all"]
        queue.members.set(members)
        queue.member_groups.set(groups)
        release_lost_leases(queue_ids=[queue.pk])  # a reviewer taken off the queue holds none of it
        PolicyAudit.objects.create(queue=queue, user=user, changes=diff)
    log.info("queue reviewers changed", extra={"queue": queue.slug, "changes": diff})
    return diff


def policy_update(
    *, user: AbstractBaseUser | None, changes: dict[str, object], queue: Queue | int | None = None
) -> Queue:
    """Change a queue's policy fields (the default queue's when none is
    named) after validation; audited (who, when, before -> after).
    Raises django.core.exceptions.ValidationError naming the fields."""
    unknown = set(changes) - set(Queue.EDITABLE_FIELDS)
    if unknown:
        raise InvalidInput(min(unknown), "is not a policy setting")
    with transaction.atomic():
        queue = Queue.locked(queue)
        before = queue.snapshot()
        for name, value in changes.items():
            setattr(queue, name, value)
        queue.full_clean()
        after = queue.snapshot()
        diff = {name: [before[name], after[name]] for name in after if before[name] != after[name]}
        if not diff:
            return queue
        queue.save()
        PolicyAudit.objects.create(queue=queue, user=user, changes=diff)
        if "step_limit" in diff:
            StepLimitChange.objects.create(
                queue=queue, previous=before["step_limit"], step_limit=queue.step_limit, changed_by=user
            )
        after_depth_change(queue, queue_depth(queue), timezone.now())  # new watermarks; recount while at it
        if "gold_rate" in diff:
            forget_gold_settings()
        log.info(
            "policy changed", extra={"queue": queue.slug, "changes": diff, "user": getattr(user, "username", None)}
        )
        return queue


def decide_rule(*, rule_id: int, status: str, user: AbstractBaseUser | None, now: datetime | None = None) -> FilterRule:
    """Enable, dismiss or re-propose a filter rule, recording who decided and when.

    Admission refuses to run a gate this version does not know, so enabling
    such a rule raises UnknownGate and changes nothing; an unknown rule or
    status raises QueueError / InvalidInput. Safe to repeat: the same decision
    again only moves ``decided_at``.
    """
    if status not in FilterRule.Status.values:
        raise InvalidInput("status", f"must be one of {', '.join(FilterRule.Status.values)}")
    rule = FilterRule.objects.filter(pk=rule_id).first()
    if rule is None:
        raise QueueError(f"filter rule {rule_id} does not exist")
    if status == FilterRule.Status.ENABLED:
        from loops.gates import GATES  # loops is pure; imported late to keep start-up light

        if rule.gate not in GATES:
            raise UnknownGate("this rule's gate is not one this version knows; it cannot be enabled")
    rule.status, rule.decided_by, rule.decided_at = status, user, now or timezone.now()
    FilterRule.objects.filter(pk=rule.pk).update(status=rule.status, decided_by=user, decided_at=rule.decided_at)
    return rule
