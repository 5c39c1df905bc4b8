"""A synthetic scored agent: a hidden quality curve read through a noisy judge.

The curve is the published replication study's, q(t) = 1 - (1 - s0) e^(-r (t - 1))
for step t = 1, 2, ...; the judge adds N(0, sigma^2) and clips to [0, 1].
"""

from __future__ import annotations

import math
import random


def quality_curve(s0: float, r: float, t: int) -> float:
    """Hidden quality after step ``t`` (1-based) of a task starting at ``s0``."""
    return 1.0 - (1.0 - s0) * math.exp(-r * (t - 1))


def judge(q: float, sigma: float, rng: random.Random) -> float:
    """One noisy, clipped reading of quality ``q``."""
    return min(1.0, max(0.0, q + rng.gauss(0.0, sigma)))
