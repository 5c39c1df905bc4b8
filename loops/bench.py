"""``python -m loops bench stop-rules``: stop rules against a noisy judge.

Reproduces the published replication study's scored loop (see
``loops/STOP_RULES.md``) and goes past it with four stress scenarios. The bench
measures the very rule objects a loop uses, through their vectorised
``stop_matrix`` form, which the tests pin to ``should_stop``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from loops.scored import draw_curves, judge_matrix, quality_matrix
from loops.stop_rules import DEFAULT_BAR, VectorStopRule, make_stop_rule, wilson_interval

SIGMAS: tuple[float, ...] = (0.02, 0.05, 0.10, 0.15, 0.20)
RULES: tuple[str, ...] = (
    "fixed6",
    "threshold",
    "confirm2",
    "confirm3",
    "smooth2",
    "margin",
    "plateau",
    "posterior",
)
SCENARIOS: tuple[str, ...] = (
    "published",
    "bias",
    "regressions",
    "unknown-sigma",
    "cold-start",
)
CAP = 8
TASKS = 300
SEEDS = 10
AUDIT_RATE = 0.10
# Scenario knobs, kept here so STOP_RULES.md and the code cannot drift apart.
BIAS_SD = 0.05
REGRESSION_P = 0.2
REGRESSION_FALLBACK = 2
MAX_IDLE_STEPS = 2


@dataclass(frozen=True)
class Batch:
    quality: np.ndarray
    scores: np.ndarray


@dataclass(frozen=True)
class Outcome:
    """One rule on one batch: how each task stopped."""

    stop_step: np.ndarray  # 1-based
    true_pass: np.ndarray
    observed_pass: np.ndarray

    @property
    def true_reach_pct(self) -> float:
        return float(100 * self.true_pass.mean())

    @property
    def observed_reach_pct(self) -> float:
        return float(100 * self.observed_pass.mean())

    @property
    def mean_steps(self) -> float:
        return float(self.stop_step.mean())


@dataclass(frozen=True)
class RuleSummary:
    true_reach_pct: float
    true_reach_sd: float
    observed_reach_pct: float
    observed_reach_sd: float
    mean_steps: float
    mean_steps_sd: float
    audit_sampled: int
    audit_rejected: int
    audit_rejected_pct: float
    audit_ci95: tuple[float, float]


def simulate(
    rng: np.random.Generator,
    sigma: float,
    scenario: str = "published",
    n_tasks: int = TASKS,
    cap: int = CAP,
) -> Batch:
    """Hidden quality and judge scores for ``n_tasks`` tasks over ``cap`` steps."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}")
    params = draw_curves(rng, n_tasks)
    steps = np.arange(1, cap + 1, dtype=float)
    progress = np.broadcast_to(steps, (n_tasks, cap)).copy()
    if scenario == "regressions":
        # A regression sets progress back instead of advancing it, as when a fix
        # breaks something that worked; quality then climbs again from there.
        back = rng.random((n_tasks, cap)) < REGRESSION_P
        for t in range(1, cap):
            moved = np.where(back[:, t], progress[:, t - 1] - REGRESSION_FALLBACK, progress[:, t - 1] + 1)
            progress[:, t] = np.maximum(1.0, moved)
    elif scenario == "cold-start":
        # The first attempts go to orientation: quality sits at s0 for 0-2 steps.
        idle = rng.integers(0, MAX_IDLE_STEPS + 1, n_tasks)
        progress = np.maximum(1.0, progress - idle[:, None])
    quality = quality_matrix(params, progress)
    noise: float | np.ndarray = sigma
    if scenario == "unknown-sigma":
        # Each task's judge has its own noise, log-uniform over [sigma/2, 2 sigma].
        noise = sigma * np.exp(rng.uniform(-np.log(2), np.log(2), n_tasks))
    if scenario == "bias":
        # One offset per task for every reading: errors that agree with each other.
        bias = rng.normal(0.0, BIAS_SD, n_tasks)
        scores = np.clip(judge_matrix(quality, noise, rng) + bias[:, None], 0.0, 1.0)
    else:
        scores = judge_matrix(quality, noise, rng)
    return Batch(quality=quality, scores=scores)


def apply_rule(rule: VectorStopRule, batch: Batch, bar: float = DEFAULT_BAR) -> Outcome:
    """Where each loop stops: the first step the rule fires, else the cap (the last step)."""
    fired = rule.stop_matrix(batch.scores).copy()
    fired[:, -1] = True
    index = fired.argmax(axis=1)
    rows = np.arange(batch.scores.shape[0])
    return Outcome(
        stop_step=index + 1,
        true_pass=batch.quality[rows, index] >= bar,
        observed_pass=batch.scores[rows, index] >= bar,
    )


def audit(outcome: Outcome, rng: np.random.Generator, rate: float = AUDIT_RATE) -> tuple[int, int]:
    """Sample auto-passes to humans, who see the true quality: (sampled, rejected)."""
    passed = np.flatnonzero(outcome.observed_pass)
    sampled = passed[rng.random(passed.size) < rate]
    return int(sampled.size), int((~outcome.true_pass[sampled]).sum())


def run_bench(
    sigma: float,
    seeds: int = SEEDS,
    scenario: str = "published",
    rules: Sequence[str] = RULES,
    n_tasks: int = TASKS,
    cap: int = CAP,
    first_seed: int = 0,
) -> dict[str, RuleSummary]:
    """Every rule over the same ``seeds`` batches (seed i draws batch i), mean and sd."""
    built = {spec: make_stop_rule(spec) for spec in rules}
    outcomes: dict[str, list[Outcome]] = {spec: [] for spec in rules}
    audits: dict[str, list[tuple[int, int]]] = {spec: [] for spec in rules}
    for seed in range(first_seed, first_seed + seeds):
        batch = simulate(np.random.default_rng(seed), sigma, scenario, n_tasks, cap)
        audit_rng = np.random.default_rng([seed, 1])
        for spec, rule in built.items():
            outcome = apply_rule(rule, batch)
            outcomes[spec].append(outcome)
            audits[spec].append(audit(outcome, audit_rng))
    summary: dict[str, RuleSummary] = {}
    for spec, rule in built.items():
        true = np.array([o.true_reach_pct for o in outcomes[spec]])
        seen = np.array([o.observed_reach_pct for o in outcomes[spec]])
        steps = np.array([o.mean_steps for o in outcomes[spec]])
        sampled = sum(a[0] for a in audits[spec])
        rejected = sum(a[1] for a in audits[spec])
        lo, hi = wilson_interval(rejected, sampled)
        ddof = 1 if seeds > 1 else 0
        summary[rule.name] = RuleSummary(
            true_reach_pct=round(float(true.mean()), 2),
            true_reach_sd=round(float(true.std(ddof=ddof)), 2),
            observed_reach_pct=round(float(seen.mean()), 2),
            observed_reach_sd=round(float(seen.std(ddof=ddof)), 2),
            mean_steps=round(float(steps.mean()), 3),
            mean_steps_sd=round(float(steps.std(ddof=ddof)), 3),
            audit_sampled=sampled,
            audit_rejected=rejected,
            audit_rejected_pct=round(100 * rejected / sampled, 2) if sampled else 0.0,
            audit_ci95=(round(100 * lo, 2), round(100 * hi, 2)),
        )
    return summary


def format_table(title: str, summary: dict[str, RuleSummary]) -> str:
    lines = [
        title,
        (f"  {'rule':<10} {'true reach %':>14} {'observed %':>11} {'mean steps':>12}   auto-passes rejected by audit"),
    ]
    for name, s in summary.items():
        lines.append(
            f"  {name:<10} {s.true_reach_pct:>7.1f} ± {s.true_reach_sd:<4.1f}"
            f" {s.observed_reach_pct:>11.1f} {s.mean_steps:>6.2f} ± {s.mean_steps_sd:<4.2f}"
            f"   {s.audit_rejected_pct:>5.1f} % [{s.audit_ci95[0]:.1f}, {s.audit_ci95[1]:.1f}]"
            f" of {s.audit_sampled}"
        )
    return "\n".join(lines)


def plot(sweep: dict[float, dict[str, RuleSummary]], path: str) -> None:
    """True reach against mean steps, one line per rule across the sigma sweep."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    names = list(next(iter(sweep.values())))
    for name in names:
        xs = [sweep[s][name].mean_steps for s in sweep]
        ys = [sweep[s][name].true_reach_pct for s in sweep]
        bold = name == "posterior"
        ax.plot(xs, ys, marker="o", linewidth=2.5 if bold else 1.2, label=name)
        for sigma, x, y in zip(sweep, xs, ys, strict=True):
            if sigma in (min(sweep), max(sweep)) and name in ("threshold", "posterior"):
                ax.annotate(f"σ={sigma:g}", (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.axhline(97, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("mean steps (cap 8)")
    ax.set_ylabel("true reach % (hidden q ≥ 0.80 at the stop)")
    ax.set_title(f"Stop rules under a noisy judge, σ ∈ {{{', '.join(f'{s:g}' for s in sweep)}}}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m loops bench stop-rules",
        description="Stop rules under a noisy judge: true vs observed reach and mean steps.",
    )
    parser.add_argument("--sigma", type=float, help="one judge noise; default: sweep five")
    parser.add_argument("--seeds", type=int, default=SEEDS)
    parser.add_argument("--tasks", type=int, default=TASKS)
    parser.add_argument(
        "--scenario",
        choices=(*SCENARIOS, "all"),
        help="stress scenario; default: published, plus all four at sigma 0.10 in the table",
    )
    parser.add_argument("--rules", default=",".join(RULES), help="comma-separated rule specs")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--plot", metavar="FILE.png")
    return parser


def main(argv: list[str]) -> int:
    """Entry point; ``argv`` starts with the bench name, ``"stop-rules"``."""
    if not argv or argv[0] != "stop-rules":
        print("usage: python -m loops bench stop-rules [options]", file=sys.stderr)
        return 2
    args = _parser().parse_args(argv[1:])
    if args.seeds < 1 or args.tasks < 3:
        print("need --seeds >= 1 and --tasks >= 3", file=sys.stderr)
        return 2
    rules = [r for r in args.rules.split(",") if r]
    try:
        [make_stop_rule(r) for r in rules]
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    sigmas = (args.sigma,) if args.sigma is not None else SIGMAS
    stress_sigma = args.sigma if args.sigma is not None else 0.10
    main_scenario = args.scenario if args.scenario not in (None, "all") else "published"
    # The stress scenarios join the report on request, and always in the full sweep.
    with_stress = args.scenario == "all" or (args.scenario is None and args.sigma is None)

    def bench(sigma: float, scenario: str) -> dict[str, RuleSummary]:
        return run_bench(sigma, args.seeds, scenario, rules, args.tasks)

    sweep = {s: bench(s, main_scenario) for s in sigmas}
    extra = {name: bench(stress_sigma, name) for name in SCENARIOS[1:]} if with_stress else {}
    if args.plot:
        plot(sweep, args.plot)

    def as_json(summary: dict[str, RuleSummary]) -> dict[str, object]:
        return {name: asdict(s) for name, s in summary.items()}

    if args.json:
        if args.sigma is not None and not extra:
            payload: dict[str, object] = {
                "sigma": args.sigma,
                "scenario": main_scenario,
                "seeds": args.seeds,
                "tasks": args.tasks,
                "cap": CAP,
                "rules": as_json(sweep[args.sigma]),
            }
        else:
            payload = {
                "seeds": args.seeds,
                "tasks": args.tasks,
                "cap": CAP,
                "sweep": {f"{s:g}": {"rules": as_json(r)} for s, r in sweep.items()},
                "scenarios": {name: {"rules": as_json(r)} for name, r in extra.items()},
            }
            if args.sigma is not None:
                payload["rules"] = as_json(sweep[args.sigma])
        print(json.dumps(payload, indent=2))
        return 0
    header = f"{args.seeds} seeds x {args.tasks} tasks, cap {CAP}, bar {DEFAULT_BAR:.2f}; mean ± sd over seeds"
    print(header)
    for sigma, summary in sweep.items():
        print(format_table(f"\nscenario {main_scenario}, σ = {sigma:g}", summary))
    for name, summary in extra.items():
        print(format_table(f"\nscenario {name}, σ = {stress_sigma:g}", summary))
    return 0
