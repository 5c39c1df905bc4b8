"""Several queues served by one reviewer pool: one run, replications, and
the what-if question "if we add this queue, what happens to the others?".

Each queue is the single-queue model's ``SimQueue`` (its own loops, its own
backpressure state, watermarks and tuner, all through ``reviewqueue.policy``);
what is new here is only the pool: a free reviewer takes the next item of
the queue ``policy.next_queue`` picks, the rule the live queue will run.
With one queue the run is the single-queue model's run, draw for draw.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from reviewqueue import policy
from reviewqueue.policy import QueueHead, check_slug
from simulation.model import (
    CARRY_EPS,
    EventTally,
    Proc,
    RunResult,
    SimItem,
    SimQueue,
    article_producer,
    poisson_arrivals,
)
from simulation.replicate import Summary, ci95, ci_as_list, replication_seeds
from simulation.scenario import MODELS, Scenario


@dataclass(frozen=True)
class QueueSpec:
    """One queue: its own loops' production rate, its capacity and watermarks
    (fractions of capacity), the weights of its items' priorities (0 lowest),
    whether backpressure (draft mode, shedding) is on, and the backlog it
    starts from: the ages in minutes of the items already waiting (a live
    queue's, from its waiting items), as the single-queue ``Scenario``'s
    ``initial_ages_min``; empty starts from an empty queue."""

    slug: str
    production_per_min: float
    capacity: int = 50
    high_watermark: float = 0.8
    low_watermark: float = 0.3
    priority_mix: tuple[float, ...] = (0.3, 0.5, 0.2)
    backpressure: bool = True
    initial_ages_min: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        check_slug(self.slug)


@dataclass(frozen=True)
class MultiScenario:
    """Several queues and the one pool of ``reviewers`` that serves them all at
    ``review_per_min`` together. ``base`` gives everything else each queue's
    loops and tuner use (bursts, verdict model, step limits), as in the
    single-queue ``Scenario``; each queue's own numbers come from its spec."""

    queues: tuple[QueueSpec, ...]
    review_per_min: float = 3.0
    reviewers: int = 1
    duration_min: int = 120
    model: str = "poisson"
    base: Scenario = field(default_factory=Scenario)

    def __post_init__(self) -> None:
        if not self.queues:
            raise ValueError("queues: at least one queue is needed")
        slugs = [q.slug for q in self.queues]
        for slug in slugs:
            if slugs.count(slug) > 1:
                raise ValueError(f"queues: {slug!r} appears more than once")
        if self.model not in MODELS:
            raise ValueError(f"model: must be one of {', '.join(MODELS)}")
        if self.base.noisy_reviewers:
            # The reviewer panel keeps one history per queue; a pool shared by
            # several queues would need one history for all. Not modelled yet.
            raise ValueError("base: noisy reviewers are not modelled with several queues")
        for spec in self.queues:
            self.scenario_for(spec)  # each queue's numbers are validated as a single queue's are

    def scenario_for(self, spec: QueueSpec) -> Scenario:
        """The single-queue scenario of ``spec``, with the whole pool as its reviewers."""
        return dataclasses.replace(
            self.base,
            model=self.model,
            production_per_min=spec.production_per_min,
            review_per_min=self.review_per_min,
            reviewers=self.reviewers,
            duration_min=self.duration_min,
            capacity=spec.capacity,
            high_watermark=spec.high_watermark,
            low_watermark=spec.low_watermark,
            priority_mix=spec.priority_mix,
            backpressure=spec.backpressure,
            initial_ages_min=spec.initial_ages_min,
        )

    def with_queue(self, spec: QueueSpec) -> MultiScenario:
        return dataclasses.replace(self, queues=(*self.queues, spec))

    @property
    def ratio(self) -> float:
        """All queues' production over the pool's review rate (ARCHITECTURE.md rule 9)."""
        total = math.fsum(q.production_per_min for q in self.queues)
        return total / self.review_per_min if self.review_per_min else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {
            "queues": [
                {
                    **dataclasses.asdict(q),
                    "priority_mix": list(q.priority_mix),
                    "initial_ages_min": list(q.initial_ages_min),
                }
                for q in self.queues
            ],
            "review_per_min": self.review_per_min,
            "reviewers": self.reviewers,
            "duration_min": self.duration_min,
            "model": self.model,
        }


@dataclass
class MultiRunResult:
    """One run: each queue's ``RunResult`` by slug (``events`` in each is the
    whole run's), and the share of the pool's time spent reviewing."""

    queues: dict[str, RunResult]
    utilisation: float
    events: int


class _Pool:
    """The queues a reviewer may serve and what the reviewers have done."""

    def __init__(self, ms: MultiScenario, queues: list[SimQueue]) -> None:
        self.slugs = [spec.slug for spec in ms.queues]
        self.queues = dict(zip(self.slugs, queues, strict=True))
        # One list of idle reviewers for every queue: an arrival anywhere wakes one.
        self.idle: list[simpy.Event] = []
        for q in queues:
            q.idle = self.idle
        self.busy_min = 0.0  # poisson: reviewer-minutes spent reviewing, within the horizon
        self.reviews = 0  # article: reviews done, each worth one of the minute's quota

    def take(self) -> tuple[SimQueue, SimItem] | None:
        """The next item to review, from the queue the serving rule picks."""
        heads = []
        for slug in self.slugs:
            q = self.queues[slug]
            item = q.peek()
            heads.append(
                QueueHead(
                    slug=slug,
                    priority=None if item is None else item.priority,
                    depth=q.depth,
                    capacity=q.marks.capacity,
                    arrived=None if item is None else item.arrived,
                )
            )
        # Looked up on the module at each call, so the rule served is the policy's.
        chosen = policy.next_queue(heads)
        if chosen is None:
            return None
        q = self.queues[chosen]
        item = q.take()
        if item is None:  # a serving rule that names an empty queue
            raise RuntimeError(f"next_queue chose {chosen!r}, which has nothing waiting")
        return q, item


def simulate_multi(ms: MultiScenario, seed: int) -> MultiRunResult:
    """One run of ``ms``, each queue starting from its backlog (an empty
    queue when it has none), reproducible from ``seed``.

    Each queue draws its arrivals, outputs, verdicts and its items' review
    times from its own random stream (``queue_stream``), so a queue added
    later leaves the others' draws as they were: without and with it, the
    other queues see the same work (their backlogs included), and only the
    sharing of the pool differs. The processes start in the single-queue
    model's order, so a one-queue scenario reproduces ``simulate`` exactly.
    """
    env = simpy.Environment()
    queues = [
        SimQueue(ms.scenario_for(spec), queue_stream(seed, i, spec.slug), seed) for i, spec in enumerate(ms.queues)
    ]
    pool = _Pool(ms, queues)
    for q in queues:
        q.seed_backlog(q.sc.initial_ages_min)  # as simulate() does: the same draws, in the same order
        q.result.depth_series.append(q.depth)
        q.result.step_limit_trajectory.append(q.step_limit)
    events = EventTally()
    horizon = float(ms.duration_min)
    if ms.model == "article":
        for q in queues:
            env.process(article_producer(env, q, events))
        env.process(_article_pool(env, ms, pool, events))
        env.run(until=ms.duration_min)
        offered = ms.review_per_min * ms.duration_min
        utilisation = pool.reviews / offered if offered else 0.0
    else:
        for q in queues:
            env.process(poisson_arrivals(env, q, events))
        mu = ms.review_per_min / ms.reviewers
        for _ in range(ms.reviewers if mu > 0 else 0):
            env.process(_pool_reviewer(env, pool, mu, horizon, events))
        env.process(_pool_clock(env, ms, pool, events))
        env.run(until=ms.duration_min)
        for q in queues:
            q.end_of_minute()  # events at exactly the end time are not processed by run()
        utilisation = pool.busy_min / (ms.reviewers * horizon)
    results = {slug: q.finalise(horizon, events.scheduled) for slug, q in pool.queues.items()}
    return MultiRunResult(queues=results, utilisation=utilisation, events=events.scheduled)


def queue_stream(seed: int, index: int, slug: str) -> random.Random:
    """The random stream of the queue at ``index``: the first queue's is the
    single-queue model's (``Random(seed)``), every other one's is derived
    from the seed and its slug, so it does not depend on what else runs."""
    return random.Random(seed) if index == 0 else random.Random(f"{seed}:{slug}")


def _article_pool(env: simpy.Environment, ms: MultiScenario, pool: _Pool, events: EventTally) -> Proc:
    """The article model's reviewers: each minute's quota, spent across the queues."""
    carry = 0.0
    for _ in range(ms.duration_min):
        carry += ms.review_per_min
        quota = int(carry + CARRY_EPS)
        carry -= quota  # capacity unused this minute is lost, not banked
        while quota > 0:
            taken = pool.take()
            if taken is None:
                break
            q, item = taken
            quota -= item.review.cost
            pool.reviews += item.review.cost
            q.finish(env.now, item)
        for q in pool.queues.values():
            q.end_of_minute()
        events.scheduled += 1
        yield env.timeout(1)


def _pool_reviewer(env: simpy.Environment, pool: _Pool, mu: float, horizon: float, events: EventTally) -> Proc:
    """One reviewer of the poisson model, serving whichever queue the rule picks."""
    while True:
        taken = pool.take()
        if taken is None:
            wake = env.event()
            pool.idle.append(wake)
            events.scheduled += 1
            yield wake
            continue
        q, item = taken
        events.scheduled += 1
        # Drawn from the item's own queue's stream (see simulate_multi).
        busy = sum(q.rng.expovariate(mu) for _ in range(item.review.cost))
        pool.busy_min += min(busy, horizon - env.now)
        yield env.timeout(busy)
        q.finish(env.now, item)


def _pool_clock(env: simpy.Environment, ms: MultiScenario, pool: _Pool, events: EventTally) -> Proc:
    for _ in range(ms.duration_min - 1):
        events.scheduled += 1
        yield env.timeout(1)
        for q in pool.queues.values():
            q.end_of_minute()


# --- replications ---------------------------------------------------------------


@dataclass
class MultiSummary:
    """Replications of one multi-queue scenario: each queue's ``Summary`` and
    the pool's utilisation, means with 95 % confidence intervals."""

    scenario: MultiScenario
    seed: int
    runs: list[MultiRunResult] = field(repr=False)

    @property
    def replications(self) -> int:
        return len(self.runs)

    def queue(self, slug: str) -> Summary:
        spec = next(q for q in self.scenario.queues if q.slug == slug)
        return Summary(self.scenario.scenario_for(spec), self.seed, [r.queues[slug] for r in self.runs])

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe summary; the keys are ``queues --json``'s contract."""
        utilisation = [r.utilisation for r in self.runs]
        return {
            "replications": self.replications,
            "seed": self.seed,
            "scenario": self.scenario.to_dict(),
            "ratio": self.scenario.ratio if math.isfinite(self.scenario.ratio) else None,
            "utilisation": float(np.mean(utilisation)),
            "utilisation_ci95": ci_as_list(ci95(utilisation)),
            "queues": {spec.slug: _queue_dict(self.queue(spec.slug)) for spec in self.scenario.queues},
        }


def _queue_dict(summary: Summary) -> dict[str, Any]:
    full = summary.to_dict()
    p95 = [r.p95_wait_min for r in summary.runs if r.reviewed]
    keys = (
        "arrived",
        "reviewed",
        "overflow_pct",
        "overflow_pct_ci95",
        "mean_wait_min",
        "mean_wait_min_ci95",
        "p95_wait_min",
        "time_in_draft_min",
        "time_shedding_min",
        "max_depth",
    )
    return {
        "production_per_min": summary.scenario.production_per_min,
        "lost": full["dropped"],
        **{k: full[k] for k in keys},
        "p95_wait_min_ci95": ci_as_list(ci95(p95)),
    }


Progress = Callable[[int, int], None]


def run_multi_replications(
    ms: MultiScenario, replications: int = 1, seed: int = 0, progress: Progress | None = None
) -> MultiSummary:
    """``replications`` independent runs of ``ms``, seeded as ``run_replications``
    seeds them, so replication i of two scenarios shares its random numbers.
    ``progress(done, total)`` is called after each run."""
    if replications < 1:
        raise ValueError("replications: must be at least 1")
    runs = []
    for s in replication_seeds(seed, replications):
        runs.append(simulate_multi(ms, s))
        if progress is not None:
            progress(len(runs), replications)
    return MultiSummary(ms, seed, runs)


COMPARED = ("overflow_pct", "mean_wait_min", "p95_wait_min", "lost", "time_in_draft_min")


def what_if_added(
    ms: MultiScenario,
    added: QueueSpec,
    replications: int = 20,
    seed: int = 0,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run ``ms`` without and with ``added`` on the same seeds and report, for
    each queue that was there before, each compared figure as
    ``[without, with]``; ``without`` and ``with`` are the two full summaries.
    ``progress(done, total)`` counts the runs of both, ``2 * replications`` in all."""
    total = 2 * replications

    def first(done: int, _n: int) -> None:
        if progress is not None:
            progress(done, total)

    def second(done: int, _n: int) -> None:
        if progress is not None:
            progress(replications + done, total)

    before = run_multi_replications(ms, replications, seed, first).to_dict()
    after = run_multi_replications(ms.with_queue(added), replications, seed, second).to_dict()
    changes = {
        slug: {k: [before["queues"][slug][k], after["queues"][slug][k]] for k in COMPARED} for slug in before["queues"]
    }
    return {
        "added": added.slug,
        "changes": changes,
        "utilisation": [before["utilisation"], after["utilisation"]],
        "without": before,
        "with": after,
    }


# --- text output -------------------------------------------------------------------


def _ci(pair: Sequence[float] | None) -> str:
    return f" ({pair[0]:.2f}-{pair[1]:.2f})" if pair else ""


def format_queues(d: dict[str, Any]) -> str:
    """One line per queue, then the pool."""
    header = (
        "queue",
        "rate/min",
        "arrived",
        "lost",
        "overflow % (95 % CI)",
        "mean wait min (95 % CI)",
        "p95 wait",
        "draft min",
    )
    rows = [header]
    for slug, q in d["queues"].items():
        rows.append(
            (
                slug,
                f"{q['production_per_min']:g}",
                f"{q['arrived']:.1f}",
                f"{q['lost']:.1f}",
                f"{q['overflow_pct']:.2f}{_ci(q['overflow_pct_ci95'])}",
                f"{q['mean_wait_min']:.2f}{_ci(q['mean_wait_min_ci95'])}",
                f"{q['p95_wait_min']:.2f}",
                f"{q['time_in_draft_min']:.1f}",
            )
        )
    sc = d["scenario"]
    footer = (
        f"{sc['reviewers']} reviewer(s) at {sc['review_per_min']:g}/min together, {sc['model']} model, "
        f"{sc['duration_min']} min, {d['replications']} replication(s) (seed {d['seed']})\n"
        f"reviewer utilisation {100 * d['utilisation']:.1f} %{_ci(_scaled(d['utilisation_ci95']))}"
    )
    return _table(rows) + "\n" + footer


def format_what_if(d: dict[str, Any]) -> str:
    """Each existing queue's figures without and with the added queue, side by side."""
    rows = [("queue", "overflow %", "mean wait min", "p95 wait min", "lost", "draft min")]
    for slug, c in d["changes"].items():
        rows.append(
            (
                slug,
                *(
                    f"{c[k][0]:.2f} -> {c[k][1]:.2f}"
                    for k in ("overflow_pct", "mean_wait_min", "p95_wait_min", "lost", "time_in_draft_min")
                ),
            )
        )
    added = d["with"]["queues"][d["added"]]
    before_u, after_u = d["utilisation"]
    return (
        f"without -> with queue {d['added']!r}\n"
        + _table(rows)
        + f"\n{d['added']} itself: overflow {added['overflow_pct']:.2f} %, mean wait {added['mean_wait_min']:.2f} min, "
        f"p95 wait {added['p95_wait_min']:.2f} min"
        + f"\nreviewer utilisation {100 * before_u:.1f} % -> {100 * after_u:.1f} %"
        + f"\n{d['with']['replications']} replication(s) each, same seeds (seed {d['with']['seed']})"
    )


def _scaled(pair: Sequence[float] | None) -> list[float] | None:
    return None if pair is None else [100 * pair[0], 100 * pair[1]]


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows)
