"""A synthetic scored agent: a hidden quality curve read through a noisy judge.

The curve is the published replication study's, q(t) = 1 - (1 - s0) e^(-r (t - 1))
for step t = 1, 2, ...; the judge adds N(0, sigma^2) and clips to [0, 1]. Step 1's
score reads q(1) = s0: the first attempt is already judged.
"""

from __future__ import annotations

import math
import random
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from loops.reply import AgentReply, estimate_tokens

if TYPE_CHECKING:
    from loops.spec import Task

# (s0 low, s0 high, r low, r high) per task family, as published.
FAMILIES: dict[str, tuple[float, float, float, float]] = {
    "easy": (0.60, 0.75, 0.8, 1.2),
    "medium": (0.40, 0.55, 0.4, 0.7),
    "hard": (0.25, 0.40, 0.2, 0.4),
}


def quality_curve(s0: float, r: float, t: int) -> float:
    """Hidden quality after step ``t`` (1-based) of a task starting at ``s0``."""
    return 1.0 - (1.0 - s0) * math.exp(-r * (t - 1))


def judge(q: float, sigma: float, rng: random.Random) -> float:
    """One noisy, clipped reading of quality ``q``."""
    return min(1.0, max(0.0, q + rng.gauss(0.0, sigma)))


@dataclass(frozen=True)
class CurveParams:
    s0: np.ndarray
    r: np.ndarray
    family: np.ndarray


def draw_curves(rng: np.random.Generator, n_tasks: int) -> CurveParams:
    """Curve parameters for ``n_tasks`` tasks, the families in equal numbers
    (the remainder, if any, goes to the first families)."""
    names = list(FAMILIES)
    family = np.array([names[i * len(names) // n_tasks] for i in range(n_tasks)])
    s0 = np.empty(n_tasks)
    r = np.empty(n_tasks)
    for name, (s_lo, s_hi, r_lo, r_hi) in FAMILIES.items():
        rows = family == name
        s0[rows] = rng.uniform(s_lo, s_hi, rows.sum())
        r[rows] = rng.uniform(r_lo, r_hi, rows.sum())
    return CurveParams(s0=s0, r=r, family=family)


def quality_matrix(params: CurveParams, progress: np.ndarray) -> np.ndarray:
    """q at each task's effective progress step (1-based), tasks x steps."""
    return 1.0 - (1.0 - params.s0[:, None]) * np.exp(-params.r[:, None] * (progress - 1))


def judge_matrix(quality: np.ndarray, sigma: float | np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Noisy clipped scores; ``sigma`` may be one value or one per task (column)."""
    sig = np.asarray(sigma, dtype=float)
    if sig.ndim == 1:
        sig = sig[:, None]
    return np.clip(quality + rng.standard_normal(quality.shape) * sig, 0.0, 1.0)


class ScoredAgent:
    """An agent whose attempts follow a hidden quality curve, each read by a noisy judge.

    ``quality`` is exposed for audits and tests; stop rules only ever see ``score``.
    """

    name = "scored"

    def __init__(self, s0: float, r: float, sigma: float, rng: random.Random, task_id: str = "") -> None:
        self.s0 = s0
        self.r = r
        self.sigma = sigma
        self.rng = rng
        self.task_id = task_id
        self.steps = 0
        self.quality = s0

    def attempt(self, prompt: str) -> AgentReply:
        self.steps += 1
        self.quality = quality_curve(self.s0, self.r, self.steps)
        score = judge(self.quality, self.sigma, self.rng)
        text = f"attempt {self.steps} for {self.task_id or 'task'}"
        return AgentReply(text=text, tokens=estimate_tokens(prompt, text), score=score)


def make_scored_agent(
    task: Task | None = None,
    *,
    seed: int | None = None,
    sigma: float = 0.10,
    family: str | None = None,
    **_: Any,
) -> ScoredAgent:
    """A fresh scored agent for one loop.

    Without a seed the task id seeds it, so the same task replays the same curve
    and the same judge noise; the family is drawn from that seed unless given.
    """
    task_id = task.id if task is not None else ""
    if seed is None:
        seed = zlib.crc32(task_id.encode("utf-8"))
    rng = random.Random(seed)
    name = family or rng.choice(sorted(FAMILIES))
    if name not in FAMILIES:
        raise ValueError(f"unknown family {name!r}; choose from {', '.join(FAMILIES)}")
    s_lo, s_hi, r_lo, r_hi = FAMILIES[name]
    return ScoredAgent(
        s0=rng.uniform(s_lo, s_hi),
        r=rng.uniform(r_lo, r_hi),
        sigma=sigma,
        rng=rng,
        task_id=task_id,
    )
