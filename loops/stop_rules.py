"""Stop rules for loops whose only signal is a noisy score (ARCHITECTURE.md rule 6).

A rule sees every score observed so far, oldest first, and answers "stop now?".
It never sees the hidden quality the score is a noisy reading of. The step cap is
not a rule's business: the runner's step-limit guard enforces it, so a rule that
never fires simply runs into the cap.

Each rule also has a vectorised twin, ``stop_matrix``, used by the bench; its
answer for row ``i`` and column ``t`` is ``should_stop(scores[i, : t + 1])``
exactly, which the tests check against the scalar form.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

DEFAULT_BAR = 0.80


@runtime_checkable
class StopRule(Protocol):
    name: str

    def should_stop(self, scores: Sequence[float]) -> bool: ...


@runtime_checkable
class VectorStopRule(StopRule, Protocol):
    def stop_matrix(self, scores: np.ndarray) -> np.ndarray: ...


def _as_matrix(scores: np.ndarray) -> np.ndarray:
    matrix = np.asarray(scores, dtype=float)
    if matrix.ndim != 2:
        raise ValueError("scores must be a (tasks, steps) array")
    return matrix


def _trailing_all(passed: np.ndarray, k: int) -> np.ndarray:
    """True where the last ``k`` entries up to and including each column all hold."""
    run = np.zeros(passed.shape, dtype=int)
    current = np.zeros(passed.shape[0], dtype=int)
    for t in range(passed.shape[1]):
        current = np.where(passed[:, t], current + 1, 0)
        run[:, t] = current
    return run >= k


@dataclass(frozen=True)
class FixedBudget:
    """Stop after exactly ``n`` scores, whatever they say: the no-signal baseline."""

    n: int = 6

    @property
    def name(self) -> str:
        return f"fixed{self.n}"

    def should_stop(self, scores: Sequence[float]) -> bool:
        return len(scores) >= self.n

    def stop_matrix(self, scores: np.ndarray) -> np.ndarray:
        matrix = _as_matrix(scores)
        steps = np.arange(1, matrix.shape[1] + 1)
        return np.broadcast_to(steps >= self.n, matrix.shape).copy()


@dataclass(frozen=True)
class Threshold:
    """Stop at the first score over the bar: trusts one lucky crossing."""

    bar: float = DEFAULT_BAR

    @property
    def name(self) -> str:
        return "threshold"

    def should_stop(self, scores: Sequence[float]) -> bool:
        return len(scores) > 0 and scores[-1] >= self.bar

    def stop_matrix(self, scores: np.ndarray) -> np.ndarray:
        return _as_matrix(scores) >= self.bar


@dataclass(frozen=True)
class Confirm:
    """Stop once the last ``k`` scores are all over the bar."""

    k: int = 2
    bar: float = DEFAULT_BAR

    @property
    def name(self) -> str:
        return f"confirm{self.k}"

    def should_stop(self, scores: Sequence[float]) -> bool:
        tail = scores[-self.k :]
        return len(tail) == self.k and all(s >= self.bar for s in tail)

    def stop_matrix(self, scores: np.ndarray) -> np.ndarray:
        return _trailing_all(_as_matrix(scores) >= self.bar, self.k)


@dataclass(frozen=True)
class Smooth:
    """Stop once the mean of the last ``k`` scores is over the bar.

    Needs ``k`` scores first: a mean of fewer is just a noisier threshold.
    """

    k: int = 2
    bar: float = DEFAULT_BAR

    @property
    def name(self) -> str:
        return f"smooth{self.k}"

    def should_stop(self, scores: Sequence[float]) -> bool:
        if len(scores) < self.k:
            return False
        return sum(scores[-self.k :]) / self.k >= self.bar

    def stop_matrix(self, scores: np.ndarray) -> np.ndarray:
        matrix = _as_matrix(scores)
        out = np.zeros(matrix.shape, dtype=bool)
        for t in range(self.k - 1, matrix.shape[1]):
            window = matrix[:, t - self.k + 1 : t + 1]
            # Summed left to right like the scalar form so ties round identically.
            total = np.zeros(matrix.shape[0])
            for j in range(self.k):
                total = total + window[:, j]
            out[:, t] = total / self.k >= self.bar
        return out


@dataclass(frozen=True)
class Margin:
    """Stop at the first score over the bar plus a safety margin ``delta``."""

    delta: float = 0.05
    bar: float = DEFAULT_BAR

    @property
    def name(self) -> str:
        return "margin"

    def should_stop(self, scores: Sequence[float]) -> bool:
        return len(scores) > 0 and scores[-1] >= self.bar + self.delta

    def stop_matrix(self, scores: np.ndarray) -> np.ndarray:
        return _as_matrix(scores) >= self.bar + self.delta


@dataclass(frozen=True)
class Plateau:
    """Stop once over the bar and no longer improving.

    Fires when the latest score is over the bar and the best of the last ``k``
    scores beats the best before them by less than ``epsilon``: further steps are
    unlikely to add quality, so they only add cost.
    """

    k: int = 2
    epsilon: float = 0.02
    bar: float = DEFAULT_BAR

    @property
    def name(self) -> str:
        return "plateau"

    def should_stop(self, scores: Sequence[float]) -> bool:
        if len(scores) <= self.k or scores[-1] < self.bar:
            return False
        recent = max(scores[-self.k :])
        before = max(scores[: -self.k])
        return recent - before < self.epsilon

    def stop_matrix(self, scores: np.ndarray) -> np.ndarray:
        matrix = _as_matrix(scores)
        out = np.zeros(matrix.shape, dtype=bool)
        for t in range(self.k, matrix.shape[1]):
            recent = matrix[:, t - self.k + 1 : t + 1].max(axis=1)
            before = matrix[:, : t - self.k + 1].max(axis=1)
            out[:, t] = (matrix[:, t] >= self.bar) & (recent - before < self.epsilon)
        return out


_S0_GRID = np.linspace(0.0, 0.98, 30)
_RATE_GRID = np.linspace(0.02, 2.0, 30)


@dataclass(frozen=True)
class Posterior:
    """Stop once the posterior probability that the quality is over the bar reaches ``p``.

    The whole history is weighed, never a single crossing: the scores are read as
    a saturating progress curve q(t) = 1 - (1 - s0) e^(-r (t - 1)) plus Gaussian
    judge noise, with a flat prior over a grid of (s0, r) that is far wider than
    any one task family. The noise variance is unknown and integrated out under
    an inverse-gamma prior (shape ``prior_shape``, centred near ``prior_sigma``),
    so the estimate of sigma is learnt online from how far the scores scatter
    around the curves that fit them: a jittery history widens the posterior and
    delays the stop, a smooth one lets it stop early.
    """

    p: float = 0.95
    prior_sigma: float = 0.10
    prior_shape: float = 1.0
    bar: float = DEFAULT_BAR

    @property
    def name(self) -> str:
        return "posterior"

    def should_stop(self, scores: Sequence[float]) -> bool:
        if len(scores) == 0:
            return False
        return bool(self.stop_matrix(np.asarray([scores], dtype=float))[0, -1])

    def _posterior(self, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(P(q(t) >= bar), E[q(t)]) given the scores up to t, per task row and step column."""
        matrix = _as_matrix(scores)
        s0, rate = np.meshgrid(_S0_GRID, _RATE_GRID, indexing="ij")
        s0, rate = s0.ravel(), rate.ravel()
        scale = self.prior_shape * self.prior_sigma**2
        rss = np.zeros((matrix.shape[0], s0.size))
        prob = np.zeros(matrix.shape)
        mean = np.zeros(matrix.shape)
        for t in range(matrix.shape[1]):
            curve = 1.0 - (1.0 - s0) * np.exp(-rate * t)
            rss += (matrix[:, t : t + 1] - curve) ** 2
            # Marginal likelihood with sigma^2 integrated out (normal/inverse-gamma).
            log_like = -(self.prior_shape + (t + 1) / 2) * np.log(scale + rss / 2)
            weight = np.exp(log_like - log_like.max(axis=1, keepdims=True))
            over = curve >= self.bar
            total = weight.sum(axis=1)
            prob[:, t] = weight[:, over].sum(axis=1) / total
            mean[:, t] = weight @ curve / total
        return prob, mean

    def prob_over_bar(self, scores: np.ndarray) -> np.ndarray:
        """P(q(t) >= bar | scores up to t) for every task row and step column."""
        return self._posterior(scores)[0]

    def estimate_matrix(self, scores: np.ndarray) -> np.ndarray:
        """E[q(t) | scores up to t]: the fitted curve's quality at each step,
        read as the history stood then."""
        return self._posterior(scores)[1]

    def stop_matrix(self, scores: np.ndarray) -> np.ndarray:
        return self.prob_over_bar(scores) >= self.p


def estimate_matrix(rule: StopRule, scores: np.ndarray) -> np.ndarray:
    """The rule's own estimate of each attempt's quality, as it stood at that
    attempt: what "the best attempt" of a scored loop is judged by.

    A rule that trusts single readings (threshold, confirm, margin, fixed,
    plateau) estimates an attempt by its score; ``smooth`` by the mean of the
    last k scores; ``posterior`` by its fitted curve."""
    matrix = _as_matrix(scores)
    own = getattr(rule, "estimate_matrix", None)
    if own is not None:
        return np.asarray(own(matrix), dtype=float)
    if isinstance(rule, Smooth):
        out = np.zeros(matrix.shape)
        for t in range(matrix.shape[1]):
            lo = max(0, t - rule.k + 1)
            out[:, t] = matrix[:, lo : t + 1].mean(axis=1)
        return out
    return matrix.copy()


def quality_estimates(rule: StopRule, scores: Sequence[float]) -> list[float]:
    """:func:`estimate_matrix` for one loop's scores."""
    if len(scores) == 0:
        return []
    return [float(v) for v in estimate_matrix(rule, np.asarray([scores], dtype=float))[0]]


def best_attempt(grades: Sequence[float]) -> int:
    """The 1-based index of the best grade; ties go to the later attempt,
    which is the one the agent built on."""
    if len(grades) == 0:
        raise ValueError("no attempts to choose from")
    top = max(grades)
    return max(i for i, g in enumerate(grades) if g >= top - _TIE) + 1


def best_so_far_matrix(values: np.ndarray) -> np.ndarray:
    """For each row and step t, the 0-based column of the best value up to t
    (ties to the later column), as :func:`best_attempt` would choose."""
    matrix = _as_matrix(values)
    out = np.zeros(matrix.shape, dtype=int)
    best = matrix[:, 0].copy()
    index = np.zeros(matrix.shape[0], dtype=int)
    for t in range(matrix.shape[1]):
        take = matrix[:, t] >= best - _TIE
        index = np.where(take, t, index)
        best = np.maximum(best, matrix[:, t])
        out[:, t] = index
    return out


# Grades are shares of checks (2/3, 1/3): compare them with a tolerance, so a
# drop of exactly the margin counts and a tie is a tie whatever the rounding.
_TIE = 1e-9
DEFAULT_REGRESSION_MARGIN = 0.25
DEFAULT_REGRESSION_K = 2


@dataclass(frozen=True)
class RegressionGuard:
    """A loop going backwards: its grade has been at least ``margin`` below
    the best grade before it for ``k`` attempts in a row.

    A grade is the share of hidden checks an attempt passes, or a scored
    attempt's score. One dip is common on the way to a fix; ``k`` in a row
    says the fixes are breaking what already worked.
    """

    margin: float = DEFAULT_REGRESSION_MARGIN
    k: int = DEFAULT_REGRESSION_K

    def __post_init__(self) -> None:
        if not 0 < self.margin <= 1:
            raise ValueError("regression margin must be in (0, 1]")
        if self.k < 1:
            raise ValueError("regression K must be at least 1")

    def regressed(self, grades: Sequence[float]) -> list[bool]:
        """Per attempt: at least ``margin`` below the best grade before it."""
        flags = []
        best: float | None = None
        for grade in grades:
            flags.append(best is not None and best - grade >= self.margin - _TIE)
            best = grade if best is None else max(best, grade)
        return flags

    def fires(self, grades: Sequence[float]) -> bool:
        tail = self.regressed(grades)[-self.k :]
        return len(tail) == self.k and all(tail)

    def fire_matrix(self, grades: np.ndarray) -> np.ndarray:
        """``fires(grades[i, : t + 1])`` for every row i and column t."""
        matrix = _as_matrix(grades)
        best_before = np.maximum.accumulate(matrix, axis=1)
        regressed = np.zeros(matrix.shape, dtype=bool)
        regressed[:, 1:] = best_before[:, :-1] - matrix[:, 1:] >= self.margin - _TIE
        return _trailing_all(regressed, self.k)


def _int_arg(spec: str, arg: str) -> int:
    value = int(arg)
    if value < 1:
        raise ValueError(f"stop rule {spec!r}: count must be >= 1")
    return value


def make_stop_rule(spec: str, bar: float = DEFAULT_BAR) -> VectorStopRule:
    """Build a rule from a spec such as ``"confirm2"``, ``"confirm:3"`` or ``"margin:0.05"``.

    The bare names are the ones the bench reports; ``name:value`` sets the
    rule's one parameter.
    """
    text = spec.strip().lower()
    head, _, arg = text.partition(":")
    if not arg:
        # "fixed6", "confirm2", "smooth3": a trailing count is the parameter.
        stripped = head.rstrip("0123456789")
        if stripped != head and stripped in {"fixed", "confirm", "smooth"}:
            head, arg = stripped, head[len(stripped) :]
    if head == "threshold" and not arg:
        return Threshold(bar=bar)
    if head == "fixed":
        return FixedBudget(n=_int_arg(spec, arg or "6"))
    if head == "confirm":
        return Confirm(k=_int_arg(spec, arg or "2"), bar=bar)
    if head == "smooth":
        return Smooth(k=_int_arg(spec, arg or "2"), bar=bar)
    if head == "margin":
        return Margin(delta=float(arg or "0.05"), bar=bar)
    if head == "posterior":
        return Posterior(p=float(arg or "0.95"), bar=bar)
    if head == "plateau":
        return Plateau(k=_int_arg(spec, arg or "2"), bar=bar)
    raise ValueError(f"unknown stop rule {spec!r}")
