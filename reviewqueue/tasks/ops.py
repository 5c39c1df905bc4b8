"""Operator-side Celery entry points: the depth sampler and the what-if
simulation. The work is in ``services.depth`` and ``services.simulations``."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from ..services import depth, simulations

__all__ = ["run_simulation", "sample_depth"]


@shared_task(name="reviewqueue.tasks.sample_depth", ignore_result=True, soft_time_limit=30, time_limit=60)
def sample_depth() -> int:
    """Record one depth sample and prune samples past retention.

    Safe to repeat: a second call only adds one more sample point.
    Returns the sampled depth.
    """
    return depth.record_depth_sample(now=timezone.now())


@shared_task(
    name="reviewqueue.tasks.run_simulation",
    ignore_result=True,
    acks_late=True,
    soft_time_limit=simulations.SIMULATION_TIME_LIMIT - 60,
    time_limit=simulations.SIMULATION_TIME_LIMIT,
)
def run_simulation(run_id: int) -> str:
    """Celery entry point for execute_simulation; safe to run twice."""
    return simulations.execute_simulation(run_id)
