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
