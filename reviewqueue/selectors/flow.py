"""The live figures the "add a queue" what-if starts from: each active
queue's arrivals and the whole team's decisions over one window. Only reads."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from .. import stats
from ..models import Queue, Verdict

# The window the "add a queue" form's live figures are measured over.
ADD_QUEUE_RATE_WINDOW = "1h"


@dataclass(frozen=True)
class LiveFlow:
    """What the "add a queue" form starts from: each active queue's arrivals
    per minute, and the whole team's decisions per minute (every queue's)."""

    window_min: float
    arrivals_per_min: dict[str, float]
    decisions: int
    decisions_per_min: float
    reviewers: int


def live_flow(queues: list[Queue], *, now: datetime | None = None) -> LiveFlow:
    now = now or timezone.now()
    window = stats.RATE_WINDOWS[ADD_QUEUE_RATE_WINDOW]
    by_queue = stats.rates_by_queue(window, now=now)
    decisions = sum(r.decisions for r in by_queue.values())
    # One reviewer who decides in two queues is one person of the pool.
    reviewers = (
        Verdict.objects.filter(created_at__gt=now - window, created_at__lte=now)
        .exclude(reviewer=None)
        .values("reviewer")
        .distinct()
        .count()
    )
    minutes = window.total_seconds() / 60
    return LiveFlow(
        window_min=minutes,
        arrivals_per_min={q.slug: by_queue[q.pk].arrivals_per_min if q.pk in by_queue else 0.0 for q in queues},
        decisions=decisions,
        decisions_per_min=decisions / minutes,
        reviewers=reviewers,
    )
