"""The loop runner: attempt, check, hint, repeat, until a stop guard fires.

Stop guards, first to fire wins (ARCHITECTURE.md rule 6): red line passed
(converged), step limit, stuck, oscillation, regression, wall clock, token
budget. The agent's own opinion of its answer is never consulted.

Every attempt of a task with hidden checks is graded (how many checks it
passes) and every scored attempt keeps its score. A cut-off loop hands over
its best attempt, not its last: the grades, or for scored tasks the stop
rule's own estimate of quality, choose it, ties going to the later attempt.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from loops.cutoff import CUTOFF_REASONS, strip_thinking
from loops.gates import run_gates
from loops.hints import Failure, Redactor, Resume, build_prompt
from loops.redline import DEFAULT_TIMEOUT_S, demand_red_line, format_problem
from loops.reply import Agent, AgentError, AgentReply
from loops.result import FailingCheck, LoopResult
from loops.spec import Task, TaskKind
from loops.stop_rules import (
    DEFAULT_REGRESSION_K,
    DEFAULT_REGRESSION_MARGIN,
    RegressionGuard,
    best_attempt,
    make_stop_rule,
    quality_estimates,
)

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
    # The regression guard: stop once the grade (share of checks passed, or
    # the score) is this far below the best so far, this many attempts in a
    # row. Defaults measured in loops/STOP_RULES.md.
    regression_margin: float = DEFAULT_REGRESSION_MARGIN
    regression_after: int = DEFAULT_REGRESSION_K

    def __post_init__(self) -> None:
        if self.step_limit < 1:
            raise ValueError("step_limit must be at least 1")
        if self.stuck_after < 2:
            raise ValueError("stuck_after must be at least 2")
        # Raises ValueError on a margin outside (0, 1] or K below 1.
        RegressionGuard(self.regression_margin, self.regression_after)
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
    checks_passed: int | None = None  # None when the hidden checks did not run


@dataclass
class _Attempt:
    passed: bool
    failure: Failure | None = None
    signature: str = ""  # guards look at these; "" = nothing to compare
    score: float | None = None
    format_failed: bool = False
    failing: tuple[str, ...] | None = None  # failing check ids when the checks ran, else None


@dataclass
class _Trace:
    failures: list[Failure] = field(default_factory=list)
    signatures: list[str] = field(default_factory=list)  # one per attempt, "" if none
    classes: list[str] = field(default_factory=list)  # one per attempt, "" if none
    scores: list[float] = field(default_factory=list)
    score_attempts: list[int] = field(default_factory=list)  # 0-based attempt of each score
    # One entry per attempt from here on.
    outputs: list[str] = field(default_factory=list)
    attempt_failures: list[Failure | None] = field(default_factory=list)
    grades: list[int] = field(default_factory=list)  # checks passed; tasks with checks only
    failing: list[tuple[str, ...]] = field(default_factory=list)  # failing ids; tasks with checks only
    guard_grades: list[float] = field(default_factory=list)  # what the regression guard reads
    ever_passed: set[str] = field(default_factory=set)


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
        trace.score_attempts.append(attempt - 1)
        rule = make_stop_rule(task.stop_rule or DEFAULT_STOP_RULE)
        if rule.should_stop(list(trace.scores)):
            return _Attempt(True, score=reply.score)
        # A noisy score below the rule is not a failure signature: repeating
        # or alternating scores say nothing about being stuck.
        return _Attempt(False, Failure(attempt, "ScoreNotConfirmed"), score=reply.score)
    if task.kind is TaskKind.OPEN:
        return _Attempt(False)
    verdict = demand_red_line(task, output, timeout_s=config.redline_timeout_s)
    if verdict.passed:
        return _Attempt(True, failing=())
    # A run-level failure (a timeout, a candidate that dies at load) names no
    # check: every check fails.
    failing = tuple(verdict.failed_checks) or tuple(c.id for c in task.checks)
    failure = Failure(
        attempt,
        verdict.failure_class,
        verdict.failed_checks,
        verdict.messages,
        verdict.log_tail,
        checks_passed=len(task.checks) - len(set(failing)),
        checks_total=len(task.checks),
        regressed_checks=tuple(c.id for c in task.checks if c.id in failing and c.id in trace.ever_passed),
    )
    return _Attempt(False, failure, verdict.signature, failing=failing)


def _grade(task: Task, result: _Attempt, trace: _Trace) -> None:
    """Record the attempt's grade: checks passed (0 when they did not run),
    or its score; what the regression guard and the best-attempt choice read.
    An attempt with no answer (the agent failed) is no step backwards: the
    guard skips it, and it stays graded 0 so it is never the best."""
    answered = result.failure is None or result.failure.failure_class != "AgentError"
    if task.scored:
        if answered:
            trace.guard_grades.append(result.score if result.score is not None else 0.0)
        return
    if not task.checks:
        return
    total = len(task.checks)
    failing = result.failing if result.failing is not None else tuple(c.id for c in task.checks)
    passed = total - len(set(failing))
    trace.grades.append(passed)
    trace.failing.append(failing)
    if answered:
        trace.guard_grades.append(passed / total)
    if result.failing is not None:
        trace.ever_passed.update(c.id for c in task.checks if c.id not in failing)


def _reviewed(task: Task, trace: _Trace, converged: bool) -> tuple[int, float | None]:
    """The attempt to hand over (1-based) and, for scored tasks, its estimate."""
    last = len(trace.outputs)
    if converged or last == 0:
        return last, None
    if task.scored and trace.scores:
        # Attempts without a score (no answer) are never the best scored one.
        estimates = quality_estimates(make_stop_rule(task.stop_rule or DEFAULT_STOP_RULE), trace.scores)
        by_attempt = [float("-inf")] * last
        for index, estimate in zip(trace.score_attempts, estimates, strict=True):
            by_attempt[index] = estimate
        best = best_attempt(by_attempt)
        return best, by_attempt[best - 1]
    if trace.grades:
        return best_attempt(trace.grades), None
    return last, None


def _last_error(failure: Failure | None, redactor: Redactor) -> str:
    if failure is None:
        return ""
    where = f" at {', '.join(failure.failed_checks)}" if failure.failed_checks else ""
    head = redactor.redact(f"{failure.failure_class}{where} (attempt {failure.attempt})")
    detail = [redactor.redact(m) for m in dict.fromkeys(failure.messages)]
    return "; ".join([head, *detail])


@dataclass
class _Run:
    """The state of one loop while it runs: the attempt count, tokens spent,
    the last output and the trace the guards read."""

    task: Task
    config: LoopConfig
    clock: Callable[[], float]
    step_limit: int
    redactor: Redactor
    guard: RegressionGuard
    trace: _Trace
    started: float
    tokens: int = 0
    output: str = ""
    attempt: int = 0
    resume: Resume | None = None

    @classmethod
    def start(cls, task: Task, config: LoopConfig, clock: Callable[[], float], resume: Resume | None = None) -> _Run:
        """A fresh run; reads the clock once, as its start."""
        return cls(
            resume=resume,
            task=task,
            config=config,
            clock=clock,
            step_limit=1 if config.draft else (task.step_limit or config.step_limit),
            redactor=Redactor.for_secrets(task.secrets()),
            guard=RegressionGuard(config.regression_margin, config.regression_after),
            trace=_Trace(),
            started=clock(),
        )

    def attempt_once(self, agent: Agent) -> tuple[AgentReply, _Attempt]:
        """Prompt the agent once and evaluate its answer. An agent that fails
        leaves the last output in place and counts as an ``AgentError`` attempt."""
        self.attempt += 1
        task = self.task
        prompt = build_prompt(
            task.description,
            self.trace.failures,
            self.redactor,
            step_limit=self.step_limit,
            open_task=task.kind is TaskKind.OPEN,
            resume=self.resume,
        )
        try:
            reply = agent.attempt(prompt)
        except AgentError as exc:
            failure = Failure(self.attempt, "AgentError", (), (str(exc),))
            return AgentReply(text="", tokens=0), _Attempt(False, failure, "AgentError:agent")
        self.output = strip_thinking(reply.text)
        return reply, _evaluate(task, self.output, reply, self.config, self.attempt, self.trace)

    def record(self, reply: AgentReply, result: _Attempt) -> None:
        """Add the attempt to the trace and its tokens to the count."""
        trace = self.trace
        self.tokens += reply.tokens
        trace.outputs.append(self.output)
        trace.attempt_failures.append(result.failure)
        _grade(self.task, result, trace)
        if result.failure is not None:
            trace.failures.append(result.failure)
        trace.signatures.append(result.signature)
        trace.classes.append(result.failure.failure_class if result.signature and result.failure else "")

    def step_record(self, result: _Attempt) -> StepRecord:
        """The recorded attempt, for progress display; reads the clock."""
        trace = self.trace
        return StepRecord(
            task_id=self.task.id,
            attempt=self.attempt,
            step_limit=self.step_limit,
            passed=result.passed,
            failure_class=result.failure.failure_class if result.failure else "",
            signature=result.signature,
            tokens=self.tokens,
            elapsed_s=self.clock() - self.started,
            score=result.score,
            checks_passed=trace.grades[-1] if result.failing is not None else None,
        )

    def stop_reason(self, result: _Attempt) -> str | None:
        """The first stop guard to fire after this attempt (ARCHITECTURE.md
        rule 6), or None to go on. The order is the rule's; the clock is read
        only when every guard before the wall clock stayed quiet."""
        config, trace = self.config, self.trace
        if result.passed:
            return "converged"
        if config.draft:
            return "draft"
        if self.attempt >= self.step_limit:
            return "format_anomaly" if result.format_failed else "step_limit"
        if is_stuck(trace.signatures, config.stuck_after):
            return "stuck"
        if is_oscillating(trace.classes, config.oscillation_window):
            return "oscillation"
        if self.guard.fires(trace.guard_grades):
            return "regression"
        if self.clock() - self.started >= config.wall_clock_s:
            return "wall_clock"
        if self.tokens >= config.token_budget:
            return "token_budget"
        return None

    def result(self, reason: str) -> LoopResult:
        """The loop's result, handing over its best attempt (its last when it converged)."""
        task, trace = self.task, self.trace
        converged = reason == "converged"
        reviewed, estimate = _reviewed(task, trace, converged)
        failing = trace.failing[reviewed - 1] if trace.failing and not converged else ()
        about = {c.id: c.about or "" for c in task.checks}
        return LoopResult(
            task_id=task.id,
            converged=converged,
            stop_reason=reason,
            attempts=self.attempt,
            tokens=self.tokens,
            # The reviewer judges the best attempt, and sees that attempt's error.
            final_output=trace.outputs[reviewed - 1],
            last_error="" if converged else _last_error(trace.attempt_failures[reviewed - 1], self.redactor),
            failure_classes=tuple(f.failure_class for f in trace.failures),
            draft=self.config.draft,
            scores=tuple(trace.scores),
            grades=tuple(trace.grades),
            checks_total=len(task.checks) if trace.grades else 0,
            reviewed_attempt=reviewed,
            failing_checks=tuple(FailingCheck(check_id, about.get(check_id, "")) for check_id in failing),
            reviewed_estimate=estimate,
        )


def run_task(
    task: Task,
    agent: Agent,
    config: LoopConfig,
    *,
    on_step: Callable[[StepRecord], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    resume: Resume | None = None,
) -> LoopResult:
    """Run one loop to its stop. Safe to repeat: it holds no state between
    calls, though the agent may (a replay advances). ``resume``: a run sent
    back by a reviewer starts from its earlier output, with the reviewer's
    note in every prompt (through the redactor)."""
    run = _Run.start(task, config, clock, resume)
    while True:
        reply, result = run.attempt_once(agent)
        run.record(reply, result)
        if on_step is not None:
            on_step(run.step_record(result))
        reason = run.stop_reason(result)
        if reason is not None:
            return run.result(reason)
