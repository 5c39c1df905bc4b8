"""Reads for the routing page: which task kinds to offer, and which rule a
piece of work would match."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.cache import cache

from loops.spec import TaskKind

from ..models import DEFAULT_QUEUE, ReviewItem, RoutingRule

# The kinds seen are one DISTINCT over every item: kept a few minutes, so the
# page costs it once in a while rather than at every view.
TASK_KINDS_CACHE_KEY = "routing:task-kinds"
TASK_KINDS_SECONDS = 300


def task_kinds() -> list[str]:
    """The task kinds an operator may route on: the loops' own kinds, every
    kind an item has arrived with, and every kind a rule already names."""
    seen = cache.get(TASK_KINDS_CACHE_KEY)
    if seen is None:
        items = ReviewItem.objects.exclude(task_kind="").values_list("task_kind", flat=True).distinct()
        seen = sorted(set(items))
        cache.set(TASK_KINDS_CACHE_KEY, seen, TASK_KINDS_SECONDS)
    named = RoutingRule.objects.exclude(task_kind="").values_list("task_kind", flat=True).distinct()
    return sorted({*(str(kind) for kind in TaskKind), *seen, *named})


@dataclass(frozen=True)
class RoutePreview:
    """Where a piece of work would go, and the rule that sent it there (its
    number as the page lists the rules), or None when no rule matched."""

    queue: str
    rule: RoutingRule | None = None
    number: int | None = None

    @property
    def conditions(self) -> str:
        """The matched rule's conditions, as "producer=… task kind=…"."""
        rule = self.rule
        if rule is None:
            return ""
        parts = [f"producer={rule.producer}"] if rule.producer else []
        parts += [f"task kind={rule.task_kind}"] if rule.task_kind else []
        if rule.min_priority is not None or rule.max_priority is not None:
            low = "…" if rule.min_priority is None else rule.min_priority
            high = "…" if rule.max_priority is None else rule.max_priority
            parts.append(f"priority {low} to {high}")
        parts += [f"task id starts with {rule.task_id_prefix}"] if rule.task_id_prefix else []
        return ", ".join(parts) or "matches anything"


def route_preview(*, producer: str, task_kind: str, priority: int, task_id: str) -> RoutePreview:
    """The first enabled rule to an active queue that this work matches, by
    the rule's own ``matches`` (the one routing applies), in the page's order;
    the default queue when none does."""
    rows = RoutingRule.objects.select_related("queue").order_by("position", "pk")
    for number, row in enumerate(rows, start=1):
        if not row.enabled or row.queue.archived:
            continue
        if row.rule().matches(producer=producer, task_kind=task_kind, priority=priority, task_id=task_id):
            return RoutePreview(row.queue.slug, row, number)
    return RoutePreview(DEFAULT_QUEUE)
