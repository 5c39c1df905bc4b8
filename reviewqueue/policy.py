"""The queue's rules, as pure functions: no Django, no I/O.

The live queue (``reviewqueue.services``) and the SimPy model (``simulation``)
both call this module, so a what-if answer is a statement about the code that
runs in production. Everything here is deterministic given its arguments;
randomness comes in as an explicit ``random.Random``.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from fractions import Fraction


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


# --- the bounds of a queue's settings: the dataclasses below, Queue.clean and
# the operators' PolicyForm all read this one table ---


@dataclass(frozen=True)
class Bound:
    """The range one setting must lie in: ``low`` and ``high`` (None: no
    bound on that side), each inclusive unless its ``*_open`` flag is set;
    ``finite`` refuses infinity too."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    finite: bool = False
    unit: str = ""

    def holds(self, value: float) -> bool:
        # Written as what must hold, so NaN (every comparison false) fails.
        above = self.low is None or (value > self.low if self.low_open else value >= self.low)
        below = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return above and below and (not self.finite or math.isfinite(value))

    def text(self) -> str:
        """The rule in the model's terse words: "must be in (0, 1]", "must be at least 10 seconds"."""
        if self.low is not None and self.high is not None:
            return (
                f"must be in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"
            )
        if self.low is not None:
            unit = self.unit[:-1] if self.low == 1 and self.unit.endswith("s") else self.unit
            return f"must be {'above' if self.low_open else 'at least'} {self.low:g}{' ' + unit if unit else ''}"
        assert self.high is not None
        return f"must be {'below' if self.high_open else 'at most'} {self.high:g}{' ' + self.unit if self.unit else ''}"


SHARE = Bound(low=0, high=1)

# Each setting's own range, by the Queue field's name.
BOUNDS: Mapping[str, Bound] = {
    "capacity": Bound(low=1),
    "high_watermark": Bound(low=0, high=1, low_open=True),
    "low_watermark": Bound(low=0),
    "min_step_limit": Bound(low=1),
    "tuner_window": Bound(low=1),
    "approve_low": SHARE,
    "approve_high": SHARE,
    "lease_seconds": Bound(low=10, unit="seconds"),
    "sampling_rate": SHARE,
    "double_review_rate": SHARE,
    "gold_rate": SHARE,
    "gold_min_accuracy": SHARE,
    "gold_min_answers": Bound(low=1),
    "sla_minutes": Bound(low=1, unit="minutes"),
    "alert_age_minutes": Bound(low=0, low_open=True, unit="minutes"),
    "age_high_minutes": Bound(low=0, low_open=True, finite=True, unit="minutes"),
    "age_low_minutes": Bound(low=0, unit="minutes"),
    "escalation_delay_minutes": Bound(low=0, unit="minutes"),
}

# Settings that must keep an order: (lower, upper) -> whether strictly below.
ORDER: Mapping[tuple[str, str], bool] = {
    ("low_watermark", "high_watermark"): True,
    ("approve_low", "approve_high"): True,
    ("min_step_limit", "max_step_limit"): False,
    ("min_step_limit", "step_limit"): False,
    ("step_limit", "max_step_limit"): False,
    ("age_low_minutes", "age_high_minutes"): True,
}


def within(name: str, value: float) -> bool:
    """Whether ``value`` lies in the setting ``name``'s range (BOUNDS)."""
    return BOUNDS[name].holds(value)


def in_order(lower: str, upper: str, values: Mapping[str, float]) -> bool:
    """Whether two settings keep their order (ORDER): below, or at most when not strict."""
    strict = ORDER[(lower, upper)]
    return values[lower] < values[upper] if strict else values[lower] <= values[upper]


def check(name: str, value: float) -> None:
    """``PolicyError`` naming the setting unless ``value`` is within its bound."""
    if not within(name, value):
        raise PolicyError(name, BOUNDS[name].text())


@dataclass(frozen=True)
class Watermarks:
    """Capacity and the two watermarks, as fractions of capacity, and the
    optional age watermark: ``age_high`` and ``age_low`` in minutes the
    oldest waiting item has waited (both or neither)."""

    capacity: int = 50
    high: float = 0.8
    low: float = 0.3
    age_high: float | None = None
    age_low: float | None = None

    def __post_init__(self) -> None:
        check("capacity", self.capacity)
        check("high_watermark", self.high)
        marks = {"low_watermark": self.low, "high_watermark": self.high}
        if not (within("low_watermark", self.low) and in_order("low_watermark", "high_watermark", marks)):
            raise PolicyError("low_watermark", "must be at least 0 and below the high watermark")
        if (self.age_high is None) != (self.age_low is None):
            raise PolicyError("age_low_minutes", "give the age watermark's high and low together, or neither")
        if self.age_high is not None and self.age_low is not None:
            if not within("age_high_minutes", self.age_high):
                raise PolicyError("age_high_minutes", "must be a number of minutes above 0")
            ages = {"age_low_minutes": self.age_low, "age_high_minutes": self.age_high}
            if not (within("age_low_minutes", self.age_low) and in_order("age_low_minutes", "age_high_minutes", ages)):
                raise PolicyError("age_low_minutes", "must be at least 0 and below age_high_minutes")

    @property
    def high_depth(self) -> float:
        return self.high * self.capacity

    @property
    def low_depth(self) -> float:
        return self.low * self.capacity

    @property
    def has_age(self) -> bool:
        return self.age_high is not None


def age_over_high(oldest_minutes: float | None, marks: Watermarks) -> bool:
    """The oldest waiting item has waited longer than the age watermark allows."""
    return marks.age_high is not None and oldest_minutes is not None and oldest_minutes > marks.age_high


def age_below_low(oldest_minutes: float | None, marks: Watermarks) -> bool:
    """Age lets the queue leave draft mode: no age watermark, nothing waiting,
    or the oldest item younger than ``age_low``."""
    return marks.age_low is None or oldest_minutes is None or oldest_minutes < marks.age_low


def next_mode(mode: Mode, depth: int, marks: Watermarks, oldest_minutes: float | None = None) -> Mode:
    """The mode after the queue reaches ``depth``, with hysteresis.

    normal -> draft *above* the high watermark, or when the oldest waiting
    item (``oldest_minutes``) is older than the age watermark's high mark,
    however shallow the queue; back to normal only *below* the low watermark
    *and* with the oldest item younger than the age watermark's low mark;
    otherwise the previous mode holds. At or above capacity the queue is
    shedding whatever it was before.
    """
    if depth >= marks.capacity:
        return Mode.SHEDDING
    if depth > marks.high_depth or age_over_high(oldest_minutes, marks):
        return Mode.DRAFT
    if depth < marks.low_depth and age_below_low(oldest_minutes, marks):
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
    oldest_minutes: float | None = None,
) -> AdmissionPlan:
    """Decide what happens to one arrival.

    ``depth`` counts items waiting for or under review; ``sheddable`` holds
    the waiting items that may be shed (a caller may pass only the lowest one:
    the choice depends on nothing else). Items under review are never shed.
    ``oldest_minutes``: how long the oldest waiting item has waited (None
    when nothing waits), for the age watermark.
    """
    if depth < marks.capacity:
        depth += 1
        return AdmissionPlan(True, None, depth, next_mode(mode, depth, marks, oldest_minutes))
    victim = choose_victim(sheddable, incoming)
    enqueue = victim is not incoming and victim.key != incoming.key
    return AdmissionPlan(enqueue, victim, depth, next_mode(mode, depth, marks, oldest_minutes))


def plain_enqueue_depths(mode: Mode, marks: Watermarks) -> range:
    """The depths at which plan_admission simply enqueues an arrival and
    leaves the mode as it is (nothing shed, no watermark crossed).

    The same decision for a whole range of depths is what lets the live queue
    apply it in one statement that checks the range, so concurrent
    admissions and verdicts moving the depth inside it never conflict
    (``services.admission_pg.admit_one_statement``); at any other depth plan_admission
    decides. Integer depth ``d + 1 <= high_depth`` is ``d + 1 <= floor(high_depth)``,
    and ``d + 1 >= low_depth`` is ``d + 1 >= ceil(low_depth)``.

    With an age watermark, a normal queue stays normal over this range only
    while its oldest waiting item is no older than ``marks.age_high``
    (``plain_enqueue_age_limit``); a draft queue's range needs no such check,
    since depth at or above the low watermark keeps it in draft whatever the age.
    """
    below_capacity = marks.capacity - 2  # the depth after the arrival stays below capacity
    if mode is Mode.NORMAL:  # stays normal up to the high watermark, inclusive
        return range(min(below_capacity, math.floor(marks.high_depth) - 1) + 1)
    if mode is Mode.DRAFT:  # stays draft down to the low watermark, inclusive
        return range(max(0, math.ceil(marks.low_depth) - 1), below_capacity + 1)
    # Shedding stays shedding only if the arrival fills the queue exactly.
    return range(marks.capacity - 1, marks.capacity)


def plain_enqueue_age_limit(mode: Mode, marks: Watermarks) -> float | None:
    """The oldest waiting age (minutes) beyond which an arrival at a depth of
    ``plain_enqueue_depths`` is no longer a plain enqueue; None when age
    cannot change the decision there."""
    return marks.age_high if mode is Mode.NORMAL else None


@dataclass(frozen=True)
class TunerConfig:
    """The step-limit tuner (ARCHITECTURE.md rule 8)."""

    window: int = 10
    approve_high: float = 0.8
    approve_low: float = 0.4
    min_steps: int = 3
    max_steps: int = 15

    def __post_init__(self) -> None:
        check("tuner_window", self.window)
        rates = {"approve_low": self.approve_low, "approve_high": self.approve_high}
        if not (
            within("approve_low", self.approve_low)
            and within("approve_high", self.approve_high)
            and in_order("approve_low", "approve_high", rates)
        ):
            raise PolicyError("approve_low", "must satisfy 0 <= low < high <= 1")
        steps = {"min_step_limit": self.min_steps, "max_step_limit": self.max_steps}
        if not (within("min_step_limit", self.min_steps) and in_order("min_step_limit", "max_step_limit", steps)):
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


# --- reviewer reliability and the noise-aware tuner (ARCHITECTURE.md rule 8) ---
#
# A reviewer is a noisy judge: on any item they give the wrong verdict with
# their own error rate e (the same both ways, a "one-coin" reviewer). Gold
# items (truth known) and double-reviewed items (two verdicts on one item)
# measure e; the tuner then asks, for each verdict in its window, how likely
# the item truly deserved approval, and moves the step limit by what a
# noise-free tuner would have done, in expectation.

# The step-limit tuners a queue (and a simulated scenario) may run: "plain"
# (tune_step_limit: every verdict counts alike) or "noise_aware"
# (tune_step_limit_weighted: each verdict weighed by its reviewer's reliability).
TUNER_RULES: tuple[str, ...] = ("plain", "noise_aware")

# An error rate of one half carries no information; estimates stop just short
# of it so a verdict never counts against its own direction.
MAX_ERROR = 0.499
MIN_ERROR = 1e-9


@dataclass(frozen=True)
class ReviewerVerdict:
    """One reviewer's verdict on one item: ``approved`` or not."""

    reviewer: Hashable
    approved: bool


@dataclass(frozen=True)
class GoldAnswer:
    """A reviewer's verdict on a gold item, whose right answer ``truth`` is known."""

    reviewer: Hashable
    approved: bool
    truth: bool


@dataclass(frozen=True)
class ReliabilityPrior:
    """What is assumed before the answers speak, as pseudo-answers.

    Each reviewer's error rate is shrunk towards the team's pooled rate with
    ``strength`` pseudo-answers, and the pooled rate towards ``error`` with
    ``team_strength``, so three answers never make a reviewer infallible (or
    worthless), while the team's rate, which every answer informs, soon
    leaves the prior behind.
    The true approve share of items starts at ``approve`` with
    ``approve_strength`` pseudo-items.
    """

    error: float = 0.1
    strength: float = 10.0
    team_strength: float = 2.0
    approve: float = 0.5
    approve_strength: float = 2.0

    def __post_init__(self) -> None:
        if not 0 <= self.error < 0.5:
            raise PolicyError("prior_error", "must be in [0, 0.5)")
        if not 0 <= self.approve <= 1:
            raise PolicyError("prior_approve", "must be in [0, 1]")
        if min(self.strength, self.team_strength, self.approve_strength) < 0:
            raise PolicyError("prior_strength", "must be at least 0")


@dataclass(frozen=True)
class Reliability:
    """Estimated error rate per reviewer and the true approve share of items.

    A reviewer with no answers yet gets ``default_error`` (the team's pooled
    rate). ``answers`` is how many answers (gold, or verdicts on items judged
    by EM) stand behind each reviewer's estimate.
    """

    errors: Mapping[Hashable, float] = field(default_factory=dict)
    approve_share: float = 0.5
    default_error: float = 0.1
    answers: Mapping[Hashable, float] = field(default_factory=dict)

    def error(self, reviewer: Hashable) -> float:
        return self.errors.get(reviewer, self.default_error)


def _verdict_likelihoods(verdicts: Iterable[ReviewerVerdict], errors: Reliability) -> tuple[float, float]:
    """P(these verdicts | item truly approvable) and P(... | not), up to the prior."""
    yes = no = 1.0
    for v in verdicts:
        e = min(MAX_ERROR, max(MIN_ERROR, errors.error(v.reviewer)))
        yes *= (1 - e) if v.approved else e
        no *= e if v.approved else (1 - e)
    return yes, no


def approve_probability(verdicts: Sequence[ReviewerVerdict], reliability: Reliability) -> float:
    """How likely an item truly deserved approval, given its reviewers' verdicts
    (one, or two for a double-reviewed item) and their error rates.

    This is the *settled* verdict of a double review: disagreement is not
    broken by a coin but weighed, so the more reliable reviewer counts for
    more, and two equally reliable reviewers who disagree leave the item at
    the queue's approve share. A reviewer with error 0 gives 0 or 1 exactly.
    """
    if not verdicts:
        return reliability.approve_share
    exact = [v.approved for v in verdicts if reliability.error(v.reviewer) <= 0]
    if exact:
        # An infallible reviewer settles the item (the first of them, if two disagree).
        return 1.0 if exact[0] else 0.0
    yes, no = _verdict_likelihoods(verdicts, reliability)
    pi = reliability.approve_share
    num = pi * yes
    total = num + (1 - pi) * no
    return num / total if total > 0 else pi


def _shrink(wrong: Mapping[Hashable, float], total: Mapping[Hashable, float], prior: ReliabilityPrior) -> Reliability:
    """Error rates from expected wrong answers: each reviewer towards the team, the team towards the prior."""
    all_wrong, all_total = math.fsum(wrong.values()), math.fsum(total.values())
    t = prior.team_strength
    pooled = (all_wrong + t * prior.error) / (all_total + t) if all_total + t > 0 else prior.error
    s = prior.strength
    errors = {}
    for r, n in total.items():
        e = (wrong[r] + s * pooled) / (n + s) if n + s > 0 else pooled
        errors[r] = min(MAX_ERROR, max(0.0, e))
    return Reliability(errors=errors, default_error=min(MAX_ERROR, pooled), answers=dict(total))


def estimate_reliability(
    gold: Iterable[GoldAnswer] = (),
    items: Iterable[Sequence[ReviewerVerdict]] | Mapping[tuple[ReviewerVerdict, ...], float] = (),
    prior: ReliabilityPrior = ReliabilityPrior(),  # frozen, so one shared default is safe
    *,
    iterations: int = 200,
    tolerance: float = 1e-7,
    start: Reliability | None = None,
) -> Reliability:
    """Each reviewer's error rate, by expectation-maximisation (Dawid and
    Skene's estimator, one error rate per reviewer).

    ``gold`` answers count directly: right or wrong is known. ``items`` are
    the queue's items whose truth is unknown, each with its verdicts: a
    double-reviewed item has two, and the EM weighs how often reviewers
    disagree; single verdicts inform the approve share. ``items`` may also be
    a mapping from an item's verdicts to how many items had exactly those
    (what a GROUP BY gives), which costs the same however long the history.
    E-step: each item's chance of truly deserving approval
    (``approve_probability``); M-step: each reviewer's expected wrong answers,
    shrunk as ``ReliabilityPrior`` says. ``start`` (the last estimate) makes a re-estimate after a few new
    answers converge in a few rounds.
    """
    gold_groups = Counter((g.reviewer, g.approved == g.truth) for g in gold)
    if isinstance(items, Mapping):
        item_groups: Mapping[tuple[ReviewerVerdict, ...], float] = {k: n for k, n in items.items() if k and n > 0}
    else:
        item_groups = Counter(tuple(item) for item in items if item)
    est = start or Reliability(approve_share=prior.approve, default_error=prior.error)
    for _ in range(max(1, iterations)):
        wrong: dict[Hashable, float] = defaultdict(float)
        total: dict[Hashable, float] = defaultdict(float)
        for (reviewer, right), n in gold_groups.items():
            total[reviewer] += n
            wrong[reviewer] += 0 if right else n
        approvable = 0.0
        for verdicts, n in item_groups.items():
            q = approve_probability(verdicts, est)
            approvable += n * q
            for v in verdicts:
                total[v.reviewer] += n
                wrong[v.reviewer] += n * ((1 - q) if v.approved else q)
        n_items, a = sum(item_groups.values()), prior.approve_strength
        share = (approvable + a * prior.approve) / (n_items + a) if n_items + a > 0 else prior.approve
        new = replace(_shrink(wrong, total, prior), approve_share=share)
        moved = max(
            [abs(new.approve_share - est.approve_share)] + [abs(e - est.error(r)) for r, e in new.errors.items()]
        )
        est = new
        if moved < tolerance:
            break
    return est


def count_distribution(probabilities: Sequence[float]) -> list[float]:
    """P(exactly k of these independent items are truly approvable), k = 0..n
    (the Poisson-binomial distribution, by the usual O(n²) recursion)."""
    dist = [1.0]
    for p in probabilities:
        nxt = [0.0] * (len(dist) + 1)
        for k, mass in enumerate(dist):
            nxt[k] += mass * (1 - p)
            nxt[k + 1] += mass * p
        dist = nxt
    return dist


def step_change_odds(probabilities: Sequence[float], cfg: TunerConfig) -> tuple[float, float]:
    """(P(raise), P(lower)): the chances that the plain tuner, shown the true
    verdicts behind the last ``cfg.window`` items, would raise or lower the
    step limit. The band is ``tune_step_limit``'s, applied to each possible
    count of true approvals; a partial window moves nothing."""
    recent = list(probabilities[-cfg.window :])
    if len(recent) < cfg.window:
        return 0.0, 0.0
    up = down = 0.0
    for k, mass in enumerate(count_distribution(recent)):
        rate = k / len(recent)
        if rate > cfg.approve_high:
            up += mass
        elif rate < cfg.approve_low:
            down += mass
    return up, down


def tune_step_limit_weighted(current: float, probabilities: Sequence[float], cfg: TunerConfig) -> float:
    """The noise-aware tuner: the *expected* step limit of a noise-free tuner.

    ``probabilities`` are the window's items, oldest first, each as the chance
    it truly deserved approval (``approve_probability`` of its verdicts).
    Rather than guess each verdict's truth and apply the band once, the tuner
    moves by P(raise) - P(lower) (``step_change_odds``): by linearity of
    expectation, summed over looks this tracks the step limit a tuner fed the
    true verdicts would reach. The alternatives go wrong on ten verdicts: at
    a true approve share of 0.735 and error 0.2 the noise-free tuner raises
    on 21 % of looks and the plain one on noisy verdicts on 8 %; thresholding
    the corrected rate p = (observed - e) / (1 - 2e) raises on 49 % (and
    lowers on 11 %, against 0.5 %); thresholding the posterior mean rate
    raises at 8 approvals of 10 as soon as the estimated error is above zero,
    however small, so it errs where reviewers make no mistakes at all.

    The state is fractional; ``applied_step_limit`` rounds it to the limit
    loops run with. With error-free reviewers every probability is 0 or 1,
    so this is ``tune_step_limit`` exactly.
    """
    up, down = step_change_odds(probabilities, cfg)
    return max(float(cfg.min_steps), min(float(cfg.max_steps), current + up - down))


def applied_step_limit(expected: float, cfg: TunerConfig) -> int:
    """The whole step limit loops run with under the noise-aware tuner: its
    expected limit rounded half up, within the bounds."""
    return cfg.clamp(math.floor(expected + 0.5))


# --- double review and gold (ARCHITECTURE.md rule 11) ---


def selected_for_double_review(item_key: int, rate: float) -> bool:
    """Whether an item gets a second, blind review: a share ``rate`` of items,
    chosen by a hash of the item's key, so the choice is the same however
    often it is asked and no reviewer can steer it."""
    check("double_review_rate", rate)
    digest = hashlib.blake2b(f"double-review:{item_key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < rate


def gold_copy_placed(draw: float, gold_rate: float) -> bool:
    """Whether a gold item's copy is placed beside a real item just admitted:
    with chance ``gold_rate``, ``draw`` being uniform on [0, 1). The copy
    waits and is reviewed like an item (a second review and all), so the
    rate adds that much review load at admission, and copies are
    ``gold_share_seen(gold_rate)`` of what reviewers see. The live queue
    (``services.review_quality.place_gold``) and the capacity model
    (``simulation``) both place copies by this rule."""
    check("gold_rate", gold_rate)
    return draw < gold_rate


def gold_share_seen(gold_rate: float) -> float:
    """The share of the items reviewers see that are gold copies, when a copy
    is placed beside a share ``gold_rate`` of the real items: rate / (1 + rate)."""
    check("gold_rate", gold_rate)
    return gold_rate / (1.0 + gold_rate)


def settled_decision(decisions: Sequence[str]) -> str | None:
    """The decision a double review settles on, from the reviewers' decision
    categories in the order they answered: two who agree settle it; after a
    disagreement, the category at least two of three share; None while no
    category has two votes (the item waits for another reviewer, or, after
    three, for an operator)."""
    counts = Counter(decisions)
    agreed = [decision for decision, n in counts.items() if n >= 2]
    return agreed[0] if agreed else None


# Decision categories: what two answers must share to agree. An edit approves
# the output as the reviewer corrected it, so it is an approval here; the
# tuner, which asks about the output as the loop produced it, counts only
# "approve" (ARCHITECTURE.md, "Edit and send back").
APPROVE, REJECT, SEND_BACK = "approve", "reject", "send_back"
DECISION_CATEGORIES: Mapping[str, str] = {
    "approve": APPROVE,
    "edit": APPROVE,
    "reject": REJECT,
    "send_back": SEND_BACK,
}


def decision_category(decision: str) -> str | None:
    """approve (as it is, or edited), reject or send back; None for anything else."""
    return DECISION_CATEGORIES.get(decision)


def counts_as_approval(decision: str) -> bool:
    """Whether the output was accepted: as it was, or as the reviewer corrected it."""
    return decision_category(decision) == APPROVE


def gold_flagged(correct: int, answers: int, min_accuracy: float, min_answers: int) -> bool:
    """A reviewer is flagged when, over at least ``min_answers`` gold answers,
    the share they got right is below ``min_accuracy``."""
    return answers >= max(1, min_answers) and correct < min_accuracy * answers


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
    check("sampling_rate", rate)
    return rng.random() < rate


# --- several queues, one reviewer pool ---

SLUG_RE = re.compile(r"[a-z][a-z0-9-]{0,49}")


def check_slug(slug: str) -> str:
    """``slug`` itself if it can name a queue: 1 to 50 lowercase letters,
    digits and hyphens, starting with a letter (so it is safe in a URL, a
    metric label and a log line as it is); otherwise ``PolicyError``."""
    if not isinstance(slug, str) or SLUG_RE.fullmatch(slug) is None:
        raise PolicyError(
            "slug", f"{slug!r} must be 1-50 lowercase letters, digits and hyphens, starting with a letter"
        )
    return slug


@dataclass(frozen=True)
class QueueHead:
    """One queue as a reviewer who may serve it sees it.

    ``priority`` and ``arrived`` describe the queue's next waiting item (the
    one the queue would hand out next); both are None when nothing is
    waiting. ``depth`` counts items waiting for or under review, as
    ``plan_admission`` counts it, against the queue's own ``capacity``.
    """

    slug: str
    priority: int | None
    depth: int
    capacity: int
    arrived: float | None

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise PolicyError("capacity", "must be at least 1")
        if self.depth < 0:
            raise PolicyError("depth", "must be at least 0")

    @property
    def waiting(self) -> bool:
        return self.priority is not None and self.arrived is not None

    @property
    def fullness(self) -> Fraction:
        """depth / capacity, exactly, so two queues equally full tie exactly."""
        return Fraction(self.depth, self.capacity)


def serving_key(head: QueueHead) -> tuple[int, Fraction, float, str]:
    """The sort key of ``next_queue``: the smallest key is served first.

    Only meaningful for a head with something waiting.
    """
    if head.priority is None or head.arrived is None:
        raise PolicyError("head", f"queue {head.slug!r} has nothing waiting")
    return (-head.priority, -head.fullness, head.arrived, head.slug)


def next_queue(heads: Iterable[QueueHead]) -> str | None:
    """The slug of the queue a free reviewer serves next, or None when no
    queue has anything waiting.

    The rule, in order: the queue whose next item has the highest priority;
    among equals, the fuller queue (depth over capacity, so a queue close to
    shedding is relieved first, whatever its size); then the queue whose next
    item has waited longest (earliest ``arrived``); then the slug in
    alphabetical order, so the choice is total and the same on every run.
    Queues with nothing waiting are skipped.
    """
    waiting = [h for h in heads if h.waiting]
    if not waiting:
        return None
    return min(waiting, key=serving_key).slug


@dataclass(frozen=True)
class RoutingRule:
    """Send work that matches to ``queue``.

    A blank string or None matches anything; every condition that is set
    must match. ``task_id_prefix`` matches task ids that start with it (an
    exact id is its own prefix); the priority range is inclusive at both ends.
    """

    queue: str
    producer: str = ""
    task_kind: str = ""
    min_priority: int | None = None
    max_priority: int | None = None
    task_id_prefix: str = ""

    def __post_init__(self) -> None:
        if not self.queue:
            raise PolicyError("queue", "must name a queue")
        check_slug(self.queue)
        if self.min_priority is not None and self.max_priority is not None and self.min_priority > self.max_priority:
            raise PolicyError("min_priority", "must not be above max_priority")

    def matches(self, *, producer: str, task_kind: str, priority: int, task_id: str) -> bool:
        return (
            (not self.producer or self.producer == producer)
            and (not self.task_kind or self.task_kind == task_kind)
            and (self.min_priority is None or priority >= self.min_priority)
            and (self.max_priority is None or priority <= self.max_priority)
            and task_id.startswith(self.task_id_prefix)
        )


def route(
    rules: Iterable[RoutingRule],
    *,
    producer: str,
    task_kind: str,
    priority: int,
    task_id: str,
    default: str = "default",
) -> str:
    """The queue a piece of work goes to: the first rule, in the order given,
    that matches it; ``default`` when none does."""
    for rule in rules:
        if rule.matches(producer=producer, task_kind=task_kind, priority=priority, task_id=task_id):
            return rule.queue
    return default


# --- SLA, the breach forecast and alert episodes (ARCHITECTURE.md, "Warn before it overflows") ---


def sla_attainment(waits_minutes: Iterable[float], sla_minutes: float) -> float | None:
    """The share of decided items whose time from admission to verdict was
    within ``sla_minutes``; None when nothing was decided."""
    waits = list(waits_minutes)
    if not waits:
        return None
    return sum(1 for w in waits if w <= sla_minutes) / len(waits)


@dataclass(frozen=True)
class Forecast:
    """What the live pace says is coming, in minutes from now.

    ``to_high_watermark``: until the depth passes the high watermark (0 when
    it already has, or the queue is out of normal mode); ``to_sla_breach``:
    until a waiting or arriving item has waited longer than the SLA (0 when
    one already has). None: not at this pace.
    """

    to_high_watermark: float | None
    to_sla_breach: float | None

    @property
    def stable(self) -> bool:
        return self.to_high_watermark is None and self.to_sla_breach is None


def minutes_to_high_watermark(
    depth: int, marks: Watermarks, arrivals_per_min: float, reviews_per_min: float
) -> float | None:
    """Minutes until the depth passes the high watermark (its first whole
    depth above it) at this pace; None when review keeps up.

    The depth is taken as a Brownian motion reflected at zero, with drift
    arrivals minus reviews and variance arrivals plus reviews per minute
    (the diffusion limit of Poisson arrivals and reviews), and the answer is
    its expected first passage time from ``depth`` to the target b:
    (b - x)/v - s/(2v^2) * (exp(-2vx/s) - exp(-2vb/s)). The first term is the
    plain fluid estimate; the second is how much sooner random ups and downs
    (which a queue cannot take below zero) bring the first crossing.
    """
    target = math.floor(marks.high_depth) + 1
    if depth >= target:
        return 0.0
    drift = arrivals_per_min - reviews_per_min
    if drift <= 0:
        return None
    spread = arrivals_per_min + reviews_per_min
    scale = spread / (2 * drift * drift)
    sooner = scale * (math.exp(-2 * drift * depth / spread) - math.exp(-2 * drift * target / spread))
    return max(0.0, (target - depth) / drift - sooner)


def minutes_to_sla_breach(
    *,
    depth: int,
    oldest_minutes: float | None,
    sla_minutes: float,
    arrivals_per_min: float,
    reviews_per_min: float,
) -> float | None:
    """When the first item passes the SLA, first in first out at the live pace.

    The waiting items' ages are spread evenly from the oldest's down to
    zero; the k-th (0 = oldest) gets its verdict after (k + 1) / reviews
    minutes and breaches, ``sla - age`` minutes from now, if that comes first.
    An item arriving at t waits for the queue ahead of it, depth(t) / reviews,
    so arrivals breach once depth(t) > sla * reviews, at t + sla. Cost:
    O(depth), and depth is bounded by capacity.
    """
    if depth > 0 and oldest_minutes is not None and oldest_minutes > sla_minutes:
        return 0.0
    if reviews_per_min <= 0:
        if oldest_minutes is not None and depth > 0:
            return sla_minutes - oldest_minutes
        return sla_minutes if arrivals_per_min > 0 else None
    oldest = oldest_minutes or 0.0
    for k in range(depth):
        age = oldest * (1 - k / (depth - 1)) if depth > 1 else oldest
        if age + (k + 1) / reviews_per_min > sla_minutes:
            return max(0.0, sla_minutes - age)
    net = arrivals_per_min - reviews_per_min
    backlog_at_breach = sla_minutes * reviews_per_min
    if depth > backlog_at_breach:
        return sla_minutes  # the next arrival already waits too long
    if net <= 0:
        return None
    return (backlog_at_breach - depth) / net + sla_minutes


def forecast(
    *,
    mode: Mode,
    depth: int,
    marks: Watermarks,
    arrivals_per_min: float,
    reviews_per_min: float,
    oldest_minutes: float | None,
    sla_minutes: float | None,
) -> Forecast:
    """Minutes to the high watermark and to the first SLA breach at the live
    pace (the arrival and review rates the what-if starts from)."""
    to_high = (
        0.0 if mode is not Mode.NORMAL else minutes_to_high_watermark(depth, marks, arrivals_per_min, reviews_per_min)
    )
    to_breach = None
    if sla_minutes:
        to_breach = minutes_to_sla_breach(
            depth=depth,
            oldest_minutes=oldest_minutes,
            sla_minutes=sla_minutes,
            arrivals_per_min=arrivals_per_min,
            reviews_per_min=reviews_per_min,
        )
    return Forecast(to_high, to_breach)


def forecast_words(fc: Forecast, *, sla_minutes: float | None, mode: Mode) -> str:
    """The forecast as the dashboard says it."""
    if fc.stable:
        return "At this pace: stable."
    parts = []
    if fc.to_high_watermark is not None:
        if mode is not Mode.NORMAL:
            parts.append(f"{mode.value} mode now")
        elif fc.to_high_watermark <= 0:
            parts.append("draft mode now")
        else:
            parts.append(f"draft mode in about {max(1, round(fc.to_high_watermark))} min")
    if fc.to_sla_breach is not None and sla_minutes:
        target = f"its {sla_minutes:g}-min target"
        if fc.to_sla_breach <= 0:
            parts.append(f"an item has passed {target}")
        else:
            parts.append(f"the oldest item passes {target} in about {max(1, round(fc.to_sla_breach))} min")
    return "At this pace: " + "; ".join(parts) + "."


@dataclass(frozen=True)
class AlertState:
    """One condition's episode: ``firing`` since its alert went out;
    ``clear_since`` when the condition last stopped holding while firing;
    ``recovered_at`` when the last episode ended. Times in seconds."""

    firing: bool = False
    clear_since: float | None = None
    recovered_at: float | None = None


def condition_holds(firing: bool, value: float | None, *, on: float, off: float) -> bool:
    """A numeric condition with a band: it starts to hold above ``on`` and,
    once firing, holds until the value drops to ``off`` or below."""
    if value is None:
        return False
    return value > (off if firing else on)


def step_alert(state: AlertState, holds: bool, now: float, *, hold_seconds: float) -> tuple[AlertState, str | None]:
    """The episode after one look at the condition, and what to send:
    "fired", "recovered" or None.

    An episode fires once when the condition starts to hold. It recovers only
    after the condition has not held for ``hold_seconds`` in a row, and a new
    episode fires no sooner than ``hold_seconds`` after the last recovery
    (later, if the condition still holds then). So a condition flapping on
    and off sends at most two messages in any ``2 * hold_seconds``: a storm
    becomes one alert and one recovery.
    """
    if state.firing:
        if holds:
            return replace(state, clear_since=None), None
        if state.clear_since is None:
            return replace(state, clear_since=now), None
        if now - state.clear_since >= hold_seconds:
            return AlertState(False, None, now), "recovered"
        return state, None
    if holds and (state.recovered_at is None or now - state.recovered_at >= hold_seconds):
        return AlertState(True, None, state.recovered_at), "fired"
    return state, None
