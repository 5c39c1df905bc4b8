"""Operator-side Celery tasks: the depth sampler and the what-if simulation.

Registered under ``reviewqueue.tasks.*`` names (tasks.py re-exports this
module), so the beat schedule and the views refer to stable names.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.db.models import Q
from django.utils import timezone

from . import services
from .models import DepthSample, QueuePolicy, ReviewItem, SimulationRun

log = logging.getLogger(__name__)

__all__ = ["run_simulation", "sample_depth"]

DEPTH_RETENTION = timedelta(days=7)
# A stored result keeps at most this many depth points; longer runs are averaged into buckets.
MAX_SERIES_POINTS = 2000
# The recommendation bisects ~30 rates; cap its simulated minutes per rate.
RECOMMEND_BUDGET_MIN = 20_000
# ...and its simulated work (minutes x events per minute) over the whole search.
RECOMMEND_BUDGET_EVENTS = 20_000_000
RECOMMEND_RATES_TRIED = 35
SIMULATION_TIME_LIMIT = 660


@shared_task(name="reviewqueue.tasks.sample_depth", ignore_result=True, soft_time_limit=30, time_limit=60)
def sample_depth() -> int:
    """Record one depth sample and prune samples past retention.

    Safe to repeat: a second call only adds one more sample point.
    Returns the sampled depth.
    """
    now = timezone.now()
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


def _downsample(series: list[float], limit: int = MAX_SERIES_POINTS) -> tuple[list[float], int]:
    """Bucket means so a million-minute run still stores a chartable series."""
    if len(series) <= limit:
        return series, 1
    step = -(-len(series) // limit)
    return [sum(series[i : i + step]) / len(series[i : i + step]) for i in range(0, len(series), step)], step


def recommendation(scenario: Any, target: float, replications: int, seed: int) -> dict[str, Any]:
    """Two answers to "how much may we produce?": the long-run rate that is
    stable (never above the review rate), and the rate that holds the target
    over this scenario's horizon starting from an empty queue, which can be
    higher only because an empty queue absorbs a surplus for a while."""
    from simulation import recommend_max_production, stable_production_rate

    out: dict[str, Any] = {
        "target_overflow_pct": target,
        "stable_production_per_min": stable_production_rate(scenario, target),
        "horizon_min": scenario.duration_min,
    }
    # The search tries rates up to about twice the larger of production and review.
    per_rep = scenario.duration_min * (2 * max(scenario.production_per_min, scenario.review_per_min) + 10)
    reps = min(
        replications,
        20,
        RECOMMEND_BUDGET_MIN // scenario.duration_min,
        int(RECOMMEND_BUDGET_EVENTS // (per_rep * RECOMMEND_RATES_TRIED)),
    )
    if reps >= 1:
        out["recommended_production_per_min"] = recommend_max_production(scenario, target, replications=reps, seed=seed)
        out["recommend_replications"] = reps
    return out


def _claim(run_id: int) -> bool:
    """Take the run with a conditional update; a run left 'running' by a dead
    worker (older than the hard time limit) may be taken again."""
    stale = timezone.now() - timedelta(seconds=SIMULATION_TIME_LIMIT)
    won = SimulationRun.objects.filter(
        Q(status=SimulationRun.Status.QUEUED) | Q(status=SimulationRun.Status.RUNNING, created_at__lt=stale),
        pk=run_id,
    ).update(status=SimulationRun.Status.RUNNING, progress_done=0, error="")
    return won == 1


def failure_message(exc: BaseException) -> str:
    """What the operator reads when a simulation fails: plain words and a way
    forward, never a Python exception. The exception itself goes to the log."""
    if isinstance(exc, SoftTimeLimitExceeded):
        return (
            f"The simulation took longer than {(SIMULATION_TIME_LIMIT - 60) // 60} minutes and was stopped. "
            "Run it again with fewer replications or a shorter duration."
        )
    if isinstance(exc, MemoryError):
        return "The simulation ran out of memory. Run it again with fewer replications or a shorter duration."
    if isinstance(exc, ValueError):
        # Scenario and policy checks raise "field: what is wrong"; say it as a sentence.
        field_name, _, message = str(exc).partition(": ")
        if message:
            return f"The scenario is not valid: {field_name.replace('_', ' ')} {message}."
    return (
        "The simulation stopped on an unexpected error, which has been logged for the administrator. "
        "Nothing else was affected; you can run it again."
    )


def execute_simulation(run_id: int) -> str:
    """Run a queued what-if simulation, writing progress to its row.

    Safe to repeat: only the call that claims a queued run does the work; any
    other returns the run's status unchanged.
    """
    from simulation import Scenario, run_replications

    if not _claim(run_id):
        return SimulationRun.objects.filter(pk=run_id).values_list("status", flat=True).first() or "missing"
    run = SimulationRun.objects.get(pk=run_id)
    params: dict[str, Any] = run.params
    try:
        scenario = Scenario.from_dict(params["scenario"])
        replications = int(params.get("replications", 1))
        seed = int(params.get("seed", 0))
        target = params.get("target_overflow_pct")
        total = replications + (1 if target is not None else 0)
        SimulationRun.objects.filter(pk=run_id).update(progress_total=total)

        def progress(done: int, _total: int) -> None:
            SimulationRun.objects.filter(pk=run_id).update(progress_done=done)

        # workers=1: in a Celery worker the pool is the parallelism (and its
        # children may not fork their own); in a web request, forking the
        # server process would copy its connections.
        result = run_replications(scenario, replications, seed, progress=progress, workers=1).to_dict()
        result["depth_series"], result["depth_series_step_min"] = _downsample(result["depth_series"])
        result["step_limit_trajectory"], _ = _downsample(result["step_limit_trajectory"])
        if target is not None:
            result.update(recommendation(scenario, float(target), replications, seed))
    except Exception as exc:  # a bad scenario or a model bug must end the poll, not hang it
        log.exception("what-if simulation failed", extra={"run": run_id})
        SimulationRun.objects.filter(pk=run_id).update(
            status=SimulationRun.Status.FAILED, error=failure_message(exc), finished_at=timezone.now()
        )
        return SimulationRun.Status.FAILED
    SimulationRun.objects.filter(pk=run_id).update(
        status=SimulationRun.Status.DONE,
        result=result,
        progress_done=total,
        finished_at=timezone.now(),
    )
    return SimulationRun.Status.DONE


@shared_task(
    name="reviewqueue.tasks.run_simulation",
    ignore_result=True,
    acks_late=True,
    soft_time_limit=SIMULATION_TIME_LIMIT - 60,
    time_limit=SIMULATION_TIME_LIMIT,
)
def run_simulation(run_id: int) -> str:
    """Celery entry point for execute_simulation; safe to run twice."""
    return execute_simulation(run_id)
