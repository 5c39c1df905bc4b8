"""Send back, end to end, through a real Celery worker process: a reviewer
sends a cut-off output back with a note, the resumed run starts from that
output with the note in its prompt, and either converges, or is cut off
again and comes back to the queue as version 2, linked to version 1, whose
output and note its history shows.

Runs against Redis when REDIS_URL is set, else the embedded SQLite broker.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from reviewqueue import services
from reviewqueue.models import LoopRun, ReviewItem, Verdict
from reviewqueue.services.runs import submit_run

from ..worker_helpers import Workers, finished, publishing_to, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

AGENT = Path(__file__).resolve().parents[1] / "agents" / "follows_note.py"
SHOUT = {
    "id": "shout",
    "description": "Write shout(s), which returns s in upper case.",
    "kind": "verifiable",
    "checks": [{"id": "c1", "code": "assert shout('quiet words') == 'QUIET WORDS'"}],
}
ESSAY = {"id": "essay", "description": "Write a two-line release note.", "kind": "open"}


# A resumed run starts once its send-back is final: a short undo window here,
# the same in this process (which sends back) and in the worker (which starts it).
UNDO_SECONDS = 2


@pytest.fixture
def start_worker(broker_url: str, tmp_path: Path, settings: Any) -> Iterator[Callable[..., subprocess.Popen]]:
    settings.REVIEWQUEUE_UNDO_SECONDS = UNDO_SECONDS
    workers = Workers(broker_url, tmp_path, REVIEWQUEUE_UNDO_SECONDS=str(UNDO_SECONDS))
    yield workers.start
    workers.kill_all()


@pytest.fixture
def rita(client: Client, reviewer: Any) -> Client:
    client.force_login(reviewer)
    return client


def _run_through_the_worker(task: dict[str, Any], run_id: str, prompts: Path) -> LoopRun:
    agent = {"command": f"{sys.executable} {AGENT} {prompts}"}
    submit_run(task=task, run_id=run_id, agent="command", agent_options=agent)
    wait_for(lambda: finished(run_id))
    return LoopRun.objects.get(run_id=run_id)


def _send_back_on_the_page(client: Client, note: str) -> ReviewItem:
    """Claim the next item and send it back with ``note``, as the page does."""
    client.post(reverse("review:next"), HTTP_HX_REQUEST="true")
    item = ReviewItem.objects.get(status="claimed")
    response = client.post(reverse("review:send_back", args=[item.pk]), {"note": note}, HTTP_HX_REQUEST="true")
    assert f"Sent back item #{item.pk}: its loop runs again" in response.content.decode()
    return item


def test_a_sent_back_run_resumes_with_the_note_and_converges(
    start_worker: Any, broker_url: str, rita: Client, tmp_path: Path
) -> None:
    start_worker(concurrency=1)
    prompts = tmp_path / "prompts.txt"
    with publishing_to(broker_url):
        first = _run_through_the_worker(SHOUT, "shout-1", prompts)
        assert first.outcome == "enqueued"  # the agent answers wrongly without a note
        item = _send_back_on_the_page(rita, "Use upper case, as the task asks.")
        wait_for(lambda: finished("shout-1~v2"))
    resumed = LoopRun.objects.get(run_id="shout-1~v2")
    assert resumed.resumed_from == first and resumed.resume_note == "Use upper case, as the task asks."
    assert (resumed.outcome, resumed.stop_reason, resumed.attempts) == ("auto_passed", "converged", 1)
    assert Verdict.objects.get(item=item).decision == "send_back"
    assert ReviewItem.objects.get(pk=item.pk).status == "sent_back"
    assert ReviewItem.objects.count() == 1  # converged: nothing more to review
    resumed_prompt = prompts.read_text().split("\n\x1e\n")[-2]
    assert "The reviewer's note: Use upper case, as the task asks." in resumed_prompt
    assert "return s" in resumed_prompt  # it started from the sent-back output


def test_a_resumed_run_cut_off_again_returns_as_version_2_with_its_history(
    start_worker: Any, broker_url: str, rita: Client, tmp_path: Path, reviewer: Any
) -> None:
    start_worker(concurrency=1)
    with publishing_to(broker_url):
        _run_through_the_worker(ESSAY, "essay-1", tmp_path / "prompts.txt")
        services.policy_update(user=None, changes={"step_limit": 3})  # the live limit moved since
        v1 = _send_back_on_the_page(rita, "Name the upgrade step.")
        wait_for(lambda: finished("essay-1~v2"))
    resumed = LoopRun.objects.get(run_id="essay-1~v2")
    assert (resumed.outcome, resumed.step_limit, resumed.attempts) == ("enqueued", 3, 3)
    v2 = resumed.item
    assert (v2.version, v2.previous_version_id, v2.status) == (2, v1.pk, "pending")
    assert v2.final_output == "Draft, following: Name the upgrade step."

    rita.post(reverse("review:next"), HTTP_HX_REQUEST="true")
    card = rita.get(reverse("review:queue")).content.decode()
    assert f'data-item="{v2.pk}"' in card
    history = card[card.index('<details class="history"') :]
    assert "Draft." in history and "Name the upgrade step." in history
    page = rita.get(reverse("review_item", args=[v2.pk])).content.decode()
    assert "version 2" in page and "Draft, following: Name the upgrade step." in page
    assert "Earlier versions" in page and "Name the upgrade step." in page
    assert f'href="/review/items/{v1.pk}/"' in page
