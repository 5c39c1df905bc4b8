"""What-if simulations run for operators: starting a run (in the request or
on a worker, within the size limits), claiming a queued run, running the
SimPy model on its scenario, and storing a chartable result or a readable
failure.

The ``run_simulation`` Celery task is a thin entry point into this module;
``start`` calls ``execute_simulation`` directly when a run is small enough to
finish in the request. It never imports the task: ``dispatch`` looks it up by
its registered name (``task_names.RUN_SIMULATION``), as ``services.runs`` does for
``run_loop``, so there is no import cycle between services and tasks.
"""

from __future__ import annotations

import logging
import math
from datetime import timedelta
from typing import Any

from celery import current_app
from celery.exceptions import SoftTimeLimitExceeded
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from .. import task_names
from ..models import Queue, SimulationRun

# The logger keeps the name these records have always had: log queries filter on it.
log = logging.getLogger("reviewqueue.ops_tasks")

__all__ = [
    "ADD_QUEUE_KIND",
    "SIMULATION_TIME_LIMIT",
    "execute_simulation",
    "failure_message",
    "multi_scenario",
    "recommendation",
    "start",
]

# Simulated minutes (replications x duration) above which a what-if runs in
# the background with a progress bar instead of inside the request.
INLINE_SIMULATION_MINUTES = 20_000
INLINE_SIMULATION_EVENTS = 500_000
MAX_REPLICATIONS = 500
# The largest run allowed, in simulated work: replications x minutes x
# (arrivals + decisions per minute + a per-minute floor). At about 8 us per
# unit (the poisson model, the slower one) this is about two minutes on one
# core, well within the worker's time limit, and keeps the stored series small.
MAX_SIMULATION_EVENTS = 10_000_000
EVENTS_FLOOR_PER_MIN = 10


def simulation_events(replications: int, duration_min: int, production: float, review: float) -> float:
    """The simulated work a run costs, the unit MAX_SIMULATION_EVENTS is in."""
    return replications * duration_min * (production + review + EVENTS_FLOOR_PER_MIN)


# The largest "add a queue" what-if allowed, in the same unit as
# MAX_SIMULATION_EVENTS (see add_queue_events), counting both scenarios it
# runs. Several queues cost about as much per unit as one: at about 8 us a
# unit this is under a minute on one core.
MAX_ADD_QUEUE_EVENTS = 5_000_000
MAX_ADD_QUEUE_HOURS = 168


def add_queue_events(
    replications: int, duration_min: int, rates: list[float], added_rate: float, review: float
) -> float:
    """The simulated work of an "add a queue" what-if: the queues without the
    new one, then with it, each at the per-minute floor of every queue."""
    n = len(rates)
    without = sum(rates) + review + EVENTS_FLOOR_PER_MIN * n
    with_added = without + added_rate + EVENTS_FLOOR_PER_MIN
    return replications * duration_min * (without + with_added)


# A stored result keeps at most this many depth points; longer runs are averaged into buckets.
MAX_SERIES_POINTS = 2000
# The recommendation bisects ~30 rates; cap its simulated minutes per rate.
RECOMMEND_BUDGET_MIN = 20_000
# ...and its simulated work (minutes x events per minute) over the whole search.
RECOMMEND_BUDGET_EVENTS = 20_000_000
RECOMMEND_RATES_TRIED = 35
# params["kind"] of an "add a queue" what-if: several queues sharing one
# reviewer pool, run without and with a new queue (simulation.multi.what_if_added).
# A run without a kind is a single queue's what-if.
ADD_QUEUE_KIND = "add_queue"
# The run_simulation task's hard time limit in seconds (its soft limit is a minute less).
SIMULATION_TIME_LIMIT = 660


def runs_inline(params: dict[str, Any]) -> bool:
    """Small runs finish within the request; larger ones go to a worker with a progress bar."""
    replications = int(params["replications"])
    if params.get("kind") == ADD_QUEUE_KIND:
        multi = params["multi"]
        events = add_queue_events(
            replications,
            multi["duration_min"],
            [q["production_per_min"] for q in multi["queues"]],
            params["added"]["production_per_min"],
            multi["review_per_min"],
        )
        return events <= INLINE_SIMULATION_EVENTS
    scenario = params["scenario"]
    duration = int(scenario["duration_min"])
    events = simulation_events(replications, duration, scenario["production_per_min"], scenario["review_per_min"])
    return replications * duration <= INLINE_SIMULATION_MINUTES and events <= INLINE_SIMULATION_EVENTS


def presets() -> dict[str, Any]:
    """The what-if presets, each a scenario with its description
    (``simulation.PRESET_CATALOGUE``): what the what-if pages offer and name."""
    from simulation import PRESET_CATALOGUE

    return PRESET_CATALOGUE


def dispatch(run_id: int) -> None:
    """Send a queued run to a worker: the run_simulation task, found by its name."""
    current_app.tasks[task_names.RUN_SIMULATION].delay(run_id)


def start(
    *, user: AbstractBaseUser | None, name: str, params: dict[str, Any], queue: Queue | None = None
) -> SimulationRun:
    """Record a what-if run (``params`` as the what-if forms store them,
    already checked against the size limits) and run it: in this process
    when it is small (``runs_inline``), else on a worker once the row is
    committed. ``queue``: the queue it simulates; an "add a queue" run is
    about every queue and is kept under the default one. Not safe to repeat:
    each call starts a run."""
    added = params.get("kind") == ADD_QUEUE_KIND
    run = SimulationRun.objects.create(
        queue=Queue.default() if queue is None else queue,
        created_by=user,
        name=name,
        params=params,
        progress_total=(2 if added else 1) * params["replications"],
    )
    if runs_inline(params):
        execute_simulation(run.pk)
    else:
        run_id = run.pk
        transaction.on_commit(lambda: dispatch(run_id))
    return run


def _downsample(series: list[float], limit: int = MAX_SERIES_POINTS) -> tuple[list[float], int]:
    """Bucket means so a million-minute run still stores a chartable series."""
    if len(series) <= limit:
        return series, 1
    step = -(-len(series) // limit)
    return [sum(series[i : i + step]) / len(series[i : i + step]) for i in range(0, len(series), step)], step


def recommendation(scenario: Any, target: float, replications: int, seed: int) -> dict[str, Any]:
    """Two answers to "how much may we produce?": the long-run rate that is
    stable (never above the review rate), and the rate that holds the target
    over this scenario's horizon from where it starts (an empty queue, or
    today's backlog), which can be higher only because the queue's free room
    absorbs a surplus for a while."""
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
    if not _claim(run_id):
        return SimulationRun.objects.filter(pk=run_id).values_list("status", flat=True).first() or "missing"
    params: dict[str, Any] = SimulationRun.objects.get(pk=run_id).params
    try:
        result, total = _simulate(run_id, params)
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


def _json_safe(value: Any) -> Any:
    """``value`` with every non-finite float (a mean over no reviews) as None:
    a JSON column stores neither NaN nor infinity."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def multi_scenario(params: dict[str, Any]) -> tuple[Any, Any]:
    """The ``MultiScenario`` and the added ``QueueSpec`` an "add a queue" run stores."""
    from simulation import MultiScenario, QueueSpec

    stored = params["multi"]
    # A run stored before queues had a backlog has none: it starts empty.
    specs = tuple(
        QueueSpec(
            **{**q, "priority_mix": tuple(q["priority_mix"]), "initial_ages_min": tuple(q.get("initial_ages_min", ()))}
        )
        for q in stored["queues"]
    )
    ms = MultiScenario(
        queues=specs,
        review_per_min=float(stored["review_per_min"]),
        reviewers=int(stored["reviewers"]),
        duration_min=int(stored["duration_min"]),
        model=stored["model"],
    )
    return ms, QueueSpec(**params["added"])


def _simulate_added(run_id: int, params: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """An "add a queue" what-if: the live queues without and with the new one,
    on the same seeds; progress counts the runs of both."""
    from simulation import what_if_added

    ms, added = multi_scenario(params)
    replications = int(params.get("replications", 1))
    total = 2 * replications
    SimulationRun.objects.filter(pk=run_id).update(progress_total=total)

    def progress(done: int, _total: int) -> None:
        SimulationRun.objects.filter(pk=run_id).update(progress_done=done)

    result = what_if_added(ms, added, replications, int(params.get("seed", 0)), progress=progress)
    return {"kind": ADD_QUEUE_KIND, **_json_safe(result)}, total


def _simulate(run_id: int, params: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """Run the scenario's replications (and the recommendation, given a
    target), reporting progress on the run's row; returns the result to
    store and the number of steps it took. Raises on a bad scenario."""
    if params.get("kind") == ADD_QUEUE_KIND:
        return _simulate_added(run_id, params)
    # Imported here: SimPy and numpy load only in a process that simulates.
    from simulation import Scenario, run_replications

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
    return result, total
