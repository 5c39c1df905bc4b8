"""What a producer reads of the two corrective actions through the API and
the export: the item's verdict (with the corrected output), its version and
the item it revises, a revised output pushed as the next version of its own
sent-back item, and a resumed run's lineage."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from reviewqueue import services
from reviewqueue.export import export_lines, verdicts
from reviewqueue.models import LoopRun, ReviewItem
from reviewqueue.tokens import issue_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def token(db: None) -> str:
    _, plain = issue_token(name="producer-a", scopes=["outputs", "tasks"])
    return plain


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _push(client: Client, token: str, **fields: Any) -> Any:
    body = {"idempotency_key": "k-1", "task_description": "Summarise", "final_output": "v1 text", **fields}
    return client.post("/api/outputs", json.dumps(body), content_type="application/json", headers=_headers(token))


def _decided(client: Client, token: str, reviewer: User, action: str, **fields: Any) -> ReviewItem:
    """Decided an undo window ago, so the verdict is final and told."""
    item = ReviewItem.objects.get(pk=_push(client, token, **fields).json()["item_id"])
    then = timezone.now() - timedelta(seconds=settings.REVIEWQUEUE_UNDO_SECONDS + 1)
    services.claim(reviewer=reviewer, now=then)
    if action == "send_back":
        services.send_back(item_id=item.pk, reviewer=reviewer, note="cite the log line", now=then)
    else:
        services.decide(item_id=item.pk, reviewer=reviewer, approve=True, edited_output="v1 text, corrected", now=then)
    return item


def test_an_edited_item_reads_with_its_verdict_and_corrected_output(client: Client, token: str, reviewer: User) -> None:
    item = _decided(client, token, reviewer, "edit")
    body = client.get(f"/api/items/{item.pk}", headers=_headers(token)).json()
    assert body["status"] == "approved" and body["decision"] == "edit"
    assert body["version"] == 1 and body["previous_item"] is None
    assert body["verdict"] == {
        "decision": "edit",
        "reason_label": "",
        "note": "",
        "edited_output": "v1 text, corrected",
    }


def test_a_waiting_item_has_no_verdict_yet(client: Client, token: str) -> None:
    item_id = _push(client, token).json()["item_id"]
    body = client.get(f"/api/items/{item_id}", headers=_headers(token)).json()
    assert body["verdict"] is None and body["status"] == "pending"


def test_a_revised_output_becomes_the_next_version_of_the_sent_back_item(
    client: Client, token: str, reviewer: User
) -> None:
    v1 = _decided(client, token, reviewer, "send_back")
    sent = client.get(f"/api/items/{v1.pk}", headers=_headers(token)).json()
    assert sent["status"] == "sent_back" and sent["verdict"]["note"] == "cite the log line"
    assert sent["verdict"]["edited_output"] is None
    response = _push(client, token, idempotency_key="k-2", final_output="v2 text", previous_item=v1.pk)
    assert response.status_code == 201
    v2 = client.get(f"/api/items/{response.json()['item_id']}", headers=_headers(token)).json()
    assert (v2["version"], v2["previous_item"], v2["status"]) == (2, v1.pk, "pending")


def test_a_revision_is_refused_while_the_send_back_may_still_be_undone(
    client: Client, token: str, reviewer: User
) -> None:
    """Inside the undo window the send-back is not told, so it is not a
    send-back to revise either: a revision then would make the original and
    version 2 both wait once the reviewer undoes."""
    v1 = ReviewItem.objects.get(pk=_push(client, token).json()["item_id"])
    services.claim(reviewer=reviewer)
    services.send_back(item_id=v1.pk, reviewer=reviewer, note="cite the log line")
    assert client.get(f"/api/items/{v1.pk}", headers=_headers(token)).json()["status"] == "claimed"
    refused = _push(client, token, idempotency_key="k-2", final_output="v2 text", previous_item=v1.pk)
    assert refused.status_code == 400
    assert refused.json()["fields"]["previous_item"].endswith(f"item {v1.pk} was not sent back (it is claimed)")
    assert ReviewItem.objects.count() == 1


def test_previous_item_must_be_this_producers_sent_back_item(client: Client, token: str, reviewer: User) -> None:
    v1 = _decided(client, token, reviewer, "send_back", idempotency_key="k-3")
    waiting = _push(client, token).json()["item_id"]
    refused = _push(client, token, idempotency_key="k-2", previous_item=waiting)
    assert refused.status_code == 400 and "previous_item" in refused.json()["fields"]
    assert "was not sent back" in refused.json()["fields"]["previous_item"]
    _, other = issue_token(name="producer-b", scopes=["outputs"])
    foreign = _push(client, other, idempotency_key="k-4", previous_item=v1.pk)
    assert foreign.status_code == 400 and "no item" in foreign.json()["fields"]["previous_item"]
    assert ReviewItem.objects.count() == 2  # nothing admitted by a refused push


def test_a_resumed_run_names_the_run_it_resumes(client: Client, token: str, reviewer: User) -> None:
    sent_back = _decided(client, token, reviewer, "send_back")  # final: its run may be told
    first = LoopRun.objects.create(producer="producer-a", run_id="b-7", task_id="t", task={}, item=sent_back)
    LoopRun.objects.create(producer="producer-a", run_id="b-7~v2", task_id="t", task={}, resumed_from=first)
    assert client.get("/api/tasks/b-7~v2", headers=_headers(token)).json()["resumed_from"] == "b-7"
    assert client.get("/api/tasks/b-7", headers=_headers(token)).json()["resumed_from"] is None


def test_the_export_carries_the_edit_and_the_version(client: Client, token: str, reviewer: User) -> None:
    edited = _decided(client, token, reviewer, "edit")
    sent = _decided(client, token, reviewer, "send_back", idempotency_key="k-2")
    rows = [json.loads(line) for line in export_lines(verdicts(), "jsonl", dataset=True)]
    by_item = {row["item_id"]: row for row in rows}
    assert by_item[edited.pk]["decision"] == "edit"
    assert by_item[edited.pk]["final_output"] == "v1 text"  # the original beside the correction
    assert by_item[edited.pk]["edited_output"] == "v1 text, corrected"
    assert by_item[sent.pk]["decision"] == "send_back" and by_item[sent.pk]["edited_output"] == ""
    assert by_item[sent.pk]["item_version"] == 1 and by_item[sent.pk]["previous_item_id"] is None
    plain = [json.loads(line) for line in export_lines(verdicts(), "jsonl")]
    assert "edited_output" not in plain[0] and plain[0]["item_version"] == 1
