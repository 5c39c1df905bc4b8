"""Reads for the what-if page: what a simulation from live data starts from."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from ..models import Queue, ReviewItem

# The most waiting items a live what-if starts from (simulation.scenario.MAX_BACKLOG
# allows more; a form field carries these, so keep it a page's worth of numbers).
BACKLOG_LIMIT = 5_000


def waiting_ages(queue: Queue, *, now: datetime | None = None, limit: int = BACKLOG_LIMIT) -> list[float]:
    """The ages in minutes, oldest first, of the queue's waiting items
    (pending or claimed, as the kept depth counts them), to one decimal:
    today's backlog, as plain numbers the simulation takes. One statement,
    bounded by ``limit``, through the index of waiting items by age."""
    now = now or timezone.now()
    arrived = (
        ReviewItem.objects.filter(queue=queue, status__in=ReviewItem.WAITING)
        .order_by("created_at", "pk")
        .values_list("created_at", flat=True)[:limit]
    )
    return [round(max((now - at).total_seconds(), 0.0) / 60, 1) for at in arrived]
