"""``python -m simulation run --preset B [--json]``: the capacity model from a shell."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

from reviewqueue.policy import PolicyError, check_slug
from simulation.analytic import article_loss, mmck_transient_loss
from simulation.multi import (
    MultiScenario,
    QueueSpec,
    format_queues,
    format_what_if,
    run_multi_replications,
    what_if_added,
)
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
        help=f"chance of a gold copy beside each admitted item (default {NOISE_AWARE_GOLD_RATE:g} "
        "with --tuner noise_aware, else 0)",
    )
    run.add_argument("--sla-minutes", type=float, default=None, help="target minutes to verdict: adds sla_attainment")
    run.add_argument("--age-high-minutes", type=float, default=None, help="age watermark: draft mode above this")
    run.add_argument("--age-low-minutes", type=float, default=None, help="age watermark: normal again below this")
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
    check = sub.add_parser(
        "forecast-check", help="how often the forecast of the time to the high watermark is within 25 %% of the model's"
    )
    check.add_argument("--replications", type=int, default=200)
    check.add_argument("--seed", type=int, default=0)
    check.add_argument("--model", choices=("article", "poisson"), default="article")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    add_queues_parser(sub)
    return parser


def add_queues_parser(sub: Any) -> None:
    """The ``queues`` command: several queues, one reviewer pool."""
    queues = sub.add_parser(
        "queues",
        help="several queues served by one reviewer pool; --add asks what a new queue does to the others",
    )
    queues.add_argument(
        "--queue",
        type=queue_spec_arg,
        action="append",
        required=True,
        metavar="NAME:RATE:CAPACITY",
        help="a queue: its slug, its production per minute and its capacity (repeat for each queue)",
    )
    queues.add_argument(
        "--add",
        type=queue_spec_arg,
        default=None,
        metavar="NAME:RATE:CAPACITY",
        help="run again with this queue added, on the same seeds, and compare the others",
    )
    queues.add_argument("--review-per-min", type=float, required=True, help="the whole pool's review rate")
    queues.add_argument("--reviewers", type=int, default=1, help="people in the pool (default 1)")
    queues.add_argument("--model", choices=("article", "poisson"), default="poisson")
    queues.add_argument("--backpressure", choices=("on", "off"), default="on", help="for every queue (default on)")
    queues.add_argument("--duration", type=int, default=120, help="minutes (default 120)")
    queues.add_argument("--replications", type=int, default=20, help="runs per scenario (default 20)")
    queues.add_argument("--seed", type=int, default=0)
    queues.add_argument("--json", action="store_true", help="print one JSON object")
    # Errors found after parsing (a slug given twice) are reported in this command's usage.
    queues.set_defaults(command_parser=queues)


def queue_spec_arg(value: str) -> QueueSpec:
    """``name:rate:capacity`` as a queue; an argparse error naming ``value`` otherwise."""
    parts = value.split(":")
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"{value!r}: expected NAME:RATE:CAPACITY, e.g. support:2.5:50")
    name, rate_text, capacity_text = parts
    try:
        check_slug(name)
    except PolicyError as exc:
        raise argparse.ArgumentTypeError(f"{value!r}: {exc}") from None
    try:
        rate = float(rate_text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: rate {rate_text!r} is not a number") from None
    if not math.isfinite(rate) or rate < 0:
        raise argparse.ArgumentTypeError(f"{value!r}: rate must be a finite number >= 0")
    try:
        capacity = int(capacity_text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: capacity {capacity_text!r} is not a whole number") from None
    if capacity < 1:
        raise argparse.ArgumentTypeError(f"{value!r}: capacity must be at least 1")
    return QueueSpec(slug=name, production_per_min=rate, capacity=capacity)


def queues_main(args: argparse.Namespace) -> int:
    parser = args.command_parser
    backpressure = args.backpressure == "on"
    specs = tuple(dataclasses.replace(q, backpressure=backpressure) for q in args.queue)
    slugs = [q.slug for q in specs]
    for slug in slugs:
        if slugs.count(slug) > 1:
            parser.error(f"argument --queue: {slug!r} is given more than once")
    if args.add is not None and args.add.slug in slugs:
        parser.error(f"argument --add: {args.add.slug!r} is already one of the queues")
    try:
        ms = MultiScenario(
            specs,
            review_per_min=args.review_per_min,
            reviewers=args.reviewers,
            duration_min=args.duration,
            model=args.model,
        )
        if args.replications < 1:
            raise ValueError("replications: must be at least 1")
        if args.add is None:
            out = run_multi_replications(ms, args.replications, args.seed).to_dict()
            text = format_queues(out)
        else:
            added = dataclasses.replace(args.add, backpressure=backpressure)
            out = what_if_added(ms, added, args.replications, args.seed)
            text = format_what_if(out)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(out) if args.json else text)
    return 0


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


def forecast_check_main(args: argparse.Namespace) -> int:
    from simulation.forecast_check import forecast_check

    try:
        out = forecast_check(args.replications, args.seed, args.model)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(out))
    else:
        print(
            f"forecast of the time to the high watermark within 25 % of the {out['model']} model in "
            f"{out['within_25pct']:.0%} of {out['replications']} runs (ratios {RATIO_TEXT}); "
            f"median error {out['median_abs_error']:.0%}"
        )
    return 0


RATIO_TEXT = "1.2-3"


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
    for name in ("sla_minutes", "age_high_minutes", "age_low_minutes"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
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
        *(
            [("within SLA", f"{d['sla_attainment']:.1%} of {d['sla_minutes']:g} min")]
            if d.get("sla_attainment") is not None
            else []
        ),
        ("max depth", f"{d['max_depth']:.1f}"),
        ("time in draft (min)", f"{d['time_in_draft_min']:.1f}"),
        ("step limit at end", f"{d['step_limit_final']:.2f}"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "queues":
        return queues_main(args)
    if args.command == "demo-load":
        return demo_load_main(args)
    if args.command == "forecast-check":
        return forecast_check_main(args)
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
