"""The queue's rules, as pure functions: no Django, no I/O.

The live queue (``reviewqueue.services``) and the SimPy model (``simulation``)
both call this module, so a what-if answer is a statement about the code that
runs in production. Everything here is deterministic given its arguments;
randomness comes in as an explicit ``random.Random``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum


class Mode(StrEnum):
    """The queue's flow mode (ARCHITECTURE.md rule 7)."""

    NORMAL = "normal"
    DRAFT = "draft"  # above the high watermark: new loops run once, output tagged draft
    SHEDDING = "shedding"  # at capacity: each arrival sheds the lowest-priority item


class PolicyError(ValueError):
    """A policy value is out of its allowed range; the message names the field."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message


@dataclass(frozen=True)
class Watermarks:
    """Capacity and the two watermarks, as fractions of capacity."""

    capacity: int = 50
    high: float = 0.8
    low: float = 0.3

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise PolicyError("capacity", "must be at least 1")
        if not 0 < self.high <= 1:
            raise PolicyError("high_watermark", "must be in (0, 1]")
        if not 0 <= self.low < self.high:
            raise PolicyError("low_watermark", "must be at least 0 and below the high watermark")

    @property
    def high_depth(self) -> float:
        return self.high * self.capacity

    @property
    def low_depth(self) -> float:
        return self.low * self.capacity


def next_mode(mode: Mode, depth: int, marks: Watermarks) -> Mode:
    """The mode after the queue reaches ``depth``, with hysteresis.

    normal -> draft only *above* the high watermark; back to normal only
    *below* the low watermark; between the two the previous mode holds.
    At or above capacity the queue is shedding whatever it was before.
    """
    if depth >= marks.capacity:
        return Mode.SHEDDING
    if depth > marks.high_depth:
        return Mode.DRAFT
    if depth < marks.low_depth:
        return Mode.NORMAL
    return Mode.NORMAL if mode is Mode.NORMAL else Mode.DRAFT


def loop_runs_draft(mode: Mode) -> bool:
    """New loops skip the fix loop while the queue is in draft or shedding mode."""
    return mode is not Mode.NORMAL


@dataclass(frozen=True, order=True)
class Candidate:
    """An item that could be shed: ``priority`` higher is more important,
    ``arrived`` is any increasing stamp (seconds, sequence number)."""

    priority: int
    arrived: float
    key: Hashable = field(compare=False)


def choose_victim(waiting: Iterable[Candidate], incoming: Candidate) -> Candidate:
    """The item to shed when the queue is full: lowest priority, oldest first
    among equals, the incoming item included (it is the newest, so an equal
    waiting item goes before it)."""
    return min([*waiting, incoming], key=lambda c: (c.priority, c.arrived))


@dataclass(frozen=True)
class AdmissionPlan:
    enqueue: bool  # the incoming item joins the queue
    shed: Candidate | None  # the item shed to make room (possibly the incoming one)
    depth: int  # queue depth after the plan is carried out
    mode: Mode  # mode after the plan is carried out


def plan_admission(
    *,
    mode: Mode,
    depth: int,
    marks: Watermarks,
    incoming: Candidate,
    sheddable: Iterable[Candidate] = (),
) -> AdmissionPlan:
    """Decide what happens to one arrival.

    ``depth`` counts items waiting for or under review; ``sheddable`` holds
    the waiting items that may be shed (a caller may pass only the lowest one:
    the choice depends on nothing else). Items under review are never shed.
    """
    if depth < marks.capacity:
        depth += 1
        return AdmissionPlan(True, None, depth, next_mode(mode, depth, marks))
    victim = choose_victim(sheddable, incoming)
    enqueue = victim is not incoming and victim.key != incoming.key
    return AdmissionPlan(enqueue, victim, depth, next_mode(mode, depth, marks))


def plain_enqueue_depths(mode: Mode, marks: Watermarks) -> range:
    """The depths at which plan_admission simply enqueues an arrival and
    leaves the mode as it is (nothing shed, no watermark crossed).

    The same decision for a whole range of depths is what lets the live queue
    apply it in one statement that checks the range, so concurrent
    admissions and verdicts moving the depth inside it never conflict
    (``services.admission_pg.admit_one_statement``); at any other depth plan_admission
    decides. Integer depth ``d + 1 <= high_depth`` is ``d + 1 <= floor(high_depth)``,
    and ``d + 1 >= low_depth`` is ``d + 1 >= ceil(low_depth)``.
    """
    below_capacity = marks.capacity - 2  # the depth after the arrival stays below capacity
    if mode is Mode.NORMAL:  # stays normal up to the high watermark, inclusive
        return range(min(below_capacity, math.floor(marks.high_depth) - 1) + 1)
    if mode is Mode.DRAFT:  # stays draft down to the low watermark, inclusive
        return range(max(0, math.ceil(marks.low_depth) - 1), below_capacity + 1)
    # Shedding stays shedding only if the arrival fills the queue exactly.
    return range(marks.capacity - 1, marks.capacity)


@dataclass(frozen=True)
class TunerConfig:
    """The step-limit tuner (ARCHITECTURE.md rule 8)."""

    window: int = 10
    approve_high: float = 0.8
    approve_low: float = 0.4
    min_steps: int = 3
    max_steps: int = 15

    def __post_init__(self) -> None:
        if self.window < 1:
            raise PolicyError("tuner_window", "must be at least 1")
        if not 0 <= self.approve_low < self.approve_high <= 1:
            raise PolicyError("approve_low", "must satisfy 0 <= low < high <= 1")
        if not 1 <= self.min_steps <= self.max_steps:
            raise PolicyError("min_step_limit", "must satisfy 1 <= min <= max")

    def clamp(self, steps: int) -> int:
        return max(self.min_steps, min(self.max_steps, steps))


def counts_for_tuner(*, sampled: bool, draft: bool) -> bool:
    """Whether a verdict feeds the step-limit tuner. Only full loops cut off at
    the step limit say anything about that limit: a sampled auto-pass audits
    the red line, and a draft ran one attempt whatever the limit was (counting
    drafts would drive the limit to its floor whenever the queue is busy)."""
    return not sampled and not draft


def approve_rate(verdicts: Sequence[bool], window: int) -> float | None:
    """Share of approvals in the last ``window`` verdicts; None until the window is full."""
    recent = verdicts[-window:] if window else []
    if len(recent) < window:
        return None
    return sum(recent) / len(recent)


def tune_step_limit(current: int, verdicts: Sequence[bool], cfg: TunerConfig) -> int:
    """The step limit after looking at the last ``cfg.window`` verdicts
    (True = approved, oldest first). A partial window changes nothing:
    > approve_high raises the limit by one, < approve_low lowers it; clamped."""
    rate = approve_rate(verdicts, cfg.window)
    if rate is None:
        return cfg.clamp(current)
    if rate > cfg.approve_high:
        return cfg.clamp(current + 1)
    if rate < cfg.approve_low:
        return cfg.clamp(current - 1)
    return cfg.clamp(current)


REASON_LABELS: tuple[str, ...] = (
    "code_error",
    "logic_error",
    "format_issue",
    "hallucination",
    "unclear",
)

# label -> (gate name, what the gate checks). The gate names are implemented
# in ``loops.gates``; a label with no cheap mechanical check proposes none.
# "logic_error" proposes none: a logic error is output that runs and does the
# wrong thing, which only a demand red line (a hidden test) can catch, and
# the loop already runs those. A TODO/FIXME gate catches unfinished output,
# a different fault.
FILTER_GATES: Mapping[str, tuple[str, str]] = {
    "code_error": ("python_syntax", "code output must parse as Python"),
    "format_issue": ("well_formed", "output must be non-empty, printable text with no placeholder"),
    "hallucination": ("no_unverified_claims", "output must not claim checks or tests it cannot show"),
}


def proposed_filter_rules(label_counts: Mapping[str, int], threshold: int, already: Iterable[str] = ()) -> list[str]:
    """Labels seen more than ``threshold`` times that have a mechanical gate
    and no rule yet, in REASON_LABELS order."""
    have = set(already)
    return [
        label
        for label in REASON_LABELS
        if label_counts.get(label, 0) > threshold and label in FILTER_GATES and label not in have
    ]


def sample_for_audit(rng: random.Random, rate: float) -> bool:
    """Whether an auto-passed grey-zone output is sampled into the queue (rule 2)."""
    if not 0 <= rate <= 1:
        raise PolicyError("sampling_rate", "must be in [0, 1]")
    return rng.random() < rate
