"""What a finished loop reports: :class:`LoopResult` and the :class:`FailingCheck`
entries of its reviewed attempt.

Its own module so that ``loops.cutoff`` (what of a result reaches the queue)
reads results without importing ``loops.runner``, which builds them and
imports ``loops.cutoff``: the dependency runs one way.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class FailingCheck:
    """A hidden check the reviewed attempt fails: its id and the reviewer's
    description of it. For the reviewer only; never part of a prompt."""

    id: str
    about: str = ""


@dataclass(frozen=True)
class LoopResult:
    task_id: str
    converged: bool
    stop_reason: str
    attempts: int
    tokens: int
    final_output: str  # of the reviewed attempt, thinking stripped
    last_error: str  # of the reviewed attempt, assertion-safe, may be ""
    failure_classes: tuple[str, ...] = ()  # one per failed attempt
    draft: bool = False
    scores: tuple[float, ...] = ()
    # Checks passed per attempt, one entry per attempt (0 when the checks did
    # not run: a format or gate failure, no answer); empty without checks.
    grades: tuple[int, ...] = ()
    checks_total: int = 0
    # The attempt whose output and error are handed over (1-based): the best
    # graded, ties to the later; the last one when there is nothing to grade.
    reviewed_attempt: int = 0
    failing_checks: tuple[FailingCheck, ...] = ()  # of the reviewed attempt, in task order
    reviewed_estimate: float | None = None  # scored: the stop rule's estimate of that attempt

    @property
    def unverified(self) -> bool:
        return not self.converged

    @property
    def reviewed_checks_passed(self) -> int | None:
        if not self.grades or not 1 <= self.reviewed_attempt <= len(self.grades):
            return None
        return self.grades[self.reviewed_attempt - 1]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["failure_classes"] = list(self.failure_classes)
        out["scores"] = list(self.scores)
        out["grades"] = list(self.grades)
        out["failing_checks"] = [asdict(c) for c in self.failing_checks]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoopResult:
        fields = dict(data)
        fields["failure_classes"] = tuple(fields.get("failure_classes", ()))
        fields["scores"] = tuple(fields.get("scores", ()))
        fields["grades"] = tuple(fields.get("grades", ()))
        fields["failing_checks"] = tuple(FailingCheck(**c) for c in fields.get("failing_checks", ()))
        return cls(**fields)
