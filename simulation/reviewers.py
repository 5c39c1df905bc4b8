"""Noisy reviewers in one run: who reviews, their mistakes, double review and
gold items, and the two tuners they feed.

The queue (``simulation.model``) decides *whether* an item deserves approval;
the panel decides what its reviewers *say*. Each verdict is flipped with the
scenario's ``reviewer_error``. A share of items gets a second reviewer, at
the cost of a review. Gold items (truth known) arrive as the live queue
places them: beside a share ``gold_rate`` of the items admitted, a copy
(``policy.gold_copy_placed``) that waits in the queue and is reviewed as an
item is, a second review and all, and whose answers only measure the
reviewers. The tuner the run uses reads what the reviewers said, and a
reference tuner in the same run reads the truth of the same items, so the
distance between the two step limits is what the noise costs.

The panel draws from its own random stream, so switching the noise on
changes nothing the queue draws: the same seed gives the same items,
arrivals and true verdicts whatever the reviewers do.
"""

from __future__ import annotations

import random
from collections import Counter, deque

from reviewqueue.policy import (
    GoldAnswer,
    Reliability,
    ReliabilityPrior,
    ReviewerVerdict,
    TunerConfig,
    applied_step_limit,
    approve_probability,
    estimate_reliability,
    gold_copy_placed,
    tune_step_limit,
    tune_step_limit_weighted,
)
from simulation.scenario import Scenario

# Truth of a gold item: gold is curated to hold both answers alike.
GOLD_APPROVE_SHARE = 0.5
# Looks between re-estimates when only single verdicts came in (they inform
# the approve share, not the reviewers' error rates).
SINGLES_REESTIMATE_LOOKS = 5


class Review:
    """What reviewing one item will take, decided when a reviewer takes it."""

    __slots__ = ("double",)

    def __init__(self, double: bool) -> None:
        self.double = double

    @property
    def cost(self) -> int:
        """Reviews spent: the item itself and, if it has one, its second review."""
        return 1 + self.double


NO_EXTRA = Review(double=False)


class ReviewPanel:
    """The reviewers of one run and the tuners reading their verdicts."""

    def __init__(self, sc: Scenario, seed: int, cfg: TunerConfig) -> None:
        self.sc = sc
        self.cfg = cfg
        self.rng = random.Random(f"reviewers:{seed}")
        self.prior = ReliabilityPrior()
        self.reliability = Reliability(approve_share=self.prior.approve, default_error=self.prior.error)
        self.gold: list[GoldAnswer] = []
        self.items: Counter[tuple[ReviewerVerdict, ...]] = Counter()
        self.new_evidence = False
        # The tuner's window: the verdicts of each item that feeds it, and their truth.
        self.window: deque[tuple[ReviewerVerdict, ...]] = deque(maxlen=cfg.window)
        self.truth: deque[bool] = deque(maxlen=cfg.window)
        self.expected_limit = float(sc.step_limit_start)
        self.reference_limit = sc.step_limit_start
        self.first_reviews = 0
        self.extra_reviews = 0
        self.gold_copies = 0
        self.abs_error_sum = 0.0
        self.looks = 0

    def plan(self) -> Review:
        """Whether the item (or gold copy) a reviewer takes gets a second review."""
        if self.sc.double_review_rate <= 0:
            return NO_EXTRA
        return Review(double=self.rng.random() < self.sc.double_review_rate)

    def places_copy(self) -> bool:
        """Whether a gold copy is placed beside the item just admitted, by the
        live queue's rule (``policy.gold_copy_placed``). Nothing is drawn
        without gold, so a run without it draws what it drew before."""
        if self.sc.gold_rate <= 0:
            return False
        placed = gold_copy_placed(self.rng.random(), self.sc.gold_rate)
        self.gold_copies += placed
        return placed

    def review(self, truth: bool, review: Review, feeds_tuner: bool) -> bool:
        """The reviewers' verdicts on one item; returns the first one, which the queue records."""
        verdicts = self._answers(truth, review)
        self.first_reviews += 1
        self.extra_reviews += review.cost - 1
        item = tuple(verdicts)
        self.items[item] += 1
        # Only gold and double review measure a reviewer; single verdicts move the
        # approve share, which ``look`` re-estimates every few minutes for them.
        self.new_evidence = self.new_evidence or review.double
        if feeds_tuner:
            # Only the settled verdict feeds the tuner: one entry per item however many reviewed it.
            self.window.append(item)
            self.truth.append(truth)
        return verdicts[0].approved

    def review_copy(self, review: Review) -> None:
        """The reviewers' answers on a gold copy, each scored against its known
        truth; every review of it is a review beyond the items' own."""
        truth = self.rng.random() < GOLD_APPROVE_SHARE
        for verdict in self._answers(truth, review):
            self.gold.append(GoldAnswer(verdict.reviewer, verdict.approved, truth))
        self.extra_reviews += review.cost
        self.new_evidence = True

    def _answers(self, truth: bool, review: Review) -> list[ReviewerVerdict]:
        """One reviewer's verdict, and a second, someone else's, with a second review."""
        rng = self.rng
        first = rng.randrange(self.sc.review_team)
        verdicts = [self._verdict(first, truth)]
        if review.double:
            second = (first + 1 + rng.randrange(self.sc.review_team - 1)) % self.sc.review_team
            verdicts.append(self._verdict(second, truth))
        return verdicts

    def _verdict(self, person: int, truth: bool) -> ReviewerVerdict:
        flipped = self.sc.reviewer_error > 0 and self.rng.random() < self.sc.reviewer_error
        return ReviewerVerdict(person, truth != flipped)

    def look(self, plain_limit: int) -> int:
        """One look of the tuners; returns the step limit the loops now run with.

        ``plain_limit`` is what the plain tuner just decided from the recorded
        (first) verdicts; the noise-aware tuner decides from the settled
        verdicts weighed by the reviewers' estimated reliability. The reference
        tuner reads the truth, and the distance is recorded.
        """
        if len(self.truth) >= self.cfg.window:
            self.reference_limit = tune_step_limit(self.reference_limit, list(self.truth), self.cfg)
        limit = plain_limit
        if self.sc.tuner_rule == "noise_aware":
            if self.new_evidence or self.looks % SINGLES_REESTIMATE_LOOKS == 0:
                self.reliability = estimate_reliability(self.gold, self.items, self.prior, start=self.reliability)
                self.new_evidence = False
            odds = [approve_probability(item, self.reliability) for item in self.window]
            if len(odds) >= self.cfg.window:
                self.expected_limit = tune_step_limit_weighted(self.expected_limit, odds, self.cfg)
            limit = applied_step_limit(self.expected_limit, self.cfg)
        self.abs_error_sum += abs(limit - self.reference_limit)
        self.looks += 1
        return limit

    @property
    def step_limit_abs_error(self) -> float:
        """Mean over the tuner's looks of |step limit - reference step limit|."""
        return self.abs_error_sum / self.looks if self.looks else 0.0

    @property
    def extra_review_load_pct(self) -> float:
        """Second reviews and gold copies' reviews as a share of the items' own reviews."""
        return 100.0 * self.extra_reviews / self.first_reviews if self.first_reviews else 0.0
