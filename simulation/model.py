"""The capacity model as SimPy processes: one run of one scenario.

Admission, shedding, modes and tuning go through ``reviewqueue.policy`` so the
model runs the queue's production rules, not a copy of them.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import simpy

from reviewqueue.policy import (
    Candidate,
    Mode,
    counts_for_tuner,
    loop_runs_draft,
    next_mode,
    plan_admission,
    tune_step_limit,
)
from simulation.reviewers import NO_EXTRA, Review, ReviewPanel
from simulation.scenario import Scenario

# Rates such as 2.5/min are carried over between minutes; the epsilon keeps
# 0.1 + 0.2 style float sums from losing an item.
CARRY_EPS = 1e-9


@dataclass
class RunResult:
    """Everything one run measured. Times are minutes."""

    produced: int = 0
    auto_passed: int = 0
    arrived: int = 0  # outputs offered to the queue
    enqueued: int = 0
    dropped: int = 0  # lost at capacity: dropped (backpressure off) or shed (on)
    reviewed: int = 0
    approved: int = 0
    drafts: int = 0
    agent_steps: int = 0
    mean_wait_min: float = 0.0
    p95_wait_min: float = 0.0
    max_depth: int = 0
    step_limit_final: int = 0
    lost_by_priority: list[int] = field(default_factory=list)
    depth_series: list[float] = field(default_factory=list)
    step_limit_trajectory: list[int] = field(default_factory=list)
    mode_minutes: dict[str, float] = field(default_factory=dict)
    # Minutes in which at least one item was lost. In the article model the
    # queue is full only inside a minute (reviewers drain it before the minute
    # ends), so neither the shedding mode nor a minute-end sample shows it.
    minutes_with_loss: int = 0
    events: int = 0
    # Noisy reviewers (simulation/reviewers.py): 0 when reviewers make no mistakes and
    # nothing is reviewed twice.
    step_limit_abs_error: float = 0.0
    extra_review_load_pct: float = 0.0
    extra_reviews: int = 0
    # Gold copies placed beside admitted items (scenario.gold_rate), each reviewed like an item.
    gold_copies: int = 0
    # SLA (scenario.sla_minutes > 0): the share of reviewed items decided within it.
    sla_met: int = 0
    # When the queue first left normal mode (minutes), None if it never did.
    first_draft_min: float | None = None
    first_draft_depth: int | None = None

    @property
    def overflow_pct(self) -> float:
        return 100.0 * self.dropped / self.arrived if self.arrived else 0.0


class SimItem:
    """An item waiting for review, or (``gold``) a gold copy placed beside one."""

    __slots__ = ("alive", "approve_prob", "arrived", "draft", "gold", "priority", "review", "seq")

    def __init__(
        self, seq: int, arrived: float, priority: int, approve_prob: float, draft: bool = False, gold: bool = False
    ) -> None:
        self.seq = seq
        self.draft = draft
        self.arrived = arrived
        self.priority = priority
        self.approve_prob = approve_prob
        self.gold = gold
        self.alive = True
        self.review: Review = NO_EXTRA


class SimQueue:
    """The review queue's state plus the loops feeding it and the tuner reading it."""

    def __init__(self, sc: Scenario, rng: random.Random, panel_seed: int = 0) -> None:
        self.sc = sc
        self.rng = rng
        self.marks = sc.watermarks()
        self.tuner = sc.tuner()
        self.fifo: deque[SimItem] = deque()
        # Per-priority FIFOs make the shedding candidate an O(1) lookup; shed or
        # reviewed items are skipped lazily through ``alive``.
        self.by_priority: list[deque[SimItem]] = [deque() for _ in sc.priority_mix]
        self.depth = 0  # waiting + under review, as policy.plan_admission counts it
        self.waiting = 0
        self.mode = Mode.NORMAL
        self.mode_since = 0.0
        self.mode_time = {m.value: 0.0 for m in Mode}
        self.step_limit = sc.step_limit_start
        self.verdicts: deque[bool] = deque(maxlen=sc.tuner_window)
        self.waits: list[float] = []
        self.seq = itertools.count()
        self.result = RunResult(lost_by_priority=[0] * len(sc.priority_mix))
        self.last_loss_minute = -1
        self.priority_cdf = cumulative_weights(sc.priority_mix)
        self.quality_cdf = cumulative_weights(sc.quality_mix)
        self.idle: list[simpy.Event] = []
        # Items under review, by seq: their arrival time counts for the oldest
        # waiting age, as a claimed item's does in the live queue.
        self.reviewing: dict[int, float] = {}
        # Without noise, double review or a noise-aware tuner the reviewers are the
        # published model's: always right, once per item, and nothing else is drawn.
        self.panel = ReviewPanel(sc, panel_seed, self.tuner) if sc.noisy_reviewers else None

    # -- loops -----------------------------------------------------------------
    def produce(self, now: float) -> SimItem | None:
        """One loop finishes; its output, or None when it was auto-passed."""
        sc, rng, result = self.sc, self.rng, self.result
        draft = sc.backpressure and loop_runs_draft(self.mode)
        steps = 1 if draft else self.step_limit
        result.produced += 1
        result.drafts += draft
        if sc.verdict_model == "article":
            # The published model: every output reaches a human and ran to the limit.
            result.agent_steps += steps
            if draft:
                approve = sc.draft_approve
            else:
                approve = sc.quality_approve[bisect.bisect(self.quality_cdf, rng.random())]
        else:
            easy = rng.random() < sc.easy_share
            hazard = sc.easy_hazard if easy else sc.hard_hazard
            needed = _geometric(rng, hazard)
            result.agent_steps += min(needed, steps)
            if needed <= steps:
                result.auto_passed += 1
                return None
            if draft:
                approve = sc.draft_approve
            else:
                approve = sc.easy_cutoff_approve if easy else sc.hard_cutoff_approve
        priority = bisect.bisect(self.priority_cdf, rng.random())
        return SimItem(next(self.seq), now, priority, approve, draft)

    # -- the queue ---------------------------------------------------------------
    def seed_backlog(self, ages: tuple[float, ...]) -> None:
        """Start with items already waiting, ``ages`` minutes old at minute 0
        (oldest served first, as in the live queue); each draws a priority
        from the mix. Not counted as arrivals: they arrived before the run.
        The mode starts where the policy puts such a queue."""
        for age in sorted(ages, reverse=True):
            priority = bisect.bisect(self.priority_cdf, self.rng.random())
            self._enqueue(SimItem(next(self.seq), -age, priority, self._backlog_approve()))
            self.depth += 1
        self.result.enqueued -= len(ages)
        self.result.max_depth = self.depth
        if ages and self.sc.backpressure:
            self._set_mode(0.0, next_mode(self.mode, self.depth, self.marks, self.oldest_minutes(0.0)))

    def _backlog_approve(self) -> float:
        sc = self.sc
        if sc.verdict_model == "article":
            return sc.quality_approve[bisect.bisect(self.quality_cdf, self.rng.random())]
        return sc.easy_cutoff_approve if self.rng.random() < sc.easy_share else sc.hard_cutoff_approve

    def offer(self, now: float, item: SimItem) -> None:
        result = self.result
        result.arrived += 1
        if not self.sc.backpressure:
            if self.depth >= self.marks.capacity:
                result.dropped += 1
                result.lost_by_priority[item.priority] += 1
                self._note_loss(now)
                return
            self._enqueue(item)
            self.depth += 1
            placed = self._place_copy(item)
        else:
            # Only a full queue sheds, and then only its lowest waiting item can matter.
            lowest = self._lowest_waiting() if self.depth >= self.marks.capacity else None
            plan = plan_admission(
                mode=self.mode,
                depth=self.depth,
                marks=self.marks,
                incoming=Candidate(item.priority, item.seq, item.seq),
                sheddable=() if lowest is None else (Candidate(lowest.priority, lowest.seq, lowest),),
                oldest_minutes=self.oldest_minutes(now),
            )
            if plan.shed is not None:
                victim = item if plan.shed.key == item.seq else plan.shed.key
                victim.alive = False
                if victim is not item:
                    self.waiting -= 1
                result.dropped += 1
                result.lost_by_priority[victim.priority] += 1
                self._note_loss(now)
            placed = False
            if plan.enqueue:
                self._enqueue(item)
                placed = self._place_copy(item)
            self.depth = plan.depth
            self._set_mode(now, plan.mode)
        result.max_depth = max(result.max_depth, self.depth)
        for _ in range(1 + placed):  # a reviewer for the item, and one for its copy
            if self.idle:
                self.idle.pop().succeed()

    def _enqueue(self, item: SimItem) -> None:
        self.result.enqueued += 1
        self.waiting += 1
        self.fifo.append(item)
        self.by_priority[item.priority].append(item)

    def _place_copy(self, item: SimItem) -> bool:
        """Beside an item just admitted, a gold copy with the live queue's
        chance (``ReviewPanel.places_copy``): right behind it in the queue,
        with its arrival and priority. Like the live queue's copies it is
        never in the depth, never shed and never counted as an arrival; it
        only takes reviewers' time."""
        if self.panel is None or not self.panel.places_copy():
            return False
        self.fifo.append(SimItem(next(self.seq), item.arrived, item.priority, 0.0, item.draft, gold=True))
        return True

    def _lowest_waiting(self) -> SimItem | None:
        for lane in self.by_priority:
            while lane and not lane[0].alive:
                lane.popleft()
            if lane:
                return lane[0]
        return None

    def oldest_minutes(self, now: float) -> float | None:
        """How long the oldest waiting item (queued or under review) has
        waited; None when nothing waits or no age watermark asks."""
        if not self.marks.has_age:
            return None
        head = self.peek()
        if head is not None and head.gold:  # a copy has no age of its own: the first real item's
            head = next((item for item in self.fifo if item.alive and not item.gold), None)
        arrived = [*self.reviewing.values(), *([head.arrived] if head is not None else [])]
        return now - min(arrived) if arrived else None

    def peek(self) -> SimItem | None:
        """The item ``take`` would hand out next, left waiting (shed items
        at the front are dropped on the way, as ``take`` would)."""
        fifo = self.fifo
        while fifo and not fifo[0].alive:
            fifo.popleft()
        return fifo[0] if fifo else None

    def take(self) -> SimItem | None:
        """The oldest waiting item goes under review (reviewers work first in, first out)."""
        fifo = self.fifo
        while fifo:
            item = fifo.popleft()
            if item.alive:
                item.alive = False  # no longer sheddable
                if self.panel is not None:
                    item.review = self.panel.plan()  # a copy is chosen for a second review alike
                if item.gold:
                    return item
                self.waiting -= 1
                if self.marks.has_age:
                    self.reviewing[item.seq] = item.arrived
                return item
        return None

    def finish(self, now: float, item: SimItem) -> None:
        result = self.result
        if item.gold and self.panel is not None:
            self.panel.review_copy(item.review)  # measures the reviewers; no verdict, no depth
            return
        approved = self.rng.random() < item.approve_prob
        feeds_tuner = counts_for_tuner(sampled=False, draft=item.draft)
        if self.panel is not None:
            approved = self.panel.review(approved, item.review, feeds_tuner)
        if feeds_tuner:
            self.verdicts.append(approved)
        self.waits.append(now - item.arrived)
        self.reviewing.pop(item.seq, None)
        if self.sc.sla_minutes and now - item.arrived <= self.sc.sla_minutes:
            result.sla_met += 1
        result.reviewed += 1
        result.approved += approved
        self.depth -= 1
        if self.sc.backpressure:
            self._set_mode(now, next_mode(self.mode, self.depth, self.marks, self.oldest_minutes(now)))

    def look_at_age(self, now: float) -> None:
        """Time passing alone can move the mode under an age watermark, as the
        live queue's periodic sampler sees it: look once a minute."""
        if self.sc.backpressure and self.marks.has_age:
            self._set_mode(now, next_mode(self.mode, self.depth, self.marks, self.oldest_minutes(now)))

    def _note_loss(self, now: float) -> None:
        minute = math.floor(now)
        if minute != self.last_loss_minute:
            self.last_loss_minute = minute
            self.result.minutes_with_loss += 1

    def _set_mode(self, now: float, mode: Mode) -> None:
        if mode is not self.mode:
            if self.mode is Mode.NORMAL and self.result.first_draft_min is None:
                self.result.first_draft_min = now
                self.result.first_draft_depth = self.depth
            self.mode_time[self.mode.value] += now - self.mode_since
            self.mode = mode
            self.mode_since = now

    def end_of_minute(self, now: float | None = None) -> None:
        """Sample the depth and let the tuner look at the last window of verdicts."""
        result = self.result
        if now is not None:
            self.look_at_age(now)
        result.depth_series.append(self.depth)
        if len(self.verdicts) >= self.tuner.window:
            self.step_limit = tune_step_limit(self.step_limit, list(self.verdicts), self.tuner)
        if self.panel is not None:
            self.step_limit = self.panel.look(self.step_limit)
        result.step_limit_trajectory.append(self.step_limit)

    def finalise(self, end: float, events: int) -> RunResult:
        result = self.result
        self.mode_time[self.mode.value] += end - self.mode_since
        result.mode_minutes = self.mode_time
        result.step_limit_final = self.step_limit
        result.events = events
        if self.panel is not None:
            result.step_limit_abs_error = self.panel.step_limit_abs_error
            result.extra_review_load_pct = self.panel.extra_review_load_pct
            result.extra_reviews = self.panel.extra_reviews
            result.gold_copies = self.panel.gold_copies
        if self.waits:
            result.mean_wait_min = math.fsum(self.waits) / len(self.waits)
            result.p95_wait_min = _percentile(self.waits, 95.0)
        return result


@dataclass
class EventTally:
    """The events the processes of one run have yielded to SimPy, shared by
    them all and reported as ``RunResult.events``."""

    scheduled: int = 0


def simulate(sc: Scenario, seed: int) -> RunResult:
    """One run of ``sc``, from an empty queue or the scenario's backlog,
    reproducible from ``seed``."""
    rng = random.Random(seed)
    env = simpy.Environment()
    queue = SimQueue(sc, rng, seed)
    queue.seed_backlog(sc.initial_ages_min)
    queue.result.depth_series.append(queue.depth)
    queue.result.step_limit_trajectory.append(queue.step_limit)
    events = EventTally()
    if sc.model == "article":
        # Same-time events run in scheduling order, so starting the producer
        # first makes each minute's arrivals land before that minute's review.
        env.process(article_producer(env, queue, events))
        env.process(_article_reviewer(env, queue, events))
        env.run(until=sc.duration_min)
    else:
        env.process(poisson_arrivals(env, queue, events))
        mu = sc.review_per_min / sc.reviewers
        for _ in range(sc.reviewers if mu > 0 else 0):
            env.process(_poisson_reviewer(env, queue, mu, events))
        env.process(_clock(env, queue, events))
        env.run(until=sc.duration_min)
        queue.end_of_minute(env.now)  # events at exactly the end time are not processed by run()
    return queue.finalise(float(sc.duration_min), events.scheduled)


Proc = Generator[simpy.Event, Any, None]


def article_producer(env: simpy.Environment, queue: SimQueue, events: EventTally) -> Proc:
    sc, rng = queue.sc, queue.rng
    carry = 0.0
    for _ in range(sc.duration_min):
        burst = rng.random() < sc.burst_prob
        carry += sc.production_per_min * (sc.burst_mult if burst else 1.0)
        n = int(carry + CARRY_EPS)
        carry -= n
        for _ in range(n):
            item = queue.produce(env.now)
            if item is not None:
                queue.offer(env.now, item)
        events.scheduled += 1
        yield env.timeout(1)


def _article_reviewer(env: simpy.Environment, queue: SimQueue, events: EventTally) -> Proc:
    sc = queue.sc
    carry = 0.0
    owed = 0  # reviews a double review or gold item took beyond last minute's quota
    for _ in range(sc.duration_min):
        carry += sc.review_per_min
        quota = int(carry + CARRY_EPS)
        carry -= quota  # capacity unused this minute is lost, not banked
        quota -= owed
        while quota > 0:
            item = queue.take()
            if item is None:
                break
            quota -= item.review.cost
            queue.finish(env.now, item)
        owed = max(0, -quota)
        queue.end_of_minute(env.now)
        events.scheduled += 1
        yield env.timeout(1)


def poisson_arrivals(env: simpy.Environment, queue: SimQueue, events: EventTally) -> Proc:
    sc, rng = queue.sc, queue.rng
    for minute in range(sc.duration_min):
        # Bursts modulate the rate minute by minute; memorylessness lets the
        # next gap be drawn afresh at every rate change.
        burst = rng.random() < sc.burst_prob
        rate = sc.production_per_min * (sc.burst_mult if burst else 1.0)
        end = minute + 1
        t = float(minute)
        while rate > 0:
            t += rng.expovariate(rate)
            if t >= end:
                break
            events.scheduled += 1
            yield env.timeout(t - env.now)
            item = queue.produce(env.now)
            if item is not None:
                queue.offer(env.now, item)
        events.scheduled += 1
        yield env.timeout(end - env.now)


def _poisson_reviewer(env: simpy.Environment, queue: SimQueue, mu: float, events: EventTally) -> Proc:
    rng = queue.rng
    while True:
        item = queue.take()
        if item is None:
            wake = env.event()
            queue.idle.append(wake)
            events.scheduled += 1
            yield wake
            continue
        events.scheduled += 1
        # A second review or a gold item is another review's worth of time.
        busy = sum(rng.expovariate(mu) for _ in range(item.review.cost))
        yield env.timeout(busy)
        queue.finish(env.now, item)


def _clock(env: simpy.Environment, queue: SimQueue, events: EventTally) -> Proc:
    for _ in range(queue.sc.duration_min - 1):
        events.scheduled += 1
        yield env.timeout(1)
        queue.end_of_minute(env.now)


def cumulative_weights(weights: tuple[float, ...]) -> list[float]:
    total = math.fsum(weights)
    acc, out = 0.0, []
    for w in weights[:-1]:
        acc += w
        out.append(acc / total)
    return out


def _geometric(rng: random.Random, p: float) -> int:
    """Steps until the red line first passes, each step passing with chance ``p``."""
    if p >= 1:
        return 1
    if p <= 0:
        return 1 << 62
    return int(math.log(1.0 - rng.random()) / math.log1p(-p)) + 1


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    # Linear interpolation between closest ranks, as numpy's default does.
    pos = (len(ordered) - 1) * pct / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
