"""The loop-run service: submitting a run, and running and recording one as
the run_loop task does (called in-process here; the real worker is exercised
in test_worker.py). Each task runs twice."""

from __future__ import annotations

from typing import Any

import pytest

from loops.spec import builtin_suite
from reviewqueue import services
from reviewqueue.models import LoopRun, Queue, ReviewItem
from reviewqueue.services.runs import execute_run, submit_loop

pytestmark = pytest.mark.django_db

SUITE = {task.id: task for task in builtin_suite()}


def run(task_id: str, run_id: str = "r1", **kwargs: Any) -> str:
    """Run a built-in suite task through the service as one delivery of run_loop would."""
    return execute_run(task=SUITE[task_id].to_dict(), run_id=run_id, **kwargs)


# --- submitting a run


def test_submit_loop_is_idempotent_on_the_run_id(django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        submit_loop(task=SUITE["is_even"].to_dict(), run_id="x")
        submit_loop(task=SUITE["is_even"].to_dict(), run_id="x")
    assert LoopRun.objects.count() == 1
    assert len(callbacks) == 1


def test_submit_loop_stores_a_task_with_nul_and_invalid_text_safely() -> None:
    task = {**SUITE["release_note"].to_dict(), "description": "notes\x00 for \ud800 release"}
    stored = submit_loop(task=task, run_id="nul")
    stored.refresh_from_db()
    assert "\x00" not in stored.task["description"]
    assert stored.task["description"].startswith("notes")


# --- running a loop and recording its outcome


def test_it_records_a_repairable_task_as_auto_passed_and_enqueues_nothing() -> None:
    assert run("is_even") == "auto_passed"
    assert run("is_even") == "auto_passed"  # second delivery
    loop = LoopRun.objects.get()
    assert loop.stop_reason == "converged" and loop.deliveries == 1
    assert not ReviewItem.objects.exists()


def test_it_enqueues_a_conceptual_task_once_as_unverified() -> None:
    assert run("to_bin") == "enqueued"
    assert run("to_bin") == "enqueued"
    item = ReviewItem.objects.get()
    assert item.label == "unverified" and item.cutoff_reason in {"stuck", "oscillation"}
    assert item.attempt_count >= 3 and item.source_run_id == "r1"
    assert "100" not in item.last_error or "assert" not in item.last_error.lower()


def test_it_cuts_an_open_task_at_the_live_step_limit() -> None:
    services.policy_update(user=None, changes={"step_limit": 4})
    run("release_note")
    item = ReviewItem.objects.get()
    assert item.cutoff_reason == "step_limit" and item.attempt_count == 4
    assert LoopRun.objects.get().step_limit == 4


def test_it_runs_one_draft_attempt_in_draft_mode() -> None:
    Queue.objects.update_or_create(pk=1, defaults={"mode": "draft"})
    run("release_note")
    item = ReviewItem.objects.get()
    assert item.draft and item.attempt_count == 1 and item.cutoff_reason == "draft"


def test_a_rerun_after_an_interrupted_first_pass_adds_no_second_item() -> None:
    run("to_bin")
    # a worker killed after admit() but before the run was marked finished
    LoopRun.objects.update(outcome=LoopRun.Outcome.RUNNING)
    assert run("to_bin") == "enqueued"
    assert ReviewItem.objects.count() == 1
    assert LoopRun.objects.get().deliveries == 2


def test_it_samples_grey_auto_passes_at_the_configured_rate() -> None:
    grey = {**next(t for t in SUITE.values() if t.kind == "grey").to_dict(), "sampling_rate": None}
    services.policy_update(user=None, changes={"sampling_rate": 1.0})
    assert execute_run(task=grey, run_id="g1") == "auto_passed"
    item = ReviewItem.objects.get()
    assert item.label == "sampled" and item.cutoff_reason == "sampled"
    assert LoopRun.objects.get().sampled
    services.policy_update(user=None, changes={"sampling_rate": 0.0})
    execute_run(task=grey, run_id="g2")
    assert ReviewItem.objects.count() == 1


def test_it_accounts_for_every_run_under_shedding() -> None:
    services.policy_update(user=None, changes={"capacity": 2})
    outcomes = [run("to_bin", run_id=f"s{i}") for i in range(5)]
    assert set(outcomes) <= {"enqueued", "shed"}
    counted = {o: LoopRun.objects.filter(outcome=o).count() for o in ("auto_passed", "enqueued", "shed")}
    assert sum(counted.values()) == 5 == ReviewItem.objects.count()


def test_it_records_an_agent_failure_without_an_item() -> None:
    assert run("is_even", agent="no-such-agent") == "failed"
    assert LoopRun.objects.get().error
    assert not ReviewItem.objects.exists()


def test_it_hands_the_best_attempt_of_a_regressing_loop_to_the_queue_with_its_grade() -> None:
    assert run("roman") == "enqueued"
    assert run("roman") == "enqueued"  # second delivery: the same item
    item = ReviewItem.objects.get()
    assert item.cutoff_reason == "regression"
    assert (item.reviewed_attempt, item.attempt_count, item.checks_passed, item.checks_total) == (3, 5, 4, 5)
    assert '(9, "IX")' in item.final_output and "reversed=True" not in item.final_output
    assert item.last_error.startswith("AssertionError at check_5 (attempt 3)")
    assert item.failing_check_list() == [{"id": "check_5", "about": "subtractive forty"}]
    loop = LoopRun.objects.get()
    assert loop.grades == [1, 3, 4, 1, 0] and loop.checks_total == 5 and loop.reviewed_attempt == 3


def test_it_keeps_a_converged_runs_grades_on_the_run() -> None:
    run("stack")
    loop = LoopRun.objects.get()
    assert loop.grades == [2, 2, 3] and loop.checks_total == 3 and loop.reviewed_attempt == 3


def test_it_hands_a_scored_loops_best_estimate_to_the_queue() -> None:
    scored = {"id": "essay", "description": "Write an essay.", "kind": "grey", "scored": True, "stop_rule": "fixed:99"}
    services.policy_update(user=None, changes={"step_limit": 4})
    assert execute_run(task=scored, run_id="s1", agent="scored", agent_options={"seed": 1, "sigma": 0.1}) == "enqueued"
    item = ReviewItem.objects.get()
    loop = LoopRun.objects.get()
    assert item.cutoff_reason in {"step_limit", "regression"} and len(loop.scores) == item.attempt_count
    # fixed:N trusts single readings, so its estimate of an attempt is that attempt's score
    assert item.reviewed_score == max(loop.scores)
    assert loop.scores[item.reviewed_attempt - 1] == item.reviewed_score
    assert item.checks_total is None and loop.grades == []
