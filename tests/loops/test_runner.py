"""The loop runner: the built-in suite end to end, each stop guard, what reaches
the agent's prompt, and the result it hands over."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from loops.agents import AgentError, AgentReply, Replay, make_agent
from loops.runner import LoopConfig, LoopResult, StepRecord, is_oscillating, is_stuck, run_task
from loops.spec import Task, TaskKind
from tests.loops.helpers import RecordingAgent, ScoreSequence, scripted

GOOD_IS_EVEN = "def is_even(n):\n    return n % 2 == 0\n"
BAD_IS_EVEN = "def is_even(n):\n    return n % 2 == 1\n"


# --- the built-in suite, run once -----------------------------------------------------


@pytest.fixture(scope="module")
def suite_results(suite: dict[str, Task]) -> dict[str, LoopResult]:
    """Every built-in task run once with its shipped replay, by task id."""
    return {t.id: run_task(t, make_agent("scripted", task=t), LoopConfig()) for t in suite.values()}


def test_it_converges_every_repairable_task(suite: dict[str, Task], suite_results: dict[str, LoopResult]) -> None:
    repairable = [t for t in suite.values() if t.group == "repairable"]
    assert repairable
    for task in repairable:
        result = suite_results[task.id]
        assert result.converged, task.id
        assert result.stop_reason == "converged"
        assert result.attempts > 1  # each replay fails first, so the fix loop did the work


def test_it_cuts_conceptual_tasks_off_as_stuck_or_oscillating(
    suite: dict[str, Task], suite_results: dict[str, LoopResult]
) -> None:
    conceptual = [t for t in suite.values() if t.group == "conceptual"]
    reasons = {suite_results[t.id].stop_reason for t in conceptual}
    assert reasons <= {"stuck", "oscillation"}
    assert reasons == {"stuck", "oscillation"}  # the suite shows both
    for task in conceptual:
        assert not suite_results[task.id].converged


def test_it_runs_open_tasks_to_the_step_limit(suite: dict[str, Task], suite_results: dict[str, LoopResult]) -> None:
    for task in (t for t in suite.values() if t.kind is TaskKind.OPEN):
        result = suite_results[task.id]
        assert result.stop_reason == "step_limit"
        assert result.attempts == LoopConfig().step_limit
        assert not result.converged


def test_it_fires_oscillation_on_the_oscillating_replays_only(
    suite: dict[str, Task], suite_results: dict[str, LoopResult]
) -> None:
    for task_id in ("str_length", "count_vowels"):
        classes = suite_results[task_id].failure_classes
        assert suite_results[task_id].stop_reason == "oscillation"
        assert classes[0] != classes[1] and classes[:2] == classes[2:4]
    for task in (t for t in suite.values() if t.group == "repairable"):
        # Fed step by step, the repairable failure sequences never look like oscillation.
        classes = list(suite_results[task.id].failure_classes)
        assert not any(is_oscillating(classes[:i], 6) for i in range(1, len(classes) + 1))


def test_it_strips_thinking_from_the_final_output(suite_results: dict[str, LoopResult]) -> None:
    result = suite_results["release_note"]
    assert "<think>" not in result.final_output
    assert "five sentences" not in result.final_output
    assert result.final_output.startswith("Version 2.0")


# --- the stop guards ------------------------------------------------------------------


def test_it_detects_stuck_only_on_identical_signatures() -> None:
    assert is_stuck(["A:1", "A:1", "A:1"], 3)
    assert not is_stuck(["A:1", "A:2", "A:1"], 3)
    assert not is_stuck(["A:1", "A:1"], 3)
    assert not is_stuck(["", "", ""], 3)


def test_it_matches_oscillation_by_class_within_the_window() -> None:
    assert is_oscillating(["NameError", "AssertionError", "NameError", "AssertionError"], 6)
    assert not is_oscillating(["NameError", "NameError", "NameError", "NameError"], 6)
    assert not is_oscillating(["A", "B", "A", "C"], 6)
    assert not is_oscillating(["A", "B", "A", "B"], 3)


def test_it_stops_at_the_step_limit_before_the_stuck_guard(suite: dict[str, Task]) -> None:
    task = suite["is_even"]
    result = run_task(task, scripted(BAD_IS_EVEN), LoopConfig(step_limit=3, stuck_after=3))
    assert result.stop_reason == "step_limit"
    assert result.attempts == 3


def test_it_stops_a_stuck_loop_after_n_identical_failures(suite: dict[str, Task]) -> None:
    result = run_task(suite["is_even"], scripted(BAD_IS_EVEN), LoopConfig(step_limit=10, stuck_after=4))
    assert result.stop_reason == "stuck"
    assert result.attempts == 4
    assert result.last_error.startswith("AssertionError at check_1")


def test_it_honours_the_tasks_step_limit_override(suite: dict[str, Task]) -> None:
    task = Task.from_dict({**suite["is_even"].to_dict(), "step_limit": 2})
    result = run_task(task, scripted(BAD_IS_EVEN, "x = 1"), LoopConfig(step_limit=9))
    assert result.attempts == 2
    assert result.stop_reason == "step_limit"


def test_it_runs_a_single_attempt_in_draft_mode(suite: dict[str, Task]) -> None:
    failing = run_task(suite["is_even"], scripted(BAD_IS_EVEN, GOOD_IS_EVEN), LoopConfig(draft=True))
    passing = run_task(suite["is_even"], scripted(GOOD_IS_EVEN), LoopConfig(draft=True))
    assert (failing.attempts, failing.stop_reason, failing.draft) == (1, "draft", True)
    assert (passing.converged, passing.stop_reason, passing.draft) == (True, "converged", True)


def test_it_stops_on_the_wall_clock(suite: dict[str, Task]) -> None:
    ticks: Iterator[float] = iter(range(0, 1000, 50))
    result = run_task(
        suite["release_note"],
        scripted("a", "b"),
        LoopConfig(step_limit=10, wall_clock_s=120),
        clock=lambda: float(next(ticks)),
    )
    assert result.stop_reason == "wall_clock"
    assert result.attempts < 10


def test_it_stops_on_the_token_budget(suite: dict[str, Task]) -> None:
    class Costly:
        name = "costly"

        def attempt(self, prompt: str) -> AgentReply:
            return AgentReply(text="a draft", tokens=400)

    result = run_task(suite["release_note"], Costly(), LoopConfig(step_limit=10, token_budget=1000))
    assert result.stop_reason == "token_budget"
    assert result.attempts == 3
    assert result.tokens == 1200


def test_it_never_stops_on_the_agents_own_claim_of_success(suite: dict[str, Task]) -> None:
    claim = "I am done, all tests pass.\n" + "# " + BAD_IS_EVEN
    result = run_task(suite["is_even"], scripted(claim), LoopConfig(step_limit=3))
    assert not result.converged


def test_it_reports_a_format_anomaly_when_the_last_answer_is_malformed(suite: dict[str, Task]) -> None:
    result = run_task(suite["service_card"], scripted('{"name": "x"}', "not json"), LoopConfig(step_limit=2))
    assert result.stop_reason == "format_anomaly"
    assert "FormatError" in result.last_error


# --- what the agent is told -----------------------------------------------------------


def test_it_treats_a_failing_gate_as_a_hinted_failure_not_a_stop(suite: dict[str, Task]) -> None:
    stub = "def is_even(n):\n    pass\n"
    agent = RecordingAgent(Replay("is_even", (stub, GOOD_IS_EVEN)))
    result = run_task(suite["is_even"], agent, LoopConfig(gates=("no_todo",)))
    assert result.converged
    assert result.failure_classes == ("GateFailed",)
    assert "no_todo" in agent.prompts[1]


def test_it_keeps_hidden_checks_out_of_every_prompt(suite: dict[str, Task]) -> None:
    task = suite["to_bin"]
    leaky = "def to_bin(n):\n    print(\"assert to_bin(8) == '100'\")\n    assert False, 'to_bin(8) == 100'\n"
    agent = RecordingAgent(Replay("to_bin", (leaky,)))
    result = run_task(task, agent, LoopConfig(step_limit=3, stuck_after=5))
    assert len(agent.prompts) == 3
    for prompt in agent.prompts[1:]:
        assert "check_" in prompt
        assert "to_bin(8)" not in prompt
        assert "'100'" not in prompt
    assert "to_bin(8)" not in result.last_error


# --- agents, callbacks and results ----------------------------------------------------


def test_it_turns_agent_errors_into_failures(suite: dict[str, Task]) -> None:
    class Down:
        name = "down"

        def attempt(self, prompt: str) -> AgentReply:
            raise AgentError("HTTP 503")

    result = run_task(suite["is_even"], Down(), LoopConfig(step_limit=5))
    assert result.stop_reason == "stuck"
    assert set(result.failure_classes) == {"AgentError"}


def test_it_reports_each_step_to_the_callback(suite: dict[str, Task]) -> None:
    steps: list[StepRecord] = []
    result = run_task(
        suite["fizzbuzz"], make_agent("scripted", task=suite["fizzbuzz"]), LoopConfig(), on_step=steps.append
    )
    assert [s.attempt for s in steps] == list(range(1, result.attempts + 1))
    assert steps[-1].passed and not any(s.passed for s in steps[:-1])
    assert steps[-1].tokens == result.tokens


def test_it_round_trips_a_result_through_a_dict(suite: dict[str, Task]) -> None:
    result = run_task(suite["to_bin"], make_agent("scripted", task=suite["to_bin"]), LoopConfig())
    assert LoopResult.from_dict(result.to_dict()) == result


# --- scored and open tasks ------------------------------------------------------------


def test_it_converges_a_scored_task_when_its_stop_rule_fires(essay: Task) -> None:
    result = run_task(essay, ScoreSequence(0.5, 0.9, 0.6, 0.85, 0.9, 0.95), LoopConfig(step_limit=8))
    assert result.converged
    assert result.attempts == 5  # two consecutive scores above the bar first happen at 0.85, 0.9
    assert result.scores == (0.5, 0.9, 0.6, 0.85, 0.9)


def test_it_runs_the_shipped_scored_agent_through_the_factory() -> None:
    task = Task(id="scored_demo", description="Improve.", kind=TaskKind.GREY, scored=True)
    result = run_task(task, make_agent("scored", task=task, seed=3, sigma=0.05), LoopConfig(step_limit=15))
    assert result.stop_reason in {"converged", "step_limit"}
    assert len(result.scores) == result.attempts


def test_it_never_converges_an_open_task_even_with_a_passing_format() -> None:
    task = Task(id="o", description="Say hi.", kind=TaskKind.OPEN, checks=(), format_check="json")
    result = run_task(task, scripted('{"hi": 1}'), LoopConfig(step_limit=2))
    assert not result.converged
    assert result.stop_reason == "step_limit"
