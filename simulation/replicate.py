"""Replications of one scenario: seeding, optional process parallelism, and the summary."""

from __future__ import annotations

import itertools
import math
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.special import stdtrit

from simulation.model import RunResult, simulate
from simulation.scenario import Scenario

# Below this many replications a process pool costs more to start than it saves.
PARALLEL_MIN_REPLICATIONS = 200


def replication_seeds(seed: int, replications: int) -> list[int]:
    """Independent per-replication seeds; replication i gets the same seed whatever
    the worker count, so results do not depend on how the work was split."""
    children = np.random.SeedSequence(seed).spawn(replications)
    return [int(c.generate_state(2, dtype=np.uint64)[0]) for c in children]


def ci95(values: Sequence[float]) -> tuple[float, float] | None:
    """Student-t 95 % confidence interval of the mean; None below two values."""
    n = len(values)
    if n < 2:
        return None
    arr = np.asarray(values, dtype=float)
    mean = float(arr.mean())
    half = float(stdtrit(n - 1, 0.975) * arr.std(ddof=1) / math.sqrt(n))
    return (mean - half, mean + half)


@dataclass
class Summary:
    """Means over replications (a single run's values when there is one)."""

    scenario: Scenario
    seed: int
    runs: list[RunResult] = field(repr=False)

    @property
    def replications(self) -> int:
        return len(self.runs)

    def values(self, name: str) -> list[float]:
        return [float(getattr(r, name)) for r in self.runs]

    def mean(self, name: str) -> float:
        return float(np.mean(self.values(name)))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe summary; the keys are the CLI's --json contract."""
        sc, runs = self.scenario, self.runs
        overflow = self.values("overflow_pct")
        waits = [r.mean_wait_min for r in runs if r.reviewed]
        n_prio = len(sc.priority_mix)
        depth = np.mean([r.depth_series for r in runs], axis=0)
        steps = np.mean([r.step_limit_trajectory for r in runs], axis=0)
        modes = {m: float(np.mean([r.mode_minutes[m] for r in runs])) for m in runs[0].mode_minutes}
        out: dict[str, Any] = {
            "replications": self.replications,
            "seed": self.seed,
            "scenario": sc.to_dict(),
            "ratio": _finite(sc.ratio),
            "produced": self.mean("produced"),
            "auto_passed": self.mean("auto_passed"),
            "arrived": self.mean("arrived"),
            "enqueued": self.mean("enqueued"),
            "dropped": self.mean("dropped"),
            "reviewed": self.mean("reviewed"),
            "approved": self.mean("approved"),
            "drafts": self.mean("drafts"),
            "agent_steps": self.mean("agent_steps"),
            "overflow_pct": float(np.mean(overflow)),
            "overflow_pct_mean": float(np.mean(overflow)),
            "overflow_pct_sd": float(np.std(overflow, ddof=1)) if len(overflow) > 1 else 0.0,
            "overflow_pct_ci95": ci_as_list(ci95(overflow)),
            "mean_wait_min": float(np.mean(waits)) if waits else 0.0,
            "mean_wait_min_ci95": ci_as_list(ci95(waits)),
            "p95_wait_min": float(np.mean([r.p95_wait_min for r in runs if r.reviewed] or [0.0])),
            "max_depth": self.mean("max_depth"),
            "max_depth_peak": max(r.max_depth for r in runs),
            "step_limit_final": self.mean("step_limit_final"),
            # The step limit is a whole number in every run; the mean is not.
            "step_limit_final_median": int(np.percentile(self.values("step_limit_final"), 50, method="lower")),
            "step_limit_final_range": [
                int(min(self.values("step_limit_final"))),
                int(max(self.values("step_limit_final"))),
            ],
            "step_limit_trajectory": [float(x) for x in steps],
            "depth_series": [float(x) for x in depth],
            "mode_minutes": modes,
            # Draft and shedding are separate modes: draft still admits every
            # arrival, shedding loses one per arrival. Reported apart.
            "time_in_draft_min": modes.get("draft", 0.0),
            "time_shedding_min": modes.get("shedding", 0.0),
            # Minutes in which anything was lost, in any mode: with backpressure
            # off there is no shedding *mode*, yet arrivals are still refused at
            # capacity, and this says when.
            "minutes_with_loss": self.mean("minutes_with_loss"),
            "shed_by_priority": {str(p): float(np.mean([r.lost_by_priority[p] for r in runs])) for p in range(n_prio)},
            "events": self.mean("events"),
            **self._noise_keys(),
        }
        if sc.sla_minutes:
            # Pooled over every reviewed item of every run, as the live figure is.
            reviewed = sum(r.reviewed for r in runs)
            out["sla_minutes"] = sc.sla_minutes
            out["sla_attainment"] = sum(r.sla_met for r in runs) / reviewed if reviewed else None
        return out

    def _noise_keys(self) -> dict[str, Any]:
        """Noisy reviewers: the time-averaged distance of the step limit from a
        noise-free reference tuner's in the same run, and what double review and
        gold items cost (extra reviews as % of the items' own reviews); with a
        gold rate, how many gold copies were placed beside the admitted items."""
        keys = {
            "step_limit_abs_error_mean": self.mean("step_limit_abs_error"),
            "step_limit_abs_error_ci95": ci_as_list(ci95(self.values("step_limit_abs_error"))),
            "extra_review_load_pct": self.mean("extra_review_load_pct"),
            "extra_review_load_pct_ci95": ci_as_list(ci95(self.values("extra_review_load_pct"))),
        }
        if self.scenario.gold_rate:
            keys["gold_copies"] = self.mean("gold_copies")
        return keys


def ci_as_list(ci: tuple[float, float] | None) -> list[float] | None:
    return None if ci is None else [ci[0], ci[1]]


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def may_not_fork_pool() -> bool:
    """True in a daemonic process, which multiprocessing forbids to have children."""
    return bool(multiprocessing.current_process().daemon)


def _run_chunk(scenario: Scenario, seeds: list[int]) -> list[RunResult]:
    return [simulate(scenario, s) for s in seeds]


def run_replications(
    scenario: Scenario,
    replications: int = 1,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    workers: int | None = None,
) -> Summary:
    """Run ``replications`` independent runs of ``scenario``.

    ``workers=None`` uses every core for large batches and stays in-process for
    small ones; the result is identical either way. ``progress(done, total)`` is
    called as runs complete.

    Inside a daemonic process (a Celery prefork pool child, a multiprocessing
    pool worker) the runs always stay in-process: such a process may not start
    children, and its pool already is the parallelism.
    """
    if replications < 1:
        raise ValueError("replications: must be at least 1")
    seeds = replication_seeds(seed, replications)
    if workers is None:
        workers = (os.cpu_count() or 1) if replications >= PARALLEL_MIN_REPLICATIONS else 1
    if may_not_fork_pool():
        workers = 1
    workers = max(1, min(workers, replications))
    # Several chunks per worker keep progress moving and balance uneven runs.
    n_chunks = min(replications, 20 if workers == 1 else workers * 8)
    bounds = [round(i * replications / n_chunks) for i in range(n_chunks + 1)]
    chunks = [seeds[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    results: list[list[RunResult] | None] = [None] * len(chunks)
    done = 0
    if workers == 1:
        for i, chunk in enumerate(chunks):
            results[i] = _run_chunk(scenario, chunk)
            done += len(chunk)
            if progress is not None:
                progress(done, replications)
    else:
        # fork is cheap and the model holds no threads or sockets of its own.
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = {pool.submit(_run_chunk, scenario, c): i for i, c in enumerate(chunks)}
            for fut in as_completed(futures):
                i = futures[fut]
                results[i] = fut.result()
                done += len(chunks[i])
                if progress is not None:
                    progress(done, replications)
    runs = [r for chunk in results if chunk is not None for r in chunk]
    return Summary(scenario=scenario, seed=seed, runs=runs)


def recommend_max_production(
    scenario: Scenario, target_overflow_pct: float, replications: int = 50, seed: int = 0
) -> float:
    """The largest ``production_per_min`` whose mean overflow stays within the target.

    Bisection on the production rate with common random numbers (the same seeds
    at every rate), so the estimate moves smoothly with the rate.
    """
    if target_overflow_pct < 0:
        raise ValueError("target_overflow_pct: must be >= 0")

    def overflow_at(rate: float) -> float:
        s = replace(scenario, production_per_min=rate)
        return run_replications(s, replications, seed, workers=1).mean("overflow_pct")

    lo = 0.0
    hi = max(scenario.review_per_min, scenario.production_per_min, 0.1)
    # Grow the bracket until the target is broken (or the rate is absurd).
    while overflow_at(hi) <= target_overflow_pct:
        lo, hi = hi, hi * 2
        if hi > 1e4:
            return lo
    for _ in range(30):
        if hi - lo <= max(1e-3, 1e-3 * hi):
            break
        mid = (lo + hi) / 2
        if overflow_at(mid) <= target_overflow_pct:
            lo = mid
        else:
            hi = mid
    return lo
