"""``python -m loops bench stop-rules``: stop rules against a noisy judge.

Reproduces the published replication study's scored loop (see
``loops/STOP_RULES.md``) and goes past it with four stress scenarios. The bench
measures the very rule objects a loop uses, through their vectorised
``stop_matrix`` form, which the tests pin to ``should_stop``.

On non-monotone curves (``--regress-prob P``: the ``regressions`` scenario with
a regression step of probability P) it also measures what a cut-off loop hands
over, its last attempt or its best so far, and the steps the regression guard
saves (``handover``), with the runner's own guard and best-attempt choice.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from loops.intervals import wilson_interval
from loops.scored import draw_curves, judge_matrix, quality_matrix
from loops.stop_rules import (
    DEFAULT_BAR,
    DEFAULT_REGRESSION_K,
    DEFAULT_REGRESSION_MARGIN,
    RegressionGuard,
    VectorStopRule,
    best_so_far_matrix,
    estimate_matrix,
    make_stop_rule,
)

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
    regress_prob: float = REGRESSION_P,
) -> Batch:
    """Hidden quality and judge scores for ``n_tasks`` tasks over ``cap`` steps;
    ``regress_prob`` is the chance of a regression step in ``regressions``."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}")
    if not 0 <= regress_prob <= 1:
        raise ValueError("regress_prob must be in [0, 1]")
    params = draw_curves(rng, n_tasks)
    steps = np.arange(1, cap + 1, dtype=float)
    progress = np.broadcast_to(steps, (n_tasks, cap)).copy()
    if scenario == "regressions":
        # A regression sets progress back instead of advancing it, as when a fix
        # breaks something that worked; quality then climbs again from there.
        back = rng.random((n_tasks, cap)) < regress_prob
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
    regress_prob: float = REGRESSION_P,
) -> dict[str, RuleSummary]:
    """Every rule over the same ``seeds`` batches (seed i draws batch i), mean and sd."""
    built = {spec: make_stop_rule(spec) for spec in rules}
    outcomes: dict[str, list[Outcome]] = {spec: [] for spec in rules}
    audits: dict[str, list[tuple[int, int]]] = {spec: [] for spec in rules}
    for seed in range(first_seed, first_seed + seeds):
        batch = simulate(np.random.default_rng(seed), sigma, scenario, n_tasks, cap, regress_prob)
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


@dataclass(frozen=True)
class Handover:
    """What one rule hands over, mean over seeds: the true quality (and the
    share of it at or over the bar) of the last attempt against the best so
    far, and the steps with and without the regression guard."""

    last_quality: float  # no guard, the last attempt handed over (the old runner)
    best_quality: float  # no guard, a cut-off loop hands over its best attempt
    guard_quality: float  # guard on, a cut-off loop hands over its best attempt
    last_reach_pct: float
    best_reach_pct: float
    guard_reach_pct: float
    mean_steps: float  # without the guard
    guard_mean_steps: float
    steps_saved: float
    guard_fired_pct: float  # loops the guard stopped


def _handover_one(rule: VectorStopRule, batch: Batch, guard: RegressionGuard, bar: float) -> dict[str, float]:
    """The runner's choice, vectorised: a loop the rule stops converged and
    hands over its last attempt; a loop cut off at the cap or by the guard
    hands over its best attempt by the rule's own estimate, ties to the later."""
    rows = np.arange(batch.scores.shape[0])
    fired = rule.stop_matrix(batch.scores)
    best = best_so_far_matrix(estimate_matrix(rule, batch.scores))
    guarded = guard.fire_matrix(batch.scores)

    def stop(signal: np.ndarray) -> np.ndarray:
        signal = signal.copy()
        signal[:, -1] = True
        return signal.argmax(axis=1)

    plain = stop(fired)
    with_guard = stop(fired | guarded)
    converged = fired[rows, plain]
    converged_g = fired[rows, with_guard]
    last_q = batch.quality[rows, plain]
    best_q = np.where(converged, last_q, batch.quality[rows, best[rows, plain]])
    guard_q = np.where(converged_g, batch.quality[rows, with_guard], batch.quality[rows, best[rows, with_guard]])
    return {
        "last_quality": float(last_q.mean()),
        "best_quality": float(best_q.mean()),
        "guard_quality": float(guard_q.mean()),
        "last_reach_pct": float(100 * (last_q >= bar).mean()),
        "best_reach_pct": float(100 * (best_q >= bar).mean()),
        "guard_reach_pct": float(100 * (guard_q >= bar).mean()),
        "mean_steps": float((plain + 1).mean()),
        "guard_mean_steps": float((with_guard + 1).mean()),
        "guard_fired_pct": float(100 * (guarded[rows, with_guard] & ~converged_g).mean()),
    }


def run_handover(
    sigma: float,
    seeds: int = SEEDS,
    scenario: str = "regressions",
    rules: Sequence[str] = RULES,
    n_tasks: int = TASKS,
    regress_prob: float = REGRESSION_P,
    guard: RegressionGuard | None = None,
    first_seed: int = 0,
) -> dict[str, Handover]:
    """Last vs best so far, and the guard's saving, over the run_bench batches."""
    guard = guard or RegressionGuard(DEFAULT_REGRESSION_MARGIN, DEFAULT_REGRESSION_K)
    built = {spec: make_stop_rule(spec) for spec in rules}
    per_seed: dict[str, list[dict[str, float]]] = {spec: [] for spec in rules}
    for seed in range(first_seed, first_seed + seeds):
        batch = simulate(np.random.default_rng(seed), sigma, scenario, n_tasks, CAP, regress_prob)
        for spec, rule in built.items():
            per_seed[spec].append(_handover_one(rule, batch, guard, DEFAULT_BAR))
    out: dict[str, Handover] = {}
    for spec, rule in built.items():
        mean = {key: float(np.mean([row[key] for row in per_seed[spec]])) for key in per_seed[spec][0]}
        out[rule.name] = Handover(
            last_quality=round(mean["last_quality"], 4),
            best_quality=round(mean["best_quality"], 4),
            guard_quality=round(mean["guard_quality"], 4),
            last_reach_pct=round(mean["last_reach_pct"], 2),
            best_reach_pct=round(mean["best_reach_pct"], 2),
            guard_reach_pct=round(mean["guard_reach_pct"], 2),
            mean_steps=round(mean["mean_steps"], 3),
            guard_mean_steps=round(mean["guard_mean_steps"], 3),
            steps_saved=round(mean["mean_steps"] - mean["guard_mean_steps"], 3),
            guard_fired_pct=round(mean["guard_fired_pct"], 2),
        )
    return out


def format_handover(title: str, handover: dict[str, Handover]) -> str:
    lines = [
        title,
        (
            f"  {'rule':<10} {'true quality: last':>18} {'best':>6} {'guard':>6}   {'reach %: last':>13} {'best':>6}"
            f" {'guard':>6}   {'steps':>5} {'guard':>6} {'saved':>6}   guard fired"
        ),
    ]
    for name, h in handover.items():
        lines.append(
            f"  {name:<10} {h.last_quality:>18.3f} {h.best_quality:>6.3f} {h.guard_quality:>6.3f}"
            f"   {h.last_reach_pct:>13.1f} {h.best_reach_pct:>6.1f} {h.guard_reach_pct:>6.1f}"
            f"   {h.mean_steps:>5.2f} {h.guard_mean_steps:>6.2f} {h.steps_saved:>6.2f}   {h.guard_fired_pct:>5.1f} %"
        )
    return "\n".join(lines)


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
    parser.add_argument(
        "--regress-prob",
        type=float,
        metavar="P",
        help="non-monotone curves: the regressions scenario with a regression step of probability P,"
        " plus last-vs-best handover and the regression guard's saving",
    )
    parser.add_argument("--regression-margin", type=float, default=DEFAULT_REGRESSION_MARGIN)
    parser.add_argument("--regression-after", type=int, default=DEFAULT_REGRESSION_K)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--plot", metavar="FILE.png")
    return parser


def main(argv: list[str]) -> int:
    """Entry point; ``argv`` starts with the bench name, ``"stop-rules"``."""
    if not argv or argv[0] != "stop-rules":
        print("usage: python -m loops bench stop-rules [options]", file=sys.stderr)
        return 2
    args = _parser().parse_args(argv[1:])
    rules = [r for r in args.rules.split(",") if r]
    guard = _checked_guard(args, rules)
    if guard is None:
        return 2
    if args.regress_prob is not None:
        return _regress_main(args, rules, guard)
    return _sweep_main(args, rules)


def _checked_guard(args: argparse.Namespace, rules: list[str]) -> RegressionGuard | None:
    """The regression guard the options ask for, or None once it has printed
    why the options are refused."""
    if args.seeds < 1 or args.tasks < 3:
        print("need --seeds >= 1 and --tasks >= 3", file=sys.stderr)
        return None
    try:
        [make_stop_rule(r) for r in rules]
        guard = RegressionGuard(args.regression_margin, args.regression_after)
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return None
    if args.regress_prob is not None:
        if not 0 <= args.regress_prob <= 1:
            print("--regress-prob must be in [0, 1]", file=sys.stderr)
            return None
        if args.scenario not in (None, "regressions"):
            print("--regress-prob sets the regressions scenario; drop --scenario", file=sys.stderr)
            return None
    return guard


def _sweep_main(args: argparse.Namespace, rules: list[str]) -> int:
    """The sigma sweep (or one sigma), plus the stress scenarios when asked
    for or when nothing narrows the run."""
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
    if args.json:
        print(json.dumps(_sweep_payload(args, main_scenario, sweep, extra), indent=2))
        return 0
    header = f"{args.seeds} seeds x {args.tasks} tasks, cap {CAP}, bar {DEFAULT_BAR:.2f}; mean ± sd over seeds"
    print(header)
    for sigma, summary in sweep.items():
        print(format_table(f"\nscenario {main_scenario}, σ = {sigma:g}", summary))
    for name, summary in extra.items():
        print(format_table(f"\nscenario {name}, σ = {stress_sigma:g}", summary))
    return 0


def _sweep_payload(
    args: argparse.Namespace,
    main_scenario: str,
    sweep: dict[float, dict[str, RuleSummary]],
    extra: dict[str, dict[str, RuleSummary]],
) -> dict[str, object]:
    """The ``--json`` report of a sweep: flat for one sigma alone, nested otherwise."""

    def as_json(summary: dict[str, RuleSummary]) -> dict[str, object]:
        return {name: asdict(s) for name, s in summary.items()}

    if args.sigma is not None and not extra:
        return {
            "sigma": args.sigma,
            "scenario": main_scenario,
            "seeds": args.seeds,
            "tasks": args.tasks,
            "cap": CAP,
            "rules": as_json(sweep[args.sigma]),
        }
    payload: dict[str, object] = {
        "seeds": args.seeds,
        "tasks": args.tasks,
        "cap": CAP,
        "sweep": {f"{s:g}": {"rules": as_json(r)} for s, r in sweep.items()},
        "scenarios": {name: {"rules": as_json(r)} for name, r in extra.items()},
    }
    if args.sigma is not None:
        payload["rules"] = as_json(sweep[args.sigma])
    return payload


def _regress_main(args: argparse.Namespace, rules: list[str], guard: RegressionGuard) -> int:
    """``--regress-prob P``: the contract's ``rules`` for the regressions
    scenario at that P, plus what is handed over and the guard's saving."""
    sigmas = (args.sigma,) if args.sigma is not None else SIGMAS
    prob = args.regress_prob
    table = {s: run_bench(s, args.seeds, "regressions", rules, args.tasks, regress_prob=prob) for s in sigmas}
    handover = {
        s: run_handover(s, args.seeds, "regressions", rules, args.tasks, regress_prob=prob, guard=guard) for s in sigmas
    }
    guard_json = {"margin": guard.margin, "k": guard.k}
    if args.json:
        payload: dict[str, object] = {
            "scenario": "regressions",
            "regress_prob": prob,
            "seeds": args.seeds,
            "tasks": args.tasks,
            "cap": CAP,
            "guard": guard_json,
        }
        if args.sigma is not None:
            payload["sigma"] = args.sigma
            payload["rules"] = {name: asdict(v) for name, v in table[args.sigma].items()}
            payload["handover"] = {name: asdict(v) for name, v in handover[args.sigma].items()}
        else:
            payload["sweep"] = {
                f"{s:g}": {
                    "rules": {name: asdict(v) for name, v in table[s].items()},
                    "handover": {name: asdict(v) for name, v in handover[s].items()},
                }
                for s in sigmas
            }
        print(json.dumps(payload, indent=2))
        return 0
    print(
        f"{args.seeds} seeds x {args.tasks} tasks, cap {CAP}, bar {DEFAULT_BAR:.2f}, regression step p = {prob:g},"
        f" guard margin {guard.margin:g} for {guard.k} in a row"
    )
    for sigma in sigmas:
        print(format_table(f"\nscenario regressions, σ = {sigma:g}", table[sigma]))
        print(format_handover(f"\nhanded over, σ = {sigma:g} (mean true quality)", handover[sigma]))
    return 0
