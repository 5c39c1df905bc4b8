"""Queue depth over time: the samples the operators' dashboard charts.

The ``sample_depth`` beat task is a thin entry point into this module.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from reviewqueue import services

from ..models import DepthSample, QueuePolicy, ReviewItem

__all__ = ["DEPTH_RETENTION", "record_depth_sample"]

DEPTH_RETENTION = timedelta(days=7)


def record_depth_sample(*, now: datetime) -> int:
    """Recount the kept depth, record one depth sample and prune samples past
    retention. Returns the sampled depth.

    Safe to repeat: a second call only adds one more sample point.
    """
    services.reconcile_depth(now=now)
    queue = QueuePolicy.current()
    pending = ReviewItem.objects.filter(status=ReviewItem.Status.PENDING).count()
    claimed = ReviewItem.objects.filter(status=ReviewItem.Status.CLAIMED).count()
    DepthSample.objects.create(
        created_at=now,
        depth=pending + claimed,
        pending=pending,
        claimed=claimed,
        mode=queue.mode,
        capacity=queue.capacity,
        step_limit=queue.step_limit,
    )
    DepthSample.objects.filter(created_at__lt=now - DEPTH_RETENTION).delete()
    return pending + claimed
