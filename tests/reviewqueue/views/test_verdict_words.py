"""A verdict reads the same on every page: past tense, capitalised, one word
set ("Approved", "Rejected", "Approved with edits", "Sent back"), never the
imperative "Approve" next to "approved with edits"."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from reviewqueue import services
from reviewqueue.models import Verdict

pytestmark = pytest.mark.django_db

WORDS = {"approve": "Approved", "reject": "Rejected", "edit": "Approved with edits", "send_back": "Sent back"}


def _decided(admit_item: Any, reviewer: Any, decision: str) -> Any:
    item = admit_item().item
    assert services.claim(reviewer=reviewer).pk == item.pk
    if decision == "send_back":
        services.send_back(item_id=item.pk, reviewer=reviewer, note="try again")
    else:
        services.decide(
            item_id=item.pk,
            reviewer=reviewer,
            approve=decision != "reject",
            reason_label="logic_error" if decision == "reject" else "",
            edited_output="fixed\n" if decision == "edit" else "",
        )
    # Past the undo window, so every list shows the verdict.
    Verdict.objects.filter(item=item).update(created_at=timezone.now() - timedelta(minutes=5))
    return item


@pytest.fixture
def decided(admit_item: Any, reviewer: Any) -> dict[str, Any]:
    return {decision: _decided(admit_item, reviewer, decision) for decision in WORDS}


def _cell(body: str, item_id: int, label: str) -> str:
    row = body.split(f'id="item-{item_id}"', 1)[1].split("</tr>", 1)[0]
    return row.split(f'data-label="{label}">', 1)[1].split("</td>", 1)[0]


def test_the_reviewers_history_says_each_answer_in_the_same_words(
    client: Client, reviewer: Any, decided: dict[str, Any]
) -> None:
    client.force_login(reviewer)
    body = client.get("/review/history/").content.decode()
    for decision, item in decided.items():
        assert f">{WORDS[decision]}</span>" in _cell(body, item.pk, "My answer"), decision
    assert "Rejected</span> (logic error)" in _cell(body, decided["reject"].pk, "My answer")


def test_the_operators_item_list_and_its_filter_say_each_decision_in_the_same_words(
    client: Client, operator: Any, decided: dict[str, Any]
) -> None:
    client.force_login(operator)
    body = client.get("/ops/items/").content.decode()
    for decision, item in decided.items():
        assert f">{WORDS[decision]}</span>" in _cell(body, item.pk, "Decision"), decision
    choices = body.split('name="decision"', 1)[1].split("</select>", 1)[0]
    for decision, words in WORDS.items():
        assert f'<option value="{decision}">{words}</option>' in choices


def test_the_item_page_and_the_recent_verdicts_say_the_same_words(
    client: Client, reviewer: Any, decided: dict[str, Any]
) -> None:
    client.force_login(reviewer)
    for decision, item in decided.items():
        page = client.get(f"/review/items/{item.pk}/").content.decode()
        verdict = page.split('class="item-verdict"', 1)[1].split("</p>", 1)[0]
        assert f">{WORDS[decision]}</span>" in verdict, decision
    recent = client.get("/review/").content.decode().split('class="recent"', 1)[1].split("</ol>", 1)[0]
    for words in WORDS.values():
        assert f">{words}</span>" in recent


def test_a_rejection_notice_names_the_item_before_its_reason(client: Client, reviewer: Any, admit_item: Any) -> None:
    item = admit_item().item
    client.force_login(reviewer)
    client.post("/review/next/", HTTP_HX_REQUEST="true")
    card = client.post(
        f"/review/{item.pk}/decide/", {"decision": "reject", "reason_label": "logic_error"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert f"Rejected item #{item.pk} (logic error)." in card
