"""The loop runner: attempt, check, hint, repeat, until a stop guard fires.

Stop guards, first to fire wins (DESIGN.md rule 6): red line passed
(converged), step limit, stuck, oscillation, wall clock, token budget. The
agent's own opinion of its answer is never consulted.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from loops.agents import Agent, AgentError, AgentReply
from loops.cutoff import CUTOFF_REASONS, strip_thinking
from loops.gates import run_gates
from loops.hints import Failure, Redactor, build_prompt
from loops.redline import DEFAULT_TIMEOUT_S, demand_red_line, format_problem
from loops.tasks import Task, TaskKind

STOP_REASONS: tuple[str, ...] = ("converged", *CUTOFF_REASONS)
DEFAULT_STOP_RULE = "confirm2"


@dataclass(frozen=True)
class LoopConfig:
    step_limit: int = 5
    draft: bool = False  # one attempt, no fix loop (queue above its high watermark)
    stuck_after: int = 3
    oscillation_window: int = 6
    wall_clock_s: float = 120.0
    token_budget: int = 50_000
    gates: tuple[str, ...] = ()  # enabled filter-rule gates, run as a format pre-gate
    redline_timeout_s: float = DEFAULT_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.step_limit < 1:
            raise ValueError("step_limit must be at least 1")
        if self.stuck_after < 2:
            raise ValueError("stuck_after must be at least 2")
        object.__setattr__(self, "gates", tuple(self.gates))


@dataclass(frozen=True)
class StepRecord:
    """One attempt, for progress display; carries no output and no check text."""

    task_id: str
    attempt: int
    step_limit: int
    passed: bool
    failure_class: str  # "" when the attempt did not fail
    signature: str  # ErrorClass:check_id, "" when the attempt did not fail
    tokens: int  # cumulative
    elapsed_s: float
    score: float | None = None


@dataclass(frozen=True)
class LoopResult:
    task_id: str
    converged: bool
    stop_reason: str
    attempts: int
    tokens: int
    final_output: str  # thinking stripped
    last_error: str  # assertion-safe, may be ""
    failure_classes: tuple[str, ...] = ()  # one per failed attempt
    draft: bool = False
    scores: tuple[float, ...] = ()

    @property
    def unverified(self) -> bool:
        return not self.converged

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["failure_classes"] = list(self.failure_classes)
        out["scores"] = list(self.scores)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoopResult:
        fields = dict(data)
        fields["failure_classes"] = tuple(fields.get("failure_classes", ()))
        fields["scores"] = tuple(fields.get("scores", ()))
        return cls(**fields)


@dataclass
class _Attempt:
    passed: bool
    failure: Failure | None = None
    signature: str = ""  # guards look at these; "" = nothing to compare
    score: float | None = None
    format_failed: bool = False


@dataclass
class _Trace:
    failures: list[Failure] = field(default_factory=list)
    signatures: list[str] = field(default_factory=list)  # one per attempt, "" if none
    classes: list[str] = field(default_factory=list)  # one per attempt, "" if none
    scores: list[float] = field(default_factory=list)


def is_stuck(signatures: Sequence[str], n: int) -> bool:
    """The same failure signature ``n`` attempts in a row."""
    recent = signatures[-n:]
    return len(recent) == n and recent[0] != "" and len(set(recent)) == 1


def is_oscillating(classes: Sequence[str], window: int) -> bool:
    """Within the last ``window`` attempts, failures alternate between two
    classes A->B->A->B. Matched by class, not text, so NameError then a wrong
    answer then NameError again counts."""
    recent = list(classes[-window:])
    if len(recent) < 4:
        return False
    a, b, c, d = recent[-4:]
    return "" not in (a, b) and a != b and a == c and b == d


def _evaluate(task: Task, output: str, reply: AgentReply, config: LoopConfig, attempt: int, trace: _Trace) -> _Attempt:
    problem = format_problem(task, output)
    if problem is None and task.kind is TaskKind.OPEN and not output:
        problem = "empty answer"
    if problem is not None:
        failure = Failure(attempt, "FormatError", ("format",), (problem,))
        return _Attempt(False, failure, "FormatError:format", format_failed=True)
    reasons = run_gates(output, config.gates)
    if reasons:
        names = tuple(r.split(":", 1)[0] for r in reasons)
        failure = Failure(attempt, "GateFailed", names, tuple(reasons))
        return _Attempt(False, failure, f"GateFailed:{names[0]}")
    if task.scored:
        if reply.score is None:
            return _Attempt(False, Failure(attempt, "NoScore"), "NoScore:score")
        trace.scores.append(reply.score)
        rule = importlib.import_module("loops.stop_rules").make_stop_rule(task.stop_rule or DEFAULT_STOP_RULE)
        if rule.should_stop(list(trace.scores)):
            return _Attempt(True, score=reply.score)
        # A noisy score below the rule is not a failure signature: repeating
        # or alternating scores say nothing about being stuck.
        return _Attempt(False, Failure(attempt, "ScoreNotConfirmed"), score=reply.score)
    if task.kind is TaskKind.OPEN:
        return _Attempt(False)
    verdict = demand_red_line(task, output, timeout_s=config.redline_timeout_s)
    if verdict.passed:
        return _Attempt(True)
    failure = Failure(
        attempt,
        verdict.failure_class,
        verdict.failed_checks,
        verdict.messages,
        verdict.log_tail,
    )
    return _Attempt(False, failure, verdict.signature)


def _last_error(failure: Failure | None, redactor: Redactor) -> str:
    if failure is None:
        return ""
    where = f" at {', '.join(failure.failed_checks)}" if failure.failed_checks else ""
    head = redactor.redact(f"{failure.failure_class}{where} (attempt {failure.attempt})")
    detail = [redactor.redact(m) for m in dict.fromkeys(failure.messages)]
    return "; ".join([head, *detail])


def run_task(
    task: Task,
    agent: Agent,
    config: LoopConfig,
    *,
    on_step: Callable[[StepRecord], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> LoopResult:
    """Run one loop to its stop. Safe to repeat: it holds no state between
    calls, though the agent may (a replay advances)."""
    step_limit = 1 if config.draft else (task.step_limit or config.step_limit)
    redactor = Redactor.for_secrets(task.secrets())
    trace = _Trace()
    started = clock()
    tokens = 0
    output = ""
    last_failure: Failure | None = None
    attempt = 0
    reason = "step_limit"
    converged = False
    while True:
        attempt += 1
        prompt = build_prompt(
            task.description,
            trace.failures,
            redactor,
            step_limit=step_limit,
            open_task=task.kind is TaskKind.OPEN,
        )
        try:
            reply = agent.attempt(prompt)
        except AgentError as exc:
            reply = AgentReply(text="", tokens=0)
            result = _Attempt(False, Failure(attempt, "AgentError", (), (str(exc),)), "AgentError:agent")
        else:
            output = strip_thinking(reply.text)
            result = _evaluate(task, output, reply, config, attempt, trace)
        tokens += reply.tokens
        # The reviewer sees the final attempt's error, not a stale earlier one.
        last_failure = result.failure
        if result.failure is not None:
            trace.failures.append(result.failure)
        trace.signatures.append(result.signature)
        trace.classes.append(result.failure.failure_class if result.signature and result.failure else "")
        if on_step is not None:
            on_step(
                StepRecord(
                    task_id=task.id,
                    attempt=attempt,
                    step_limit=step_limit,
                    passed=result.passed,
                    failure_class=result.failure.failure_class if result.failure else "",
                    signature=result.signature,
                    tokens=tokens,
                    elapsed_s=clock() - started,
                    score=result.score,
                )
            )
        if result.passed:
            converged, reason = True, "converged"
            break
        if config.draft:
            reason = "draft"
            break
        if attempt >= step_limit:
            reason = "format_anomaly" if result.format_failed else "step_limit"
            break
        if is_stuck(trace.signatures, config.stuck_after):
            reason = "stuck"
            break
        if is_oscillating(trace.classes, config.oscillation_window):
            reason = "oscillation"
            break
        if clock() - started >= config.wall_clock_s:
            reason = "wall_clock"
            break
        if tokens >= config.token_budget:
            reason = "token_budget"
            break
    return LoopResult(
        task_id=task.id,
        converged=converged,
        stop_reason=reason,
        attempts=attempt,
        tokens=tokens,
        final_output=output,
        last_error="" if converged else _last_error(last_failure, redactor),
        failure_classes=tuple(f.failure_class for f in trace.failures),
        draft=config.draft,
        scores=tuple(trace.scores),
    )
