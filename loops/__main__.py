"""``python -m loops``: run a task file, run the built-in suite, or the bench.

python -m loops run TASKFILE --agent scripted|openai|command [--task ID]
python -m loops suite [--json]
python -m loops bench stop-rules --sigma 0.1 --json
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from loops.agents import AgentError, make_agent
from loops.runner import LoopConfig, LoopResult, StepRecord, run_task
from loops.sandbox import SandboxUnavailable
from loops.spec import Task, TaskError, builtin_suite, load_tasks


def _config(args: argparse.Namespace) -> LoopConfig:
    gates = tuple(g for g in (args.gates or "").split(",") if g)
    return LoopConfig(
        step_limit=args.step_limit,
        draft=args.draft,
        wall_clock_s=args.wall_clock,
        token_budget=args.token_budget,
        gates=gates,
        regression_margin=args.regression_margin,
        regression_after=args.regression_after,
    )


def _agent_options(args: argparse.Namespace) -> dict[str, Any]:
    if args.agent == "command":
        return {"command": args.command} if args.command else {}
    return {}


def _print_step(out: TextIO) -> Any:
    def show(step: StepRecord) -> None:
        bar = "#" * step.attempt + "." * max(0, step.step_limit - step.attempt)
        status = "pass" if step.passed else (step.signature or step.failure_class or "no red line")
        score = f"  score {step.score:.2f}" if step.score is not None else ""
        if step.checks_passed is not None:
            score += f"  checks passed {step.checks_passed}"
        out.write(
            f"  {step.task_id:<14} [{bar}] step {step.attempt}/{step.step_limit}  "
            f"{status:<28} tokens {step.tokens:>6}{score}\n"
        )
        out.flush()

    return show


def _print_result(result: LoopResult, out: TextIO) -> None:
    verdict = "converged" if result.converged else f"UNVERIFIED, cut off: {result.stop_reason}"
    out.write(f"  -> {result.task_id}: {verdict} after {result.attempts} attempt(s)\n")
    if not result.converged and result.reviewed_attempt and result.reviewed_attempt != result.attempts:
        grade = ""
        if result.reviewed_checks_passed is not None:
            grade = f": {result.reviewed_checks_passed} of {result.checks_total} checks"
        elif result.reviewed_estimate is not None:
            grade = f": estimated quality {result.reviewed_estimate:.2f}"
        out.write(f"     handed over: attempt {result.reviewed_attempt}, the best{grade}\n")
    if result.last_error:
        out.write(f"     last error: {result.last_error}\n")


def _run_tasks(tasks: Sequence[Task], args: argparse.Namespace, out: TextIO) -> list[LoopResult]:
    config = _config(args)  # ValueError on a bad guard setting, reported by main()
    results = []
    for task in tasks:
        agent = make_agent(args.agent, task=task, **_agent_options(args))
        on_step = None if args.json else _print_step(out)
        result = run_task(task, agent, config, on_step=on_step)
        if not args.json:
            _print_result(result, out)
        results.append(result)
    return results


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    tasks = load_tasks(args.taskfile)
    if args.task:
        tasks = [t for t in tasks if t.id in set(args.task)]
        if not tasks:
            raise TaskError(f"no task with id {', '.join(args.task)} in {args.taskfile}")
    results = _run_tasks(tasks, args, out)
    if args.json:
        out.write(json.dumps([r.to_dict() for r in results], indent=2) + "\n")
    return 0


@dataclass(frozen=True)
class GroupRow:
    group: str
    tasks: int
    converged: int
    mean_steps: float
    guards: dict[str, int]
    false_stops: int  # repairable tasks cut off although a fix existed
    best_earlier: int = 0  # cut-off loops that hand over an earlier attempt than the last


def suite_table(tasks: Sequence[Task], results: Sequence[LoopResult]) -> list[GroupRow]:
    rows = []
    groups = dict.fromkeys(t.group or str(t.kind) for t in tasks)
    for group in groups:
        pairs = [(t, r) for t, r in zip(tasks, results, strict=True) if (t.group or str(t.kind)) == group]
        rs = [r for _, r in pairs]
        rows.append(
            GroupRow(
                group=group,
                tasks=len(rs),
                converged=sum(r.converged for r in rs),
                mean_steps=sum(r.attempts for r in rs) / len(rs),
                guards=dict(Counter(r.stop_reason for r in rs)),
                false_stops=sum(not r.converged for r in rs) if group == "repairable" else 0,
                best_earlier=sum(not r.converged and r.reviewed_attempt < r.attempts for r in rs),
            )
        )
    return rows


def cmd_suite(args: argparse.Namespace, out: TextIO) -> int:
    tasks = builtin_suite()
    results = _run_tasks(tasks, args, out)
    rows = suite_table(tasks, results)
    if args.json:
        payload = {
            "groups": [row.__dict__ for row in rows],
            "tasks": [r.to_dict() for r in results],
        }
        out.write(json.dumps(payload, indent=2) + "\n")
        return 0
    out.write(
        f"\n{'class':<12} {'tasks':>5} {'converged':>9} {'mean steps':>10}  {'false stops':>11}"
        f"  {'best < last':>11}  guards fired\n"
    )
    for row in rows:
        guards = ", ".join(f"{k} x{v}" for k, v in sorted(row.guards.items()))
        out.write(
            f"{row.group:<12} {row.tasks:>5} {row.converged:>9} {row.mean_steps:>10.2f}  {row.false_stops:>11}"
            f"  {row.best_earlier:>11}  {guards}\n"
        )
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m loops", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command_name", required=True)

    def loop_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--agent", default="scripted", choices=("scripted", "openai", "command", "scored"))
        p.add_argument("--command", help="the external command for --agent command")
        p.add_argument("--step-limit", type=int, default=LoopConfig.step_limit)
        p.add_argument("--draft", action="store_true", help="one attempt, no fix loop")
        p.add_argument("--wall-clock", type=float, default=LoopConfig.wall_clock_s)
        p.add_argument("--token-budget", type=int, default=LoopConfig.token_budget)
        p.add_argument("--gates", help="comma-separated filter-rule gates to enable")
        p.add_argument(
            "--regression-margin",
            type=float,
            default=LoopConfig.regression_margin,
            help="the regression guard fires this far below the best grade so far (share of checks, or score)",
        )
        p.add_argument(
            "--regression-after",
            type=int,
            default=LoopConfig.regression_after,
            help="... for this many attempts in a row",
        )
        p.add_argument("--json", action="store_true", help="print results as JSON only")

    run = sub.add_parser("run", help="run the tasks of a YAML or JSON file")
    run.add_argument("taskfile")
    run.add_argument("--task", action="append", help="only this task id (repeatable)")
    loop_options(run)
    suite = sub.add_parser("suite", help="run the built-in suite and print its figures")
    loop_options(suite)
    sub.add_parser("bench", help="benchmarks, e.g. bench stop-rules --sigma 0.1 --json", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    if argv and argv[0] == "bench":
        # The bench owns its own arguments; imported lazily since it pulls numpy.
        return int(importlib.import_module("loops.bench").main(argv[1:]))
    args = _parser().parse_args(argv)
    try:
        if args.command_name == "run":
            return cmd_run(args, out)
        return cmd_suite(args, out)
    except (TaskError, AgentError, SandboxUnavailable, OSError, ValueError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
