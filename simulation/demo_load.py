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


def simulate_wave(load: DemoLoad, seed: int) -> DemoRun:
    """One wave from an empty queue: the busy part, then the quiet part, then
    the reviewer keeps going until the queue is empty (or a second wave would start)."""
    rng = random.Random(seed)
    env = simpy.Environment()
    marks = Watermarks(capacity=load.capacity, high=load.high_watermark, low=load.low_watermark)
    run = DemoRun()
    state = {"depth": 0, "mode": Mode.NORMAL}
    item_ready = env.event()

    def set_depth(depth: int) -> None:
        state["depth"] = depth
        mode = next_mode(state["mode"], depth, marks)
        if mode is not Mode.NORMAL and run.draft_at is None:
            run.draft_at = env.now
        if mode is Mode.NORMAL and state["mode"] is not Mode.NORMAL and run.normal_again_at is None:
            run.normal_again_at = env.now
        state["mode"] = mode
        run.max_depth = max(run.max_depth, depth)

    def arrive() -> None:
        nonlocal item_ready
        run.arrived += 1
        if state["depth"] >= marks.capacity:
            run.lost += 1
            return
        set_depth(state["depth"] + 1)
        if not item_ready.triggered:
            item_ready.succeed()

    def one_round() -> Any:
        # The mode when the round is submitted decides how its loops run.
        n = load.batch * (load.cut_off_draft if loop_runs_draft(state["mode"]) else load.cut_off_normal)
        offsets = sorted(rng.uniform(0, load.round_spread_seconds / 60) for _ in range(n))
        done = 0.0
        for offset in offsets:
            yield env.timeout(offset - done)
            done = offset
            arrive()

    def producer() -> Any:
        t = 0.0
        while t < load.busy_minutes:
            env.process(one_round())
            yield env.timeout(load.round_seconds / 60)
            t += load.round_seconds / 60

    def reviewer() -> Any:
        nonlocal item_ready
        mean = 1 / load.review_per_min
        while True:
            if state["depth"] == 0:
                item_ready = env.event()
                yield item_ready
            # Human decision times vary less than exponential ones: gamma, shape 4.
            yield env.timeout(rng.gammavariate(4.0, mean / 4.0))
            run.reviewed += 1
            set_depth(state["depth"] - 1)

    env.process(producer())
    env.process(reviewer())
    env.run(until=load.cycle_minutes)
    return run


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
