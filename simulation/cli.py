"""``python -m simulation run --preset B [--json]``: the capacity model from a shell."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from simulation.analytic import article_loss, mmck_transient_loss
from simulation.replicate import run_replications
from simulation.scenario import PRESETS, TUNERS, Scenario

# Fewer runs than this finish before a progress bar would be worth drawing.
PROGRESS_MIN_REPLICATIONS = 50

# What double review and gold cost the noise-aware tuner by default, together
# within a tenth of the reviews (simulation/README.md, "Noisy reviewers").
NOISE_AWARE_DOUBLE_REVIEW_RATE = 0.05
NOISE_AWARE_GOLD_RATE = 0.04


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m simulation", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="simulate a preset")
    run.add_argument("--preset", choices=sorted(PRESETS), required=True)
    run.add_argument("--model", choices=("article", "poisson"), default=None)
    run.add_argument("--backpressure", choices=("on", "off"), default=None)
    run.add_argument("--verdict-model", choices=("article", "step_aware"), default=None)
    run.add_argument("--reviewers", type=int, default=None)
    run.add_argument("--duration", type=int, default=None, help="minutes (default 120)")
    run.add_argument("--reviewer-error", type=float, default=None, help="chance a reviewer flips a verdict (default 0)")
    run.add_argument("--tuner", choices=TUNERS, default=None, help="step-limit tuner (default plain)")
    run.add_argument(
        "--double-review-rate",
        type=float,
        default=None,
        help=f"share of items a second reviewer sees (default {NOISE_AWARE_DOUBLE_REVIEW_RATE:g} with --tuner noise_aware, else 0)",
    )
    run.add_argument(
        "--gold-rate",
        type=float,
        default=None,
        help=f"gold items per reviewed item (default {NOISE_AWARE_GOLD_RATE:g} with --tuner noise_aware, else 0)",
    )
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--replications", type=int, default=1)
    run.add_argument("--workers", type=int, default=None, help="processes (default: auto)")
    run.add_argument("--json", action="store_true", help="print one JSON object")
    run.add_argument("--plot", metavar="FILE.png", default=None)
    demo = sub.add_parser("demo-load", help="does the demo's wave of load let one reviewer see draft mode come and go?")
    demo.add_argument("--review-per-min", type=float, default=None, help="the reviewer's pace (default 2)")
    demo.add_argument("--round-seconds", type=float, default=None, help="DEMO_ROUND_SECONDS")
    demo.add_argument("--busy-minutes", type=float, default=None, help="DEMO_BUSY_MINUTES")
    demo.add_argument("--quiet-minutes", type=float, default=None, help="DEMO_QUIET_MINUTES")
    demo.add_argument("--batch", type=int, default=None, help="DEMO_BATCH")
    demo.add_argument("--seeds", type=int, default=200)
    demo.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def demo_load_main(args: argparse.Namespace) -> int:
    from simulation.demo_load import DemoLoad, judge

    names = ("review_per_min", "round_seconds", "busy_minutes", "quiet_minutes", "batch")
    changes = {name: getattr(args, name) for name in names if getattr(args, name) is not None}
    load = dataclasses.replace(DemoLoad(), **changes)
    verdict = judge(load, seeds=args.seeds)
    if args.json:
        print(json.dumps({"load": dataclasses.asdict(load), **verdict.to_dict()}))
        return 0

    def minutes(value: float | None) -> str:
        return "never" if value is None else f"{value:.1f} min"

    print(
        f"a round every {load.round_seconds:g} s for {load.busy_minutes:g} min, then {load.quiet_minutes:g} min quiet; "
        f"one reviewer at {load.review_per_min:g}/min\n"
        f"ratio production/review: {verdict.busy_ratio:.2f} while busy, {verdict.wave_ratio:.2f} over the wave\n"
        f"draft mode arrives in {verdict.draft_share:.0%} of {verdict.seeds} waves "
        f"(median {minutes(verdict.draft_at_median)}), recedes in {verdict.recovered_share:.0%} "
        f"(median {minutes(verdict.normal_again_at_median)}); nothing lost in {verdict.lossless_share:.0%}; "
        f"median peak depth {verdict.max_depth_median:g} of {load.capacity}"
    )
    return 0


def scenario_from_args(args: argparse.Namespace) -> Scenario:
    changes: dict[str, Any] = {}
    if args.model is not None:
        changes["model"] = args.model
    if args.backpressure is not None:
        changes["backpressure"] = args.backpressure == "on"
    if args.verdict_model is not None:
        changes["verdict_model"] = args.verdict_model
    if args.reviewers is not None:
        changes["reviewers"] = args.reviewers
    if args.duration is not None:
        changes["duration_min"] = args.duration
    changes.update(noise_changes(args))
    return dataclasses.replace(PRESETS[args.preset], **changes)


def noise_changes(args: argparse.Namespace) -> dict[str, Any]:
    """The noisy-reviewer fields the flags set. The noise-aware tuner needs
    double review and gold to measure its reviewers, so it brings the queue
    policy's default rates unless told otherwise; the plain tuner has no use
    for them and brings none."""
    changes: dict[str, Any] = {}
    if args.reviewer_error is not None:
        changes["reviewer_error"] = args.reviewer_error
    if args.tuner is not None:
        changes["tuner_rule"] = args.tuner
    aware = args.tuner == "noise_aware"
    double = args.double_review_rate
    gold = args.gold_rate
    if double is not None or aware:
        changes["double_review_rate"] = NOISE_AWARE_DOUBLE_REVIEW_RATE if double is None else double
    if gold is not None or aware:
        changes["gold_rate"] = NOISE_AWARE_GOLD_RATE if gold is None else gold
    return changes


def _progress_bar(total: int) -> tuple[Callable[[int, int], None] | None, Callable[[], None]]:
    if total < PROGRESS_MIN_REPLICATIONS:
        return None, lambda: None
    from tqdm import tqdm

    # disable=None hides the bar when stderr is not a terminal (pipes, CI logs).
    bar = tqdm(total=total, unit="run", file=sys.stderr, disable=None)

    def update(done: int, _total: int) -> None:
        bar.update(done - bar.n)

    return update, bar.close


def exact_overflow(sc: Scenario) -> float | None:
    """The exact expected overflow % where the model has one (backpressure off)."""
    if sc.backpressure:
        return None
    try:
        loss = article_loss(sc) if sc.model == "article" else mmck_transient_loss(sc)
    except ValueError:
        return None
    return loss.overflow_pct


def format_table(d: dict[str, Any]) -> str:
    sc = d["scenario"]

    def ci(key: str) -> str:
        pair = d.get(key)
        return f" (95 % CI {pair[0]:.2f}-{pair[1]:.2f})" if pair else ""

    rows = [
        ("model", f"{sc['model']}, verdicts {sc['verdict_model']}"),
        ("backpressure", "on" if sc["backpressure"] else "off"),
        ("production / review", f"{sc['production_per_min']:g} / {sc['review_per_min']:g} per min"),
        ("replications (seed)", f"{d['replications']} ({d['seed']})"),
        ("arrived", f"{d['arrived']:.1f}"),
        ("dropped or shed", f"{d['dropped']:.1f}"),
        ("overflow %", f"{d['overflow_pct']:.2f}{ci('overflow_pct_ci95')}"),
    ]
    if d.get("overflow_pct_exact") is not None:
        rows.append(("exact expectation %", f"{d['overflow_pct_exact']:.2f}"))
    shed = ", ".join(f"p{k}: {v:.1f}" for k, v in d["shed_by_priority"].items())
    rows += [
        ("lost by priority", shed),
        ("reviewed", f"{d['reviewed']:.1f}"),
        ("mean wait (min)", f"{d['mean_wait_min']:.2f}{ci('mean_wait_min_ci95')}"),
        ("p95 wait (min)", f"{d['p95_wait_min']:.2f}"),
        ("max depth", f"{d['max_depth']:.1f}"),
        ("time in draft (min)", f"{d['time_in_draft_min']:.1f}"),
        ("step limit at end", f"{d['step_limit_final']:.2f}"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo-load":
        return demo_load_main(args)
    try:
        sc = scenario_from_args(args)
        if args.replications < 1:
            raise ValueError("replications: must be at least 1")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    progress, close = _progress_bar(args.replications)
    try:
        summary = run_replications(sc, args.replications, args.seed, progress, args.workers)
    finally:
        close()
    out = summary.to_dict()
    out["overflow_pct_exact"] = exact_overflow(sc)
    if args.plot:
        from simulation.plot import plot_depth

        plot_depth(summary, args.plot)
    if args.json:
        print(json.dumps(out))
    else:
        print(format_table(out))
        if args.plot:
            print(f"plot written to {args.plot}")
    return 0
