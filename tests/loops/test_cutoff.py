"""Cutoff preprocessing: thinking stripped, and only the reviewer's fields
sent to the queue."""

from __future__ import annotations

from loops.cutoff import cutoff_summary, strip_thinking
from loops.result import FailingCheck, LoopResult


def test_it_strips_closed_unclosed_and_upstream_opened_thinking() -> None:
    assert strip_thinking("<think>plan\nmore</think>\nanswer") == "answer"
    assert strip_thinking("a <THINKING>x</thinking> b") == "a  b"
    assert strip_thinking("answer <think>never closed") == "answer"
    assert strip_thinking("opened upstream</think> answer") == "answer"
    assert strip_thinking("no thinking here") == "no thinking here"


def test_it_sends_only_the_reviewers_fields_to_the_queue() -> None:
    result = LoopResult(
        task_id="t",
        converged=False,
        stop_reason="stuck",
        attempts=3,
        tokens=900,
        final_output="out",
        last_error="AssertionError at check_2 (attempt 3)",
        failure_classes=("AssertionError",) * 3,
        scores=(0.1,),
        grades=(1, 2, 1),
        checks_total=3,
        reviewed_attempt=2,
        failing_checks=(FailingCheck("check_2", "handles n = 0"),),
    )
    summary = cutoff_summary(result)
    assert summary == {
        "task_id": "t",
        "final_output": "out",
        "last_error": "AssertionError at check_2 (attempt 3)",
        "attempts": 3,
        "cutoff_reason": "stuck",
        "draft": False,
        "reviewed_attempt": 2,
        "checks_passed": 2,
        "checks_total": 3,
        "failing_checks": [{"id": "check_2", "about": "handles n = 0"}],
        "reviewed_score": None,
    }
    # the grades of the other attempts, the scores and the failure classes stay behind
    assert "grades" not in summary and "scores" not in summary and "failure_classes" not in summary
