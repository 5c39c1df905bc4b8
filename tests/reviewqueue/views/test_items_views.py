"""The item pages: who may open them, what a bad filter says, what each
reader sees, and the bulk form's count-then-confirm over POST with CSRF."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.test import Client, override_settings

from reviewqueue import services
from reviewqueue.models import PolicyAudit, Queue, ReviewItem

pytestmark = pytest.mark.django_db


def test_operators_list_and_search_items(client: Client, operator: Any, admit_item: Any) -> None:
    found = admit_item(task_description="Needle in the haystack").item
    other = admit_item(task_description="Something else").item
    client.force_login(operator)
    page = client.get("/ops/items/", {"q": "needle"})
    assert page.status_code == 200
    body = page.content.decode()
    assert f'id="item-{found.pk}"' in body and f'id="item-{other.pk}"' not in body
    assert client.get("/ops/items/", HTTP_HX_REQUEST="true").status_code == 200


def test_a_bad_filter_is_a_400_that_names_it(client: Client, operator: Any) -> None:
    client.force_login(operator)
    response = client.get("/ops/items/", {"status": "nonsense", "version": "x", "after": "garbage"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "Select a valid choice" in body and "Enter a whole number" in body
    assert "not a cursor this list gave out" in body
    swapped = client.get("/ops/items/", {"since": "2026-02-02", "until": "2026-02-01"})
    assert swapped.status_code == 400 and "must be on or after the start date" in swapped.content.decode()


def test_the_older_link_pages_by_cursor(client: Client, operator: Any, admit_item: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr("reviewqueue.selectors.items.PAGE_SIZE", 2)
    items = [admit_item(producer="p").item for _ in range(3)]
    client.force_login(operator)
    first = client.get("/ops/items/", {"producer": "p"}).content.decode()
    assert f'id="item-{items[2].pk}"' in first and f'id="item-{items[0].pk}"' not in first
    link = re.search(r'href="\?([^"]+)" rel="next" id="items-older"', first)
    assert link is not None
    second = client.get("/ops/items/?" + html.unescape(link.group(1))).content.decode()
    assert f'id="item-{items[0].pk}"' in second and f'id="item-{items[1].pk}"' not in second
    assert 'id="items-older"' not in second


def test_the_item_page_shows_its_timeline(client: Client, operator: Any, admit_item: Any) -> None:
    item = admit_item().item
    client.force_login(operator)
    page = client.get(f"/ops/items/{item.pk}/")
    assert page.status_code == 200 and 'id="timeline"' in page.content.decode()
    assert client.get("/ops/items/999999/").status_code == 404


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
def test_the_reviewers_renewals_and_undo_reach_the_items_timeline(
    client: Client, reviewer: Any, operator: Any, admit_item: Any, htmx: bool
) -> None:
    """Renew and undo as the review page sends them (with htmx, or as plain
    form posts), then the operator's item page shows one line for the lease's
    renewals and one for the verdict taken back."""
    headers = {"HX-Request": "true"} if htmx else {}
    item = admit_item().item
    client.force_login(reviewer)
    client.post("/review/next/", headers=headers)
    for _ in range(3):
        assert client.post(f"/review/{item.pk}/renew/", headers=headers).status_code in (200, 302)
    client.post(f"/review/{item.pk}/decide/", {"decision": "reject", "reason_label": "unclear"}, headers=headers)
    assert client.post("/review/undo/", headers=headers).status_code in (200, 302)
    client.force_login(operator)
    page = client.get(f"/ops/items/{item.pk}/", headers=headers)
    assert page.status_code == 200
    timeline = re.search(r'<ol class="timeline" id="timeline">(.*?)</ol>', page.content.decode(), re.DOTALL)
    assert timeline is not None
    lines = html.unescape(timeline.group(1))
    assert lines.count("event-renewal") == 1 and "rita renewed the lease" in lines and "3 times" in lines
    assert lines.count("event-undone") == 1
    assert "Undone: rita took back their verdict, reject (unclear), given at" in lines


def test_reviewers_and_strangers_are_refused_the_operator_pages(
    client: Client, reviewer: Any, make_user: Any, admit_item: Any
) -> None:
    item = admit_item().item
    for user in (reviewer, make_user("nobody")):
        client.force_login(user)
        assert client.get("/ops/items/").status_code == 403
        assert client.get(f"/ops/items/{item.pk}/").status_code == 403
        assert client.post("/ops/items/bulk/", {"action": "expire"}).status_code == 403
    client.logout()
    assert client.get("/ops/items/").status_code == 302


def test_the_history_is_the_reviewers_own(client: Client, reviewer: Any, operator: Any, admit_item: Any) -> None:
    item = admit_item(task_description="Mine to judge").item
    services.claim(reviewer=reviewer)
    services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    client.force_login(reviewer)
    page = client.get("/review/history/")
    assert page.status_code == 200 and f'id="item-{item.pk}"' in page.content.decode()
    # No producer or run filter for a reviewer: what they may not see they may not filter on.
    assert 'name="producer"' not in page.content.decode()
    # An operator reviews too (REVIEWQUEUE_OPERATORS_REVIEW): their history holds only their own answers.
    client.force_login(operator)
    page = client.get("/review/history/")
    assert page.status_code == 200 and f'id="item-{item.pk}"' not in page.content.decode()
    with override_settings(REVIEWQUEUE_OPERATORS_REVIEW=False):
        assert client.get("/review/history/").status_code == 403


def test_bulk_counts_then_confirms_and_refuses_a_changed_count(client: Client, operator: Any, admit_item: Any) -> None:
    for _ in range(3):
        admit_item(task_description="stale batch")
    client.force_login(operator)
    count = client.post("/ops/items/bulk/", {"q": "stale", "action": "expire"})
    assert count.status_code == 200 and "3 items" in count.content.decode()
    assert ReviewItem.objects.filter(status="shed").count() == 0
    admit_item(task_description="stale batch")
    changed = client.post("/ops/items/bulk/", {"q": "stale", "action": "expire", "seen": "3"})
    assert "now matches 4 items, not the 3 you confirmed" in changed.content.decode()
    assert ReviewItem.objects.filter(status="shed").count() == 0
    done = client.post("/ops/items/bulk/", {"q": "stale", "action": "expire", "seen": "4"})
    assert done.status_code == 302 and done["Location"].startswith("/ops/items/?q=stale")
    assert ReviewItem.objects.filter(status="shed").count() == 4
    assert PolicyAudit.objects.filter(changes__has_key="bulk expire").count() == 1
    assert Queue.default().depth == 0


def test_bulk_needs_its_label_and_target(client: Client, operator: Any) -> None:
    client.force_login(operator)
    assert "a rejection needs a reason label" in client.post("/ops/items/bulk/", {"action": "reject"}).content.decode()
    assert "choose the queue" in client.post("/ops/items/bulk/", {"action": "move"}).content.decode()


def test_bulk_refuses_a_post_without_csrf(operator: Any, admit_item: Any) -> None:
    admit_item()
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.post("/ops/items/bulk/", {"action": "expire", "seen": "1"}).status_code == 403
    assert ReviewItem.objects.filter(status="shed").count() == 0
