"""The demo's producer, modelled: how hard may ``dev.py demo`` push the queue?

The demo submits the built-in suite in *waves*: a round every
``round_seconds`` for ``busy_minutes``, then nothing for ``quiet_minutes``.
One reviewer decides at ``review_per_min``. The question is whether that
reviewer sees draft mode arrive *and recede* within one wave, losing
nothing: a stressed but recoverable load. The queue follows the same
watermark code as production (``reviewqueue.policy.next_mode``).

``python -m simulation demo-load`` prints the answer for the demo's defaults
(which ``dev.py`` uses: a test keeps the two in step).
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import asdict, dataclass
from typing import Any

import simpy

from reviewqueue.policy import Mode, Watermarks, loop_runs_draft, next_mode


@dataclass(frozen=True)
class DemoLoad:
    """The demo's load knobs (dev.py's DEMO_* variables) and what they meet."""

    # Chosen with judge(): the most robust of a grid over round_seconds
    # 40-70, busy 6-9 and quiet 21-24 minutes (see the README's demo section).
    round_seconds: float = 60.0  # while busy, one round of the suite this often
    busy_minutes: float = 7.0
    quiet_minutes: float = 23.0
    batch: int = 1  # copies of the suite per round
    # Per copy of the suite: the conceptual (3), open (3) and regressing (2)
    # tasks are cut off and queued; in draft mode every task runs once and
    # none passes its first attempt, so all twelve are queued (as drafts).
    cut_off_normal: int = 8
    cut_off_draft: int = 12
    round_spread_seconds: float = 30.0  # a round's loops finish over this long
    review_per_min: float = 2.0  # one reviewer at a normal pace: 30 s a decision
    capacity: int = 50
    high_watermark: float = 0.8
    low_watermark: float = 0.3

    @property
    def cycle_minutes(self) -> float:
        return self.busy_minutes + self.quiet_minutes

    @property
    def mean_production_per_min(self) -> float:
        """Cut-off items per minute over a whole wave, counted in normal mode."""
        rounds = math.ceil(self.busy_minutes * 60 / self.round_seconds)
        return rounds * self.batch * self.cut_off_normal / self.cycle_minutes

    @property
    def busy_production_per_min(self) -> float:
        return self.batch * self.cut_off_normal * 60 / self.round_seconds


@dataclass
class DemoRun:
    """One wave, seen by one reviewer. Times are minutes from the first round."""

    draft_at: float | None = None
    normal_again_at: float | None = None
    max_depth: int = 0
    arrived: int = 0
    lost: int = 0
    reviewed: int = 0


class _Wave:
    """One wave's queue and its two SimPy processes: the producer's rounds and
    the reviewer. Depth and mode follow the production watermark code."""

    def __init__(self, load: DemoLoad, seed: int) -> None:
        self.load = load
        self.rng = random.Random(seed)
        self.env = simpy.Environment()
        self.marks = Watermarks(capacity=load.capacity, high=load.high_watermark, low=load.low_watermark)
        self.run = DemoRun()
        self.depth = 0
        self.mode = Mode.NORMAL
        self.item_ready = self.env.event()  # succeeds when an item arrives at an empty queue

    def set_depth(self, depth: int) -> None:
        """The new depth, the mode it leads to, and when draft mode came and went."""
        run = self.run
        self.depth = depth
        mode = next_mode(self.mode, depth, self.marks)
        if mode is not Mode.NORMAL and run.draft_at is None:
            run.draft_at = self.env.now
        if mode is Mode.NORMAL and self.mode is not Mode.NORMAL and run.normal_again_at is None:
            run.normal_again_at = self.env.now
        self.mode = mode
        run.max_depth = max(run.max_depth, depth)

    def arrive(self) -> None:
        """One cut-off item reaches the queue, or is lost when it is full."""
        self.run.arrived += 1
        if self.depth >= self.marks.capacity:
            self.run.lost += 1
            return
        self.set_depth(self.depth + 1)
        if not self.item_ready.triggered:
            self.item_ready.succeed()

    def one_round(self) -> Any:
        """One round of the suite: its cut-off loops finish spread over a while."""
        load = self.load
        # The mode when the round is submitted decides how its loops run.
        n = load.batch * (load.cut_off_draft if loop_runs_draft(self.mode) else load.cut_off_normal)
        offsets = sorted(self.rng.uniform(0, load.round_spread_seconds / 60) for _ in range(n))
        done = 0.0
        for offset in offsets:
            yield self.env.timeout(offset - done)
            done = offset
            self.arrive()

    def producer(self) -> Any:
        """A round every ``round_seconds`` while the wave is busy."""
        t = 0.0
        while t < self.load.busy_minutes:
            self.env.process(self.one_round())
            yield self.env.timeout(self.load.round_seconds / 60)
            t += self.load.round_seconds / 60

    def reviewer(self) -> Any:
        """One reviewer deciding items for the whole wave, waiting when the queue is empty."""
        mean = 1 / self.load.review_per_min
        while True:
            if self.depth == 0:
                self.item_ready = self.env.event()
                yield self.item_ready
            # Human decision times vary less than exponential ones: gamma, shape 4.
            yield self.env.timeout(self.rng.gammavariate(4.0, mean / 4.0))
            self.run.reviewed += 1
            self.set_depth(self.depth - 1)


def simulate_wave(load: DemoLoad, seed: int) -> DemoRun:
    """One wave from an empty queue: the busy part, then the quiet part, then
    the reviewer keeps going until the queue is empty (or a second wave would start)."""
    wave = _Wave(load, seed)
    wave.env.process(wave.producer())
    wave.env.process(wave.reviewer())
    wave.env.run(until=load.cycle_minutes)
    return wave.run


@dataclass(frozen=True)
class DemoVerdict:
    seeds: int
    draft_share: float  # share of waves in which draft mode arrived
    recovered_share: float  # ...and receded again within the wave
    lossless_share: float
    draft_at_median: float | None
    normal_again_at_median: float | None
    max_depth_median: float
    busy_ratio: float  # production / review while busy
    wave_ratio: float  # production / review over the whole wave

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge(load: DemoLoad, seeds: int = 200, seed: int = 0) -> DemoVerdict:
    """``seeds`` independent waves of ``load``, summarised."""
    runs = [simulate_wave(load, seed * 1_000_003 + i) for i in range(seeds)]
    drafted = [r for r in runs if r.draft_at is not None]
    recovered = [r for r in drafted if r.normal_again_at is not None]
    return DemoVerdict(
        seeds=seeds,
        draft_share=len(drafted) / seeds,
        recovered_share=len(recovered) / seeds,
        lossless_share=sum(1 for r in runs if r.lost == 0) / seeds,
        draft_at_median=statistics.median(r.draft_at for r in drafted) if drafted else None,  # type: ignore[misc]
        normal_again_at_median=(
            statistics.median(r.normal_again_at for r in recovered) if recovered else None  # type: ignore[misc]
        ),
        max_depth_median=statistics.median(r.max_depth for r in runs),
        busy_ratio=load.busy_production_per_min / load.review_per_min,
        wave_ratio=load.mean_production_per_min / load.review_per_min,
    )
