"""Operator decisions on the queue's policy: the policy settings and the
filter rules (ARCHITECTURE.md rule 8).

``policy_update`` locks the policy row (``QueuePolicy.locked()``), as every
change to watermarks or depth does. ``decide_rule`` changes one filter rule's
row with a single UPDATE and takes no lock of its own.
Not to be confused with ``reviewqueue.policy``, the pure decisions.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from ..models import FilterRule, PolicyAudit, QueuePolicy, StepLimitChange
from .depth import after_depth_change, queue_depth
from .errors import InvalidInput, QueueError, UnknownGate
from .quality import forget_gold_settings

log = logging.getLogger("reviewqueue.services")


def policy_update(*, user: AbstractBaseUser | None, changes: dict[str, object]) -> QueuePolicy:
    """Change policy fields after validation; audited (who, when, before -> after).
    Raises django.core.exceptions.ValidationError naming the fields."""
    unknown = set(changes) - set(QueuePolicy.EDITABLE_FIELDS)
    if unknown:
        raise InvalidInput(min(unknown), "is not a policy setting")
    with transaction.atomic():
        queue = QueuePolicy.locked()
        before = queue.snapshot()
        for name, value in changes.items():
            setattr(queue, name, value)
        queue.full_clean()
        after = queue.snapshot()
        diff = {name: [before[name], after[name]] for name in after if before[name] != after[name]}
        if not diff:
            return queue
        queue.save()
        PolicyAudit.objects.create(user=user, changes=diff)
        if "step_limit" in diff:
            StepLimitChange.objects.create(previous=before["step_limit"], step_limit=queue.step_limit, changed_by=user)
        after_depth_change(queue, queue_depth(), timezone.now())  # new watermarks; recount while at it
        if "gold_rate" in diff:
            forget_gold_settings()
        log.info("policy changed", extra={"changes": diff, "user": getattr(user, "username", None)})
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
