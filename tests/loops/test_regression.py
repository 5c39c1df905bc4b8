"""The regression guard, per-attempt grades and the best attempt handed over."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loops.agents import AgentError, AgentReply, ScriptedAgent, make_agent
from loops.cutoff import CUTOFF_REASONS, cutoff_summary
from loops.result import FailingCheck, LoopResult
from loops.runner import STOP_REASONS, LoopConfig, run_task
from loops.spec import Task
from loops.stop_rules import (
    RegressionGuard,
    best_attempt,
    best_so_far_matrix,
    make_stop_rule,
    quality_estimates,
)
from tests.loops.helpers import RecordingAgent, ScoreSequence, scripted

# --- the guard's edges ----------------------------------------------------------------


def test_it_counts_a_drop_of_exactly_the_margin_as_a_regression() -> None:
    guard = RegressionGuard(margin=0.25, k=1)
    assert guard.regressed([1.0, 0.75]) == [False, True]
    assert guard.fires([1.0, 0.75])


def test_it_ignores_a_drop_just_short_of_the_margin() -> None:
    guard = RegressionGuard(margin=0.25, k=1)
    assert guard.regressed([1.0, 0.76]) == [False, False]
    assert not guard.fires([1.0, 0.76])


def test_it_reads_shares_of_checks_at_the_margin_despite_rounding() -> None:
    # 2/3 - 1/3 is not exactly 1/3 in floating point; a drop of one check of three still counts.
    guard = RegressionGuard(margin=1 / 3, k=1)
    assert guard.fires([2 / 3, 1 / 3])


def test_it_waits_for_k_regressions_in_a_row() -> None:
    guard = RegressionGuard(margin=0.25, k=3)
    assert not guard.fires([0.8, 0.2, 0.2])  # K - 1
    assert guard.fires([0.8, 0.2, 0.2, 0.2])  # K


def test_it_restarts_the_count_after_an_attempt_back_near_the_best() -> None:
    guard = RegressionGuard(margin=0.25, k=2)
    assert not guard.fires([0.8, 0.2, 0.7, 0.2])
    assert guard.fires([0.8, 0.2, 0.7, 0.2, 0.1])


def test_it_measures_against_the_best_so_far_not_the_previous_attempt() -> None:
    guard = RegressionGuard(margin=0.25, k=2)
    # 0.5 -> 0.4 -> 0.3: each step is a small fall, but 0.5 - 0.3 is not 0.25 yet
    assert not guard.fires([0.5, 0.4, 0.3])
    assert guard.fires([0.9, 0.6, 0.65])  # both are 0.25 or more below 0.9


def test_it_never_fires_on_the_first_attempt_or_on_ties() -> None:
    guard = RegressionGuard(margin=0.1, k=1)
    assert not guard.fires([0.0])
    assert not guard.fires([0.5, 0.5, 0.5])


@pytest.mark.parametrize(("margin", "k"), [(0.0, 2), (-0.1, 2), (1.5, 2), (0.2, 0)])
def test_it_refuses_a_meaningless_guard(margin: float, k: int) -> None:
    with pytest.raises(ValueError):
        RegressionGuard(margin=margin, k=k)
    with pytest.raises(ValueError):
        LoopConfig(regression_margin=margin, regression_after=k)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    grades=st.lists(st.sampled_from([0.0, 0.25, 1 / 3, 0.5, 2 / 3, 0.75, 1.0]), min_size=1, max_size=8),
    margin=st.sampled_from([0.1, 0.25, 1 / 3, 0.5]),
    k=st.integers(min_value=1, max_value=3),
)
def test_its_vector_form_answers_what_the_scalar_form_answers(grades: list[float], margin: float, k: int) -> None:
    guard = RegressionGuard(margin=margin, k=k)
    matrix = guard.fire_matrix(np.array([grades]))
    assert list(matrix[0]) == [guard.fires(grades[: t + 1]) for t in range(len(grades))]
    best = best_so_far_matrix(np.array([grades]))
    assert [int(b) + 1 for b in best[0]] == [best_attempt(grades[: t + 1]) for t in range(len(grades))]


# --- the best attempt -----------------------------------------------------------------


def test_it_chooses_the_best_grade_and_the_later_attempt_on_a_tie() -> None:
    assert best_attempt([1, 4, 2]) == 2
    assert best_attempt([1, 4, 4, 2]) == 3
    assert best_attempt([0, 0, 0]) == 3
    with pytest.raises(ValueError):
        best_attempt([])


def test_a_scored_task_is_judged_by_its_stop_rules_estimate() -> None:
    scores = [0.5, 0.9, 0.6]
    # confirm2 trusts single readings; smooth2 reads the mean of the last two
    assert quality_estimates(make_stop_rule("confirm2"), scores) == scores
    assert quality_estimates(make_stop_rule("smooth2"), scores) == pytest.approx([0.5, 0.7, 0.75])
    # the posterior's estimate is its fitted curve: inside [0, 1], one per score
    posterior = quality_estimates(make_stop_rule("posterior"), scores)
    assert len(posterior) == 3 and all(0 <= q <= 1 for q in posterior)


# --- the guard in the loop ------------------------------------------------------------

ROMAN_GOOD = "def roman(n):\n    return {1: 'I', 4: 'IV', 9: 'IX', 14: 'XIV', 40: 'XL'}[n]\n"


def test_the_suites_regressing_replays_stop_on_the_guard_and_hand_over_their_best(suite: dict[str, Task]) -> None:
    result = run_task(suite["roman"], make_agent("scripted", task=suite["roman"]), LoopConfig())
    assert result.stop_reason == "regression"
    assert result.grades == (1, 3, 4, 1, 0)
    assert (result.reviewed_attempt, result.reviewed_checks_passed, result.checks_total) == (3, 4, 5)
    assert '(9, "IX")' in result.final_output  # attempt 3's code, not attempt 5's
    assert result.last_error.startswith("AssertionError at check_5 (attempt 3)")
    assert result.failing_checks == (FailingCheck("check_5", "subtractive forty"),)

    clamp = run_task(suite["clamp"], make_agent("scripted", task=suite["clamp"]), LoopConfig())
    assert clamp.stop_reason == "regression" and clamp.attempts == 3
    assert clamp.reviewed_attempt == 1 and clamp.reviewed_checks_passed == 2


def test_it_fires_after_k_regressions_and_not_after_k_minus_one(suite: dict[str, Task]) -> None:
    task = suite["clamp"]
    good_two = "def clamp(x, lo, hi):\n    return max(lo, x)\n"
    broken = "def clamp(x, lo, hi):\n    return None\n"
    # the same failure three times would also be stuck: let only the regression guard decide
    guards = {"regression_after": 3, "stuck_after": 10}
    one_short = run_task(task, scripted(good_two, broken, task_id=task.id), LoopConfig(step_limit=3, **guards))
    assert one_short.stop_reason == "step_limit"  # only K - 1 = 2 regressions fit
    fired = run_task(task, scripted(good_two, broken, task_id=task.id), LoopConfig(step_limit=5, **guards))
    assert fired.stop_reason == "regression" and fired.attempts == 4  # the 3rd regression in a row


def test_it_lets_a_dip_that_recovers_continue_to_convergence(suite: dict[str, Task]) -> None:
    task = suite["clamp"]
    attempts = (
        "def clamp(x, lo, hi):\n    return max(lo, x)\n",  # 2 of 3
        "def clamp(x, lo, hi):\n    return min(high, x)\n",  # 0 of 3: one dip
        "def clamp(x, lo, hi):\n    return min(hi, max(lo, x))\n",  # all pass
    )
    result = run_task(task, scripted(*attempts, task_id=task.id), LoopConfig())
    assert result.converged and result.grades == (2, 0, 3)
    assert result.reviewed_attempt == 3 and result.failing_checks == ()


def test_it_hands_over_the_later_of_two_equally_graded_attempts(suite: dict[str, Task]) -> None:
    task = suite["clamp"]
    first = "def clamp(x, lo, hi):\n    return max(lo, x)\n"  # fails check_3
    second = "def clamp(x, lo, hi):\n    return min(hi, x)\n"  # fails check_2
    result = run_task(task, scripted(first, second, task_id=task.id), LoopConfig(step_limit=2))
    assert result.grades == (2, 2)
    assert result.reviewed_attempt == 2 and result.final_output == second.strip()
    assert result.failing_checks == (FailingCheck("check_2", "raises a value below the range to lo"),)


def test_it_grades_an_answer_whose_checks_did_not_run_as_zero(suite: dict[str, Task]) -> None:
    task = suite["clamp"]
    attempts = ("def clamp(:", "def clamp(x, lo, hi):\n    return x\n")
    result = run_task(task, scripted(*attempts, task_id=task.id), LoopConfig(step_limit=2))
    assert result.grades == (0, 1)
    assert result.reviewed_attempt == 2


def test_it_hands_over_the_last_attempt_of_an_open_task(suite: dict[str, Task]) -> None:
    task = suite["release_note"]
    result = run_task(task, make_agent("scripted", task=task), LoopConfig())
    assert result.grades == () and result.checks_total == 0
    assert result.reviewed_attempt == result.attempts == 5
    summary = cutoff_summary(result)
    assert summary["checks_passed"] is None and summary["failing_checks"] == []


def test_it_hands_over_the_scored_attempt_its_rule_rates_best(essay: Task) -> None:
    result = run_task(essay, ScoreSequence(0.5, 0.7, 0.75, 0.72), LoopConfig(step_limit=4))
    assert result.stop_reason == "step_limit"
    assert result.reviewed_attempt == 3 and result.reviewed_estimate == pytest.approx(0.75)
    assert result.grades == ()


def test_a_scored_loop_that_falls_back_stops_on_the_guard(essay: Task) -> None:
    result = run_task(essay, ScoreSequence(0.6, 0.78, 0.4, 0.45, 0.9), LoopConfig(step_limit=8))
    assert result.stop_reason == "regression" and result.attempts == 4
    assert result.reviewed_attempt == 2


def test_an_agent_that_fails_to_answer_is_not_going_backwards(suite: dict[str, Task]) -> None:
    task = suite["clamp"]

    class Flaky:
        name = "flaky"

        def __init__(self) -> None:
            self.calls = 0

        def attempt(self, prompt: str) -> AgentReply:
            self.calls += 1
            if self.calls in (2, 3):
                raise AgentError("HTTP 503")
            return AgentReply(text="def clamp(x, lo, hi):\n    return max(lo, x)\n", tokens=1)

    result = run_task(task, Flaky(), LoopConfig(step_limit=4))
    assert result.stop_reason == "step_limit"  # two failed calls after 2 of 3 are no regression
    assert result.grades == (2, 0, 0, 2)
    assert result.reviewed_attempt == 4


def test_regression_is_one_of_the_cutoff_reasons() -> None:
    assert "regression" in CUTOFF_REASONS and "regression" in STOP_REASONS


def test_a_result_with_grades_round_trips_through_a_dict(suite: dict[str, Task]) -> None:
    result = run_task(suite["roman"], make_agent("scripted", task=suite["roman"]), LoopConfig())
    assert LoopResult.from_dict(result.to_dict()) == result


# --- a check's description: for the reviewer, never for the agent ---------------------


def test_no_prompt_of_a_regressing_loop_holds_a_checks_description(suite: dict[str, Task]) -> None:
    task = suite["roman"]
    shipped = make_agent("scripted", task=task)
    assert isinstance(shipped, ScriptedAgent)
    agent = RecordingAgent(shipped.replay)
    run_task(task, agent, LoopConfig())
    prompts = agent.prompts
    assert len(prompts) == 5
    for prompt in prompts:
        for check in task.checks:
            assert check.about and check.about.lower() not in prompt.lower()
    assert "Hidden checks passing: 4 of 5" in prompts[3]
    assert "Regression: check_2, check_3, check_4" in prompts[4]
