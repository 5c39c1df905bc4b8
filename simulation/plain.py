"""The article model as a plain loop, without SimPy.

It exists to measure what SimPy costs (bench/bench_simulation.py) and to
cross-check the SimPy processes: it draws random numbers in the same order,
so for one seed both give identical counts. Backpressure off only.
"""

from __future__ import annotations

import bisect
import random
from collections import deque
from dataclasses import dataclass

from reviewqueue.policy import tune_step_limit
from simulation.model import CARRY_EPS, cumulative_weights
from simulation.scenario import Scenario


@dataclass(frozen=True)
class PlainResult:
    arrived: int
    dropped: int
    reviewed: int
    approved: int
    mean_wait_min: float
    step_limit_final: int


def run_article_plain(sc: Scenario, seed: int) -> PlainResult:
    if sc.model != "article" or sc.verdict_model != "article" or sc.backpressure:
        raise ValueError("model: the plain loop covers the article model without backpressure only")
    rng = random.Random(seed)
    quality_cdf = cumulative_weights(sc.quality_mix)
    priority_cdf = cumulative_weights(sc.priority_mix)
    tuner = sc.tuner()
    queue: deque[tuple[int, float]] = deque()  # (minute arrived, approve probability)
    verdicts: deque[bool] = deque(maxlen=sc.tuner_window)
    step = sc.step_limit_start
    arrived = dropped = reviewed = approved = 0
    wait_total = 0.0
    carry_in = carry_out = 0.0
    for minute in range(sc.duration_min):
        burst = rng.random() < sc.burst_prob
        carry_in += sc.production_per_min * (sc.burst_mult if burst else 1.0)
        n = int(carry_in + CARRY_EPS)
        carry_in -= n
        for _ in range(n):
            approve = sc.quality_approve[bisect.bisect(quality_cdf, rng.random())]
            bisect.bisect(priority_cdf, rng.random())  # drawn to keep the streams aligned
            arrived += 1
            if len(queue) >= sc.capacity:
                dropped += 1
            else:
                queue.append((minute, approve))
        carry_out += sc.review_per_min
        quota = int(carry_out + CARRY_EPS)
        carry_out -= quota
        for _ in range(min(quota, len(queue))):
            born, approve = queue.popleft()
            ok = rng.random() < approve
            verdicts.append(ok)
            reviewed += 1
            approved += ok
            wait_total += minute - born
        if len(verdicts) >= tuner.window:
            step = tune_step_limit(step, list(verdicts), tuner)
    mean_wait = wait_total / reviewed if reviewed else 0.0
    return PlainResult(arrived, dropped, reviewed, approved, mean_wait, step)
