"""Two reviewers' claims served gold copies at the same moment, on PostgreSQL
with a connection each: the gold item's row lock orders them, so one gold
item is never shown in two open copies at once (the second copy's next round
would wait for reviewers who have all seen it)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from reviewqueue import services
from reviewqueue.models import GoldItem, ReviewItem
from reviewqueue.services import review_quality

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks across two connections"),
]


def test_a_gold_item_another_claim_is_serving_is_not_shown_in_a_second_copy(
    admit_item: Callable[..., Any], make_user: Callable[..., Any], operator: Any, settings: Any
) -> None:
    settings.REVIEWQUEUE_OPERATORS_REVIEW = False
    services.policy_update(user=None, changes={"gold_rate": 0, "double_review_rate": 0})
    dan = make_user("dan", "reviewer")
    source = admit_item().item.pk
    assert services.claim(reviewer=dan).pk == source
    services.decide(item_id=source, reviewer=dan, approve=True)
    gold = services.mark_gold(item_id=source, operator=operator, expected_decision="approve")
    dan.is_active = False
    dan.save()
    services.policy_update(user=None, changes={"gold_rate": 1.0})
    review_quality.forget_gold_settings()
    # (the reviewers exist first: a copy is placed only where someone could be shown it)
    ann, ben = make_user("ann", "reviewer"), make_user("ben", "reviewer")
    copies = [admit_item().item.pk + 1 for _ in range(2)]
    assert all(ReviewItem.all_objects.get(pk=pk).gold_id == gold.pk for pk in copies)
    now = timezone.now()

    def claimed_by(pk: int, who: Any) -> None:
        ReviewItem.all_objects.filter(pk=pk).update(
            status="claimed", lease_holder=who, claimed_at=now, lease_expires_at=now + timedelta(minutes=5)
        )

    # Ann's claim is serving the gold item in the first copy: it holds the
    # gold item's lock and has not committed yet.
    holding, failed = threading.Event(), []

    def anns_claim() -> None:
        try:
            with transaction.atomic():
                GoldItem.objects.select_for_update().get(pk=gold.pk)
                claimed_by(copies[0], ann)
                holding.set()
                time.sleep(1.0)
        except Exception as exc:  # noqa: BLE001 - reported below, in the test's thread
            failed.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=anns_claim)
    thread.start()
    assert holding.wait(10)
    claimed_by(copies[1], ben)  # ben's claim took the second copy meanwhile
    served = review_quality.fill_copy(ReviewItem.all_objects.get(pk=copies[1]), ben)
    thread.join(10)
    assert not failed and not thread.is_alive()
    # The only gold item is the first copy's now: the second has nothing to show ben.
    assert served is False
