"""The reviewer's two corrective actions, as services: edit and approve
(``decide`` with ``edited_output``) and send back (``send_back``), how each
counts for the tuner and the label counts, their events, undo, and the run a
send-back resumes (run here in-process, as one delivery of run_loop would;
the real worker is in test_send_back_worker.py)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loops.hints import REDACTED
from reviewqueue import services, stats
from reviewqueue.models import LabelCount, LoopRun, Queue, ReviewItem, Verdict, WebhookDelivery
from reviewqueue.services.runs import CANCELLED, execute_run, submit_run
from reviewqueue.services.verdicts import _tuner_window

pytestmark = pytest.mark.django_db

AGENT = Path(__file__).resolve().parents[1] / "agents" / "follows_note.py"
SHOUT = {
    "id": "shout",
    "description": "Write shout(s), which returns s in upper case.",
    "kind": "verifiable",
    "checks": [{"id": "c1", "code": "assert shout('quiet words') == 'QUIET WORDS'"}],
}
ESSAY = {"id": "essay", "description": "Write a two-line release note.", "kind": "open"}


def _agent(prompts: Path) -> dict[str, Any]:
    return {"command": f"{sys.executable} {AGENT} {prompts}"}


def _first_run(task: dict[str, Any], prompts: Path, run_id: str = "build-7", **kwargs: Any) -> LoopRun:
    """Submit and run a loop with the note-following agent; its item waits."""
    submit_run(task=task, run_id=run_id, agent="command", agent_options=_agent(prompts), **kwargs)
    producer = kwargs.get("producer", "")
    outcome = execute_run(task=task, run_id=run_id, agent="command", agent_options=_agent(prompts), producer=producer)
    assert outcome == "enqueued"
    return LoopRun.objects.get(run_id=run_id)


def _run_again(run: LoopRun) -> str:
    """One delivery of run_loop for ``run``, with its message's arguments."""
    return execute_run(
        task=run.task, run_id=run.run_id, agent=run.agent, agent_options=run.agent_options, producer=run.producer
    )


def _claim(reviewer: Any) -> ReviewItem:
    item = services.claim(reviewer=reviewer)
    assert item is not None
    return item


# --- edit and approve


def test_an_edit_is_stored_beside_the_original_and_the_item_is_approved(claimed: ReviewItem, reviewer: Any) -> None:
    original = claimed.final_output
    verdict = services.decide(item_id=claimed.pk, reviewer=reviewer, approve=True, edited_output="def is_even(n): ...")
    claimed.refresh_from_db()
    assert verdict.decision == Verdict.Decision.EDIT and verdict.approved
    assert verdict.edited_output == "def is_even(n): ..."
    assert claimed.final_output == original  # the original is kept as it was
    assert claimed.status == ReviewItem.Status.APPROVED


def test_an_edit_that_changes_only_line_endings_is_a_plain_approval(claimed: ReviewItem, reviewer: Any) -> None:
    same = claimed.final_output.replace("\n", "\r\n")
    verdict = services.decide(item_id=claimed.pk, reviewer=reviewer, approve=True, edited_output=same)
    assert verdict.decision == Verdict.Decision.APPROVE and verdict.edited_output == ""


def test_an_edit_is_cleaned_and_refused_whole_over_the_size_limit(
    claimed: ReviewItem, reviewer: Any, settings: Any
) -> None:
    settings.REVIEWQUEUE_MAX_OUTPUT_CHARS = 100
    with pytest.raises(services.InvalidInput) as refused:
        services.decide(item_id=claimed.pk, reviewer=reviewer, approve=True, edited_output="x" * 101)
    assert refused.value.field == "edited_output"
    assert not Verdict.objects.exists()  # nothing half-recorded; the item is still held
    verdict = services.decide(item_id=claimed.pk, reviewer=reviewer, approve=True, edited_output="ok\x00 then")
    assert verdict.edited_output == "ok\ufffd then"


def test_a_rejection_cannot_carry_an_edit(claimed: ReviewItem, reviewer: Any) -> None:
    with pytest.raises(services.InvalidInput):
        services.decide(
            item_id=claimed.pk, reviewer=reviewer, approve=False, reason_label="code_error", edited_output="x"
        )


def test_the_edit_goes_into_the_item_decided_event(admit_item: Callable[..., Any], reviewer: Any) -> None:
    admit_item(callback_url="http://127.0.0.1:9/hook")
    item = _claim(reviewer)
    services.decide(item_id=item.pk, reviewer=reviewer, approve=True, edited_output="fixed", note="typo")
    body = json.loads(WebhookDelivery.objects.get().body)
    assert body["type"] == "item.decided"
    assert body["data"]["decision"] == "approve" and body["data"]["edited"] is True
    assert body["data"]["edited_output"] == "fixed" and body["data"]["note"] == "typo"


# --- send back


def test_send_back_needs_a_note(claimed: ReviewItem, reviewer: Any) -> None:
    for note in ("", "   \n "):
        with pytest.raises(services.InvalidInput) as refused:
            services.send_back(item_id=claimed.pk, reviewer=reviewer, note=note)
        assert refused.value.field == "note"
    claimed.refresh_from_db()
    assert claimed.status == ReviewItem.Status.CLAIMED and not Verdict.objects.exists()


def test_send_back_of_a_pushed_output_writes_the_event_and_leaves_the_waiting_set(
    admit_item: Callable[..., Any], reviewer: Any
) -> None:
    admit_item(callback_url="http://127.0.0.1:9/hook")
    item = _claim(reviewer)
    assert Queue.current().depth == 1
    verdict = services.send_back(item_id=item.pk, reviewer=reviewer, note="handle n < 0 too")
    item.refresh_from_db()
    assert verdict.decision == Verdict.Decision.SEND_BACK and not verdict.approved
    assert item.status == ReviewItem.Status.SENT_BACK and item.decided_at is not None
    assert Queue.current().depth == 0
    event = WebhookDelivery.objects.get()
    assert event.event_type == "item.sent_back"
    assert json.loads(event.body)["data"]["note"] == "handle n < 0 too"
    assert not LoopRun.objects.exists()  # nobody of ours to resume: the producer has the note
    with pytest.raises(services.AlreadyDecided):
        services.send_back(item_id=item.pk, reviewer=reviewer, note="again")


def test_send_back_of_our_run_writes_the_resumed_run_and_publishes_it_after_commit(
    tmp_path: Path, reviewer: Any, django_capture_on_commit_callbacks: Any
) -> None:
    first = _first_run(ESSAY, tmp_path / "prompts", callback_url="http://127.0.0.1:9/hook", producer="acme")
    item = _claim(reviewer)
    with django_capture_on_commit_callbacks() as callbacks:
        services.send_back(item_id=item.pk, reviewer=reviewer, note="mention the upgrade step")
    resumed = LoopRun.objects.get(resumed_from=first)
    assert resumed.run_id == "build-7~v2" and resumed.producer == "acme"
    assert resumed.callback_url == first.callback_url and resumed.agent == "command"
    assert resumed.resume_note == "mention the upgrade step"
    assert resumed.outcome == LoopRun.Outcome.RUNNING
    assert len(callbacks) >= 2  # the run's publish, besides the event's announcement
    assert services.runs.resume_sent_back(item, "mention the upgrade step") == resumed  # idempotent
    assert LoopRun.objects.filter(resumed_from=first).count() == 1


def test_a_run_id_the_producer_already_used_is_not_taken_over(tmp_path: Path, reviewer: Any) -> None:
    first = _first_run(ESSAY, tmp_path / "prompts", producer="acme")
    theirs = LoopRun.objects.create(producer="acme", run_id="build-7~v2", task_id="essay", task=ESSAY)
    item = _claim(reviewer)
    services.send_back(item_id=item.pk, reviewer=reviewer, note="shorter")
    resumed = LoopRun.objects.get(resumed_from=first)
    assert resumed.run_id == f"build-7~v2.{item.pk}" and resumed.pk != theirs.pk
    assert services.runs.resume_sent_back(item, "shorter") == resumed  # still idempotent


def test_the_note_is_redacted_against_the_hidden_checks(tmp_path: Path, reviewer: Any) -> None:
    _first_run(SHOUT, tmp_path / "prompts")
    item = _claim(reviewer)
    services.send_back(item_id=item.pk, reviewer=reviewer, note="shout('quiet words') must be 'QUIET WORDS'")
    assert LoopRun.objects.get(run_id="build-7~v2").resume_note == REDACTED


def test_the_resumed_run_starts_from_the_output_with_the_note_and_converges(
    tmp_path: Path, reviewer: Any, settings: Any
) -> None:
    settings.REVIEWQUEUE_UNDO_SECONDS = 0  # each send-back final at once: its run may start
    prompts = tmp_path / "prompts"
    _first_run(SHOUT, prompts)
    item = _claim(reviewer)
    assert item.final_output.rstrip() == "def shout(s):\n    return s"
    services.send_back(item_id=item.pk, reviewer=reviewer, note="Use upper case, as the task says.")
    resumed = LoopRun.objects.get(run_id="build-7~v2")
    assert _run_again(resumed) == "auto_passed"
    resumed.refresh_from_db()
    assert resumed.stop_reason == "converged" and resumed.attempts == 1
    last_prompt = prompts.read_text().split("\n\x1e\n")[-2]
    assert "The reviewer's note: Use upper case, as the task says." in last_prompt
    assert "def shout(s):\n    return s" in last_prompt  # it starts from the sent-back output
    assert _run_again(resumed) == "auto_passed"  # a second delivery changes nothing
    assert ReviewItem.objects.count() == 1


def test_a_resumed_run_cut_off_again_is_the_next_version_and_uses_the_live_step_limit(
    tmp_path: Path, reviewer: Any, settings: Any
) -> None:
    settings.REVIEWQUEUE_UNDO_SECONDS = 0  # each send-back final at once: its run may start
    _first_run(ESSAY, tmp_path / "prompts")
    v1 = _claim(reviewer)
    services.policy_update(user=None, changes={"step_limit": 3})  # the tuner or an operator moved it
    services.send_back(item_id=v1.pk, reviewer=reviewer, note="shorter")
    resumed = LoopRun.objects.get(run_id="build-7~v2")
    assert _run_again(resumed) == "enqueued"
    resumed.refresh_from_db()
    assert resumed.step_limit == 3 and resumed.attempts == 3
    v2 = resumed.item
    assert v2.version == 2 and v2.previous_version == v1
    assert v2.final_output == "Draft, following: shorter"
    services.send_back(item_id=_claim(reviewer).pk, reviewer=reviewer, note="shorter still")
    third = LoopRun.objects.get(resumed_from=resumed)
    assert third.run_id == "build-7~v3"
    _run_again(third)
    third.refresh_from_db()
    assert third.item.version == 3 and third.item.previous_version == v2


# --- how each action counts


def test_neither_edit_nor_send_back_counts_as_an_approval_nor_adds_a_label(
    admit_item: Callable[..., Any], reviewer: Any
) -> None:
    for action in ("approve", "edit", "send_back", "reject"):
        admit_item()
        item = _claim(reviewer)
        if action == "send_back":
            services.send_back(item_id=item.pk, reviewer=reviewer, note="try again")
        else:
            services.decide(
                item_id=item.pk,
                reviewer=reviewer,
                approve=action != "reject",
                reason_label="logic_error" if action == "reject" else "",
                edited_output="changed" if action == "edit" else "",
            )
    assert list(Verdict.objects.order_by("pk").values_list("decision", flat=True)) == [
        "approve",
        "edit",
        "send_back",
        "reject",
    ]
    assert [decision == "approve" for _, _, decision, _ in _tuner_window(Queue.default().pk)] == [
        True,
        False,
        False,
        False,
    ]
    rate = stats.approve_rate(10)
    assert (rate.approved, rate.n) == (1, 4)  # the dashboard reads what the tuner reads
    assert dict(LabelCount.objects.values_list("label", "count")) == {"logic_error": 1}


def test_send_backs_lower_the_step_limit_as_rejections_do(
    admit_item: Callable[..., Any], reviewer: Any, small_queue: Callable[..., Queue]
) -> None:
    small_queue(capacity=50, tuner_window=4, step_limit=5)
    for _ in range(4):
        admit_item()
        services.send_back(item_id=_claim(reviewer).pk, reviewer=reviewer, note="again")
    assert Queue.current().step_limit < 5


# --- undo


def test_undo_takes_back_an_edit(claimed: ReviewItem, reviewer: Any) -> None:
    services.decide(item_id=claimed.pk, reviewer=reviewer, approve=True, edited_output="fixed")
    item = services.undo(reviewer=reviewer)
    assert item.pk == claimed.pk and item.status == ReviewItem.Status.CLAIMED
    assert not Verdict.objects.exists()


def test_undo_takes_back_a_send_back_and_cancels_its_run_while_it_has_not_started(
    tmp_path: Path, reviewer: Any, settings: Any
) -> None:
    _first_run(ESSAY, tmp_path / "prompts")
    item = _claim(reviewer)
    services.send_back(item_id=item.pk, reviewer=reviewer, note="shorter")
    assert Queue.current().depth == 0
    undone = services.undo(reviewer=reviewer)
    assert undone.pk == item.pk and undone.status == ReviewItem.Status.CLAIMED
    assert Queue.current().depth == 1
    resumed = LoopRun.objects.get(run_id="build-7~v2")
    assert resumed.outcome == LoopRun.Outcome.FAILED and resumed.error == CANCELLED
    assert _run_again(resumed) == "failed"  # its queued message finds it cancelled and runs nothing
    assert ReviewItem.objects.count() == 1
    # Sent back again: the cancelled run is reopened with the new note and runs.
    services.send_back(item_id=item.pk, reviewer=reviewer, note="much shorter")
    resumed.refresh_from_db()
    assert resumed.outcome == LoopRun.Outcome.RUNNING and resumed.resume_note == "much shorter"
    assert _run_again(resumed) == "running"  # not before this send-back is final
    settings.REVIEWQUEUE_UNDO_SECONDS = 0  # now it is
    assert _run_again(resumed) == "enqueued"
    resumed.refresh_from_db()
    assert resumed.item.final_output == "Draft, following: much shorter"


def test_undo_refuses_a_send_back_whose_run_has_started(tmp_path: Path, reviewer: Any) -> None:
    _first_run(ESSAY, tmp_path / "prompts")
    item = _claim(reviewer)
    services.send_back(item_id=item.pk, reviewer=reviewer, note="shorter")
    LoopRun.objects.filter(run_id="build-7~v2").update(deliveries=1)  # a worker took it
    with pytest.raises(services.UndoRefused) as refused:
        services.undo(reviewer=reviewer)
    assert "already started" in refused.value.message
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.SENT_BACK and Verdict.objects.filter(item=item).exists()
