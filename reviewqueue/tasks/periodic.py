"""Operator-side Celery entry points: the depth sampler, the lease sweep, the
reviewers' reliability estimate, the escalation of disagreements that
waited too long, and the what-if simulation. The work is in
``services.depth``, ``services.leases``, ``services.review_quality`` and
``services.simulations``."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from .. import task_names
from ..services import alerts, depth, leases, review_quality, simulations

__all__ = [
    "escalate_disagreements",
    "estimate_reliability",
    "evaluate_alerts",
    "expire_leases",
    "run_simulation",
    "sample_depth",
]


@shared_task(name=task_names.SAMPLE_DEPTH, ignore_result=True, soft_time_limit=30, time_limit=60)
def sample_depth() -> int:
    """Record one depth sample and prune samples past retention.

    Safe to repeat: a second call only adds one more sample point.
    Returns the sampled depth.
    """
    return depth.record_depth_sample(now=timezone.now())


@shared_task(name=task_names.EXPIRE_LEASES, ignore_result=True, soft_time_limit=30, time_limit=60)
def expire_leases() -> int:
    """Put items whose lease ran out back in the queue (services.leases.expire_leases).

    Safe to repeat, and safe to run late: claim takes an item whose lease ran
    out itself, so the sweep only tidies the counts the dashboard shows.
    Returns the number of leases that ran out.
    """
    return leases.expire_leases(now=timezone.now())


@shared_task(name=task_names.ESTIMATE_RELIABILITY, ignore_result=True, soft_time_limit=50, time_limit=60)
def estimate_reliability() -> float:
    """Re-estimate the reviewers' error rates from gold answers and double
    reviews (services.review_quality.reestimate), for the noise-aware tuner and the
    operators' quality page. Safe to repeat. Returns the team's pooled error."""
    return review_quality.reestimate(now=timezone.now()).default_error


@shared_task(name=task_names.ESCALATE_DISAGREEMENTS, ignore_result=True, soft_time_limit=30, time_limit=60)
def escalate_disagreements() -> int:
    """Send to the operators the double reviews' disagreements that waited
    for a third reviewer past their queue's delay
    (services.review_quality.escalate_overdue). Safe to repeat: an item
    already escalated is not touched again. Returns how many were escalated."""
    return review_quality.escalate_overdue(now=timezone.now())


@shared_task(
    name=task_names.RUN_SIMULATION,
    ignore_result=True,
    acks_late=True,
    soft_time_limit=simulations.SIMULATION_TIME_LIMIT - 60,
    time_limit=simulations.SIMULATION_TIME_LIMIT,
)
def run_simulation(run_id: int) -> str:
    """Celery entry point for execute_simulation; safe to run twice."""
    return simulations.execute_simulation(run_id)


@shared_task(name=task_names.EVALUATE_ALERTS, ignore_result=True, soft_time_limit=50, time_limit=60)
def evaluate_alerts(queue_id: int | None = None) -> int:
    """Look at the alert conditions (one queue's, after its mode changed; all
    on the beat) and send what fired or recovered (services.alerts). Safe to
    repeat: an episode fires once and recovers once. Returns the alerts sent."""
    return len(alerts.evaluate_alerts(now=timezone.now(), queue=queue_id))
