"""How good is the dashboard's forecast of the time to the high watermark?

The forecast (``reviewqueue.policy.minutes_to_high_watermark``) is a fluid
approximation: the depth moves at the arrival rate minus the review rate.
Here it is held against the SimPy model: each replication draws a
production/review ratio from 1.2 to 3 and a review rate, forecasts the time
to the high watermark from an empty queue at the scenario's mean arrival rate
(bursts included, as a live rate measured over a window includes them), runs
the model with backpressure on and notes when draft mode first began. The
answer is the share of runs where the forecast lands within 25 % of that.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any

from reviewqueue.policy import minutes_to_high_watermark
from simulation.model import simulate
from simulation.replicate import replication_seeds
from simulation.scenario import Scenario

RATIO_RANGE = (1.2, 3.0)
REVIEW_RANGE = (1.0, 6.0)
TOLERANCE = 0.25


@dataclass(frozen=True)
class Check:
    ratio: float
    review_per_min: float
    forecast_min: float
    simulated_min: float | None

    @property
    def error(self) -> float | None:
        if self.simulated_min is None or self.simulated_min <= 0:
            return None
        return (self.forecast_min - self.simulated_min) / self.simulated_min

    @property
    def within(self) -> bool:
        return self.error is not None and abs(self.error) <= TOLERANCE


def mean_arrival_rate(sc: Scenario) -> float:
    """Arrivals per minute averaged over bursts: what a live window measures."""
    return sc.production_per_min * (1 + sc.burst_prob * (sc.burst_mult - 1))


def one_check(base: Scenario, seed: int) -> Check:
    rng = random.Random(seed)
    ratio = rng.uniform(*RATIO_RANGE)
    review = rng.uniform(*REVIEW_RANGE)
    sc = dataclasses.replace(base, production_per_min=ratio * review, review_per_min=review, backpressure=True)
    # Long enough that the slowest case (ratio 1.2) reaches the watermark with room to spare.
    horizon = (sc.capacity + 1) / (mean_arrival_rate(sc) - review)
    sc = dataclasses.replace(sc, duration_min=max(60, int(4 * horizon) + 10))
    forecast = minutes_to_high_watermark(0, sc.watermarks(), mean_arrival_rate(sc), review)
    assert forecast is not None  # the ratio is above 1
    run = simulate(sc, seed)
    return Check(ratio, review, forecast, run.first_draft_min)


def forecast_check(replications: int, seed: int = 0, model: str = "article") -> dict[str, Any]:
    """``replications`` checks; JSON-safe, ``within_25pct`` is the headline."""
    if replications < 1:
        raise ValueError("replications: must be at least 1")
    base = Scenario(model=model)
    checks = [one_check(base, s) for s in replication_seeds(seed, replications)]
    errors = sorted(abs(c.error) for c in checks if c.error is not None)
    return {
        "replications": replications,
        "seed": seed,
        "model": model,
        "ratio_range": list(RATIO_RANGE),
        "review_per_min_range": list(REVIEW_RANGE),
        "within_25pct": sum(c.within for c in checks) / len(checks),
        "median_abs_error": errors[len(errors) // 2] if errors else None,
        "never_reached": sum(c.simulated_min is None for c in checks),
    }
