"""The item pages as a new operator reads them: a refused bulk action stays
beside its form on the item list, the confirmation says the filter and the
action in the page's words (not field names and stored values), and a
timeline line names another version once."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from reviewqueue import services

pytestmark = pytest.mark.django_db


def test_a_refused_bulk_action_stays_on_the_item_list_beside_its_form(
    client: Client, operator: Any, admit_item: Any
) -> None:
    item = admit_item(task_description="Needle task").item
    client.force_login(operator)
    response = client.post("/ops/items/bulk/", {"q": "needle", "action": "reject"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "Confirm a bulk action" not in body
    assert f'id="item-{item.pk}"' in body  # the list, filtered as it was
    form = body.split('id="bulk-form"', 1)[1].split("</form>", 1)[0]
    assert "a rejection needs a reason label" in form
    assert 'value="reject" selected' in form  # what was chosen is kept


def test_the_confirmation_says_the_filter_and_the_action_in_words(
    client: Client, operator: Any, admit_item: Any
) -> None:
    services.create_queue(user=None, slug="docs", name="Open tasks")
    admit_item(task_description="Needle task")
    client.force_login(operator)
    rejected = client.post(
        "/ops/items/bulk/",
        {"q": "needle", "queue": "default", "status": "pending", "action": "reject", "reason_label": "logic_error"},
    ).content.decode()
    assert "will be rejected with the label logic error." in rejected
    assert "logic_error." not in rejected
    for words in ("Search task and output: needle", "Queue: Default", "Status: Pending"):
        assert words in rejected, words
    assert "q = needle" not in rejected
    moved = client.post("/ops/items/bulk/", {"q": "needle", "action": "move", "target": "docs"}).content.decode()
    assert "will be moved to Open tasks." in moved


def test_a_timeline_line_about_another_version_names_it_once(
    client: Client, operator: Any, admit_item: Any, reviewer: Any, settings: Any
) -> None:
    settings.REVIEWQUEUE_UNDO_SECONDS = 0  # the send-back final at once: a revision may follow it
    first = admit_item().item
    services.claim(reviewer=reviewer)
    services.send_back(item_id=first.pk, reviewer=reviewer, note="again")
    second = admit_item(final_output="version two", previous_version=first).item
    client.force_login(operator)
    timeline = client.get(f"/ops/items/{first.pk}/").content.decode().split('id="timeline"', 1)[1].split("</ol>", 1)[0]
    line = timeline.split("event-version", 1)[1].split("</li>", 1)[0]
    assert line.count(f"#{second.pk}") == 1, line
    assert f'href="/ops/items/{second.pk}/"' in line
