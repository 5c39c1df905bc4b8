from __future__ import annotations

import numpy as np
from scipy.special import stdtrit


def spread(values: list[float], level: float = 0.975) -> tuple[float, float]:
    """Student-t confidence interval of the mean of ``values``, computed here and not
    with the code under test so a bug there cannot hide itself. ``level`` is the
    upper quantile: 0.975 for a two-sided 95 % interval, 0.995 for 99 %."""
    arr = np.asarray(values, dtype=float)
    half = stdtrit(len(arr) - 1, level) * arr.std(ddof=1) / np.sqrt(len(arr))
    return float(arr.mean() - half), float(arr.mean() + half)
