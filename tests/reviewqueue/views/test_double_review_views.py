"""Double review as reviewers and producers meet it: the second reviewer's
page never shows the first answer, and the producer sees a waiting item,
then one settled verdict."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db.models import F
from django.test import Client

from reviewqueue import services
from reviewqueue.models import ReviewItem
from reviewqueue.tokens import issue_token

pytestmark = [pytest.mark.double_review, pytest.mark.django_db]

FIRST_NOTE = "ann-thinks-the-loop-invented-an-api"


@pytest.fixture
def pair(make_user: Callable[..., Any]) -> tuple[Any, Any]:
    return make_user("ann", "reviewer"), make_user("ben", "reviewer")


@pytest.fixture
def pushed(client: Client, pair: tuple[Any, Any]) -> tuple[int, str]:
    """An item pushed through the API into a queue that double-reviews everything."""
    services.policy_update(user=None, changes={"double_review_rate": 1.0, "gold_rate": 0})
    _, token = issue_token(name="producer-a", scopes=["outputs"])
    response = client.post(
        "/api/outputs",
        {"idempotency_key": "k-1", "task_description": "Write is_even", "final_output": "def is_even(n): ..."},
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 201, response.content
    return response.json()["item_id"], token


def producer_view(client: Client, item_id: int, token: str) -> dict[str, Any]:
    response = client.get(f"/api/items/{item_id}", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    return response.json()


def post_verdict(_: Client, user: Any, item_id: int, **form: str) -> str:
    """The verdict from the user's own browser (a client of their own)."""
    client = Client()
    client.force_login(user)
    page = client.post("/review/next/", follow=True).content.decode()
    assert f'data-item="{item_id}"' in page
    return client.post(f"/review/{item_id}/decide/", form).content.decode()


def test_the_second_reviewer_sees_the_item_and_nothing_of_the_first_answer(
    client: Client, pair: tuple[Any, Any], pushed: tuple[int, str]
) -> None:
    ann, ben = pair
    item_id, _ = pushed
    post_verdict(client, ann, item_id, decision="reject", reason_label="hallucination", note=FIRST_NOTE)
    client = Client()  # ben's own browser
    client.force_login(ben)
    page = client.post("/review/next/", follow=True).content.decode()
    assert f'data-item="{item_id}"' in page
    assert FIRST_NOTE not in page and "Rejected" not in page
    item_page = client.get(f"/review/items/{item_id}/").content.decode()
    assert FIRST_NOTE not in item_page


def first_answer(client: Client, reviewer: Any, item_id: int) -> str:
    """The reviewer claims the item and approves it in this client; the page that follows."""
    client.force_login(reviewer)
    client.post("/review/next/")
    return client.post(f"/review/{item_id}/decide/", {"decision": "approve"}, follow=True).content.decode()


def test_a_second_post_from_the_first_reviewer_is_refused_without_revealing_anything(
    client: Client, pair: tuple[Any, Any], pushed: tuple[int, str]
) -> None:
    ann, _ = pair
    item_id, _ = pushed
    first_answer(client, ann, item_id)
    again = client.post(f"/review/{item_id}/decide/", {"decision": "reject", "reason_label": "unclear"}, follow=True)
    # told in the words a double submit on any item gets: nothing says a second reviewer waits
    assert f"Item #{item_id} was already approved just now by you, in another tab or window" in again.content.decode()
    assert ReviewItem.objects.get(pk=item_id).review_round == 2


def test_the_producer_sees_a_waiting_item_then_one_settled_verdict(
    client: Client, pair: tuple[Any, Any], pushed: tuple[int, str]
) -> None:
    ann, ben = pair
    item_id, token = pushed
    assert producer_view(client, item_id, token)["awaiting"] == "review"
    post_verdict(client, ann, item_id, decision="reject", reason_label="unclear", note=FIRST_NOTE)
    waiting = producer_view(client, item_id, token)
    assert (waiting["status"], waiting["awaiting"], waiting["verdict"], waiting["decision"]) == (
        "pending",
        "second_review",
        None,
        None,
    )
    # A third reviewer exists before the disagreement, so it waits for one
    # (with only two, it would go to the operators at once).
    carol = pair[0].__class__.objects.create_user("carol")
    carol.groups.add(*ann.groups.all())
    post_verdict(client, ben, item_id, decision="approve")
    assert producer_view(client, item_id, token)["awaiting"] == "tiebreak"
    post_verdict(client, carol, item_id, decision="approve", note="fine as it is")
    in_window = producer_view(client, item_id, token)  # carol may still undo it: not told yet
    assert (in_window["awaiting"], in_window["verdict"], in_window["decision"]) == ("tiebreak", None, None)
    window = timedelta(seconds=settings.REVIEWQUEUE_UNDO_SECONDS)
    ReviewItem.objects.filter(pk=item_id).update(decided_at=F("decided_at") - window)  # the window has closed
    settled = producer_view(client, item_id, token)
    assert (settled["status"], settled["awaiting"], settled["verdict"]["decision"]) == ("approved", None, "approve")
    assert settled["verdict"]["note"] == "fine as it is"  # the settling answer's words, not the outvoted one's


def test_an_answer_that_settles_nothing_is_listed_with_the_reviewers_verdicts(
    client: Client, pair: tuple[Any, Any], pushed: tuple[int, str]
) -> None:
    ann, _ = pair
    item_id, _ = pushed
    page = first_answer(client, ann, item_id)
    recent = page[page.index("Your recent verdicts") :]
    assert f">#{item_id}</a>" in recent  # listed like any verdict: nothing marks it as special
    assert "1</strong> verdict in the last hour" in page
