"""What a simulation run is asked: a frozen, JSON-friendly scenario and the presets A-D."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from reviewqueue.policy import TUNER_RULES, TunerConfig, Watermarks

MODELS = ("article", "poisson")
VERDICT_MODELS = ("article", "step_aware")
TUNERS = TUNER_RULES
# The most waiting items a run may start from.
MAX_BACKLOG = 100_000


@dataclass(frozen=True)
class Scenario:
    """One what-if question. Rates are per minute; watermarks are fractions of capacity.

    ``model`` picks the arrival/review mechanics: ``article`` is the published
    one-minute-step model (a fixed count arrives, then reviewers take up to
    ``review_per_min``); ``poisson`` has Poisson arrivals and exponential review
    times shared by ``reviewers`` servers (each at ``review_per_min / reviewers``).

    ``verdict_model`` picks what a loop produces: ``article`` sends every output
    to the queue with a good/minor/critical quality mix (the step limit changes
    nothing); ``step_aware`` makes ``production_per_min`` the rate at which loops
    finish, of which the ones that hit their red line within the step limit are
    auto-passed and only cut-off output is queued (see simulation/README.md).
    """

    model: str = "article"
    production_per_min: float = 2.0
    review_per_min: float = 3.0
    reviewers: int = 1
    capacity: int = 50
    duration_min: int = 120
    burst_prob: float = 0.015
    burst_mult: float = 3.0
    high_watermark: float = 0.8
    low_watermark: float = 0.3
    backpressure: bool = False
    # Weights of priorities 0 (lowest, shed first), 1, 2, ...
    priority_mix: tuple[float, ...] = (0.3, 0.5, 0.2)
    verdict_model: str = "article"
    # Published verdict model: good / minor / critical output.
    quality_mix: tuple[float, ...] = (0.7, 0.2, 0.1)
    quality_approve: tuple[float, ...] = (0.95, 0.30, 0.10)
    # A draft is a single attempt with no fix loop.
    draft_approve: float = 0.3
    step_limit_start: int = 5
    min_step_limit: int = 3
    max_step_limit: int = 15
    tuner_window: int = 10
    approve_high: float = 0.8
    approve_low: float = 0.4
    # step_aware verdict model: easy tasks reach their red line quickly, hard ones rarely;
    # cut-off output of an easy task is nearly right, of a hard task mostly wrong.
    easy_share: float = 0.85
    easy_hazard: float = 0.2
    hard_hazard: float = 0.03
    easy_cutoff_approve: float = 0.95
    hard_cutoff_approve: float = 0.25
    # Noisy reviewers (simulation/README.md, "Noisy reviewers"): each verdict is
    # flipped with ``reviewer_error``; ``double_review_rate`` of items get a
    # second reviewer, at the cost of a review; beside each admitted item a gold
    # copy is placed with chance ``gold_rate`` (policy.gold_copy_placed, as the
    # live queue places them), which waits and is reviewed like an item, a
    # second review and all. ``review_team`` people share the reviews, so a
    # second review goes to someone else. ``tuner_rule`` picks the plain tuner or
    # the noise-aware one (policy.tune_step_limit_weighted).
    reviewer_error: float = 0.0
    tuner_rule: str = "plain"
    double_review_rate: float = 0.0
    gold_rate: float = 0.0
    review_team: int = 3
    # The SLA and the age watermark (simulation/README.md, "SLA and the age
    # watermark"), in minutes; 0 leaves each off. ``sla_minutes`` only adds
    # ``sla_attainment`` to the results; the age watermark drives the mode.
    sla_minutes: float = 0.0
    age_high_minutes: float = 0.0
    age_low_minutes: float = 0.0
    # The backlog the run starts from: the age in minutes of each item waiting
    # at minute 0 (a live queue's waiting items); empty starts from an empty queue.
    initial_ages_min: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        _check(self.model in MODELS, "model", f"must be one of {', '.join(MODELS)}")
        _check(
            self.verdict_model in VERDICT_MODELS,
            "verdict_model",
            f"must be one of {', '.join(VERDICT_MODELS)}",
        )
        for name in ("production_per_min", "review_per_min", "burst_mult"):
            value = getattr(self, name)
            _check(math.isfinite(value) and value >= 0, name, "must be a finite number >= 0")
        _check(self.burst_mult >= 1, "burst_mult", "must be at least 1")
        _check(self.tuner_rule in TUNERS, "tuner_rule", f"must be one of {', '.join(TUNERS)}")
        _check(0 <= self.reviewer_error < 0.5, "reviewer_error", "must be in [0, 0.5)")
        _check(self.review_team >= 2, "review_team", "must be at least 2 (a second review needs someone else)")
        _check(self.reviewers >= 1, "reviewers", "must be at least 1")
        _check(1 <= self.duration_min <= 1_000_000, "duration_min", "must be in [1, 1000000]")
        for name in (
            "burst_prob",
            "draft_approve",
            "easy_share",
            "easy_hazard",
            "hard_hazard",
            "easy_cutoff_approve",
            "hard_cutoff_approve",
            "double_review_rate",
            "gold_rate",
        ):
            value = getattr(self, name)
            _check(0 <= value <= 1, name, "must be in [0, 1]")
        for name in ("priority_mix", "quality_mix"):
            mix = getattr(self, name)
            _check(
                len(mix) >= 1 and all(w >= 0 for w in mix) and sum(mix) > 0,
                name,
                "must be non-negative weights with a positive sum",
            )
        _check(
            len(self.quality_approve) == len(self.quality_mix) and all(0 <= p <= 1 for p in self.quality_approve),
            "quality_approve",
            "must hold one probability in [0, 1] per quality_mix entry",
        )
        _check(math.isfinite(self.sla_minutes) and self.sla_minutes >= 0, "sla_minutes", "must be a number >= 0")
        _check(
            all(math.isfinite(age) and age >= 0 for age in self.initial_ages_min),
            "initial_ages_min",
            "must be ages in minutes, each a number >= 0",
        )
        _check(len(self.initial_ages_min) <= MAX_BACKLOG, "initial_ages_min", f"must hold at most {MAX_BACKLOG} items")
        # Validation of the queue's own numbers stays with the policy that uses them.
        self.watermarks()
        tuner = self.tuner()
        _check(
            tuner.min_steps <= self.step_limit_start <= tuner.max_steps,
            "step_limit_start",
            "must lie within [min_step_limit, max_step_limit]",
        )

    def watermarks(self) -> Watermarks:
        age = self.age_high_minutes > 0 or self.age_low_minutes > 0
        return Watermarks(
            capacity=self.capacity,
            high=self.high_watermark,
            low=self.low_watermark,
            age_high=self.age_high_minutes if age else None,
            age_low=self.age_low_minutes if age else None,
        )

    def tuner(self) -> TunerConfig:
        return TunerConfig(
            window=self.tuner_window,
            approve_high=self.approve_high,
            approve_low=self.approve_low,
            min_steps=self.min_step_limit,
            max_steps=self.max_step_limit,
        )

    @property
    def noisy_reviewers(self) -> bool:
        """Whether reviewers make mistakes, review twice, answer gold or feed the noise-aware tuner."""
        return bool(self.reviewer_error or self.double_review_rate or self.gold_rate or self.tuner_rule != "plain")

    @property
    def ratio(self) -> float:
        """Production over review capacity (ARCHITECTURE.md rule 9)."""
        if self.review_per_min == 0:
            return math.inf
        return self.production_per_min / self.review_per_min

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for key, value in out.items():
            if isinstance(value, tuple):
                out[key] = list(value)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scenario:
        """Build from JSON-like input; raises ValueError naming the offending field."""
        if not isinstance(data, dict):
            # One exception type for every bad input keeps the callers' handling simple.
            raise ValueError("scenario: must be an object")  # noqa: TRY004
        fields = {f.name: f for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key not in fields:
                raise ValueError(f"{key}: unknown scenario field")
            kwargs[key] = _coerce(key, fields[key].default, value)
        return cls(**kwargs)


def _check(ok: bool, field_name: str, message: str) -> None:
    if not ok:
        raise ValueError(f"{field_name}: {message}")


def _coerce(name: str, default: Any, value: Any) -> Any:
    # JSON has no tuples and no int/float distinction, so convert by the default's type.
    try:
        if isinstance(default, bool):
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("on", "true", "1", "off", "false", "0"):
                return value.lower() in ("on", "true", "1")
            raise TypeError
        if isinstance(default, int):
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise TypeError
            return int(value)
        if isinstance(default, float):
            if isinstance(value, bool):
                raise TypeError
            return float(value)
        if isinstance(default, tuple):
            if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
                raise TypeError
            return tuple(float(v) for v in value)
        if isinstance(default, str):
            if not isinstance(value, str):
                raise TypeError
            return value
    except (TypeError, ValueError):
        pass
    else:
        return value
    raise ValueError(f"{name}: expected {type(default).__name__}, got {value!r}")


@dataclass(frozen=True)
class Preset:
    """A named scenario and what it asks, for the what-if page and the CLI's
    help: one entry, so no preset exists without its description."""

    scenario: Scenario
    description: str


PRESET_CATALOGUE: dict[str, Preset] = {
    "A": Preset(
        Scenario(production_per_min=2.0, review_per_min=3.0),
        "Steady: 2 outputs/min against 3 decisions/min (ratio 0.67). Review keeps up; nothing should be lost.",
    ),
    "B": Preset(
        Scenario(production_per_min=5.0, review_per_min=3.0),
        "Overload: 5 outputs/min against 3 decisions/min (ratio 1.67). The queue fills and sheds.",
    ),
    "C": Preset(
        Scenario(production_per_min=2.0, review_per_min=3.0, burst_prob=0.045),
        "Bursty: as A, with bursts three times as often. Review keeps up on average; bursts test the headroom.",
    ),
    "D": Preset(
        Scenario(production_per_min=2.0, review_per_min=1.0),
        "Under-staffed: 2 outputs/min against 1 decision/min (ratio 2). Overflows whatever the design.",
    ),
}

# Views of the catalogue: the scenarios alone (the CLI, the figures, the
# studies) and the descriptions alone.
PRESETS: dict[str, Scenario] = {name: preset.scenario for name, preset in PRESET_CATALOGUE.items()}
PRESET_DESCRIPTIONS: dict[str, str] = {name: preset.description for name, preset in PRESET_CATALOGUE.items()}
