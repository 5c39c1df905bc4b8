"""What /api/stats tells a producer counts only final verdicts: a verdict
still inside its undo window may be taken back (reviewqueue.finality), so it
is not in the approve rate yet."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from reviewqueue import services
from reviewqueue.models import Verdict
from reviewqueue.tokens import issue_token

pytestmark = pytest.mark.django_db


def stats(client: Client) -> dict[str, Any]:
    _, plain = issue_token(name=f"producer-{Verdict.objects.count()}", scopes=["outputs"])
    response = client.get("/api/stats", headers={"Authorization": f"Bearer {plain}"})
    assert response.status_code == 200, response.content
    return response.json()


def test_the_approve_rate_counts_only_verdicts_past_their_undo_window(
    client: Client, admit_item: Callable[..., Any], reviewer: User, settings: Any
) -> None:
    settings.REVIEWQUEUE_UNDO_SECONDS = 60
    services.policy_update(user=None, changes={"double_review_rate": 0, "gold_rate": 0, "sampling_rate": 0})
    item = admit_item().item
    assert services.claim(reviewer=reviewer).pk == item.pk
    services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    told = stats(client)
    assert (told["approve_rate"], told["approve_rate_n"]) == (None, 0)  # still undoable
    verdict = Verdict.objects.get(item=item)
    Verdict.objects.filter(pk=verdict.pk).update(created_at=verdict.created_at - timedelta(seconds=61))
    told = stats(client)
    assert (told["approve_rate"], told["approve_rate_n"]) == (1.0, 1)


@pytest.mark.parametrize("action", ["approve", "reject", "send_back"])
def test_no_count_tells_a_verdict_inside_its_undo_window(
    client: Client, admit_item: Callable[..., Any], reviewer: User, settings: Any, action: str
) -> None:
    """The item reads as claimed in every count, as GET /api/items/{id} shows
    it; the audit share and the decision rate do not count it yet either."""
    settings.REVIEWQUEUE_UNDO_SECONDS = 60
    services.policy_update(user=None, changes={"double_review_rate": 0, "gold_rate": 0, "sampling_rate": 0})
    item = admit_item(label="sampled").item
    assert services.claim(reviewer=reviewer).pk == item.pk
    before = stats(client)
    if action == "send_back":
        services.send_back(item_id=item.pk, reviewer=reviewer, note="again")
    else:
        services.decide(item_id=item.pk, reviewer=reviewer, approve=action == "approve", reason_label="unclear")
    told = stats(client)
    for key in ("status_counts", "depth", "pending", "claimed", "audit_n", "audit_reject_share"):
        assert told[key] == before[key], key
    assert told["rates"]["decisions"] == before["rates"]["decisions"] == 0
    assert told["status_counts"]["claimed"] == 1
    services.undo(reviewer=reviewer)  # taken back: nothing moves either
    assert stats(client)["status_counts"] == before["status_counts"]
    services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    settings.REVIEWQUEUE_UNDO_SECONDS = 0  # the window has closed: now it is told
    told = stats(client)
    assert told["status_counts"]["approved"] == 1 and told["status_counts"]["claimed"] == 0
    assert (told["audit_n"], told["rates"]["decisions"]) == (1, 1)
