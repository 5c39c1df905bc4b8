"""Arrange steps shared by the service tests: a smaller queue, a claimed item,
a moment after its lease, a run of verdicts."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from reviewqueue import services
from reviewqueue.models import Queue, ReviewItem


@pytest.fixture
def small_queue(db: None) -> Callable[..., Queue]:
    """Set the queue's capacity (and any other policy field) through the service."""

    def shrink(capacity: int = 10, **fields: Any) -> Queue:
        return services.policy_update(user=None, changes={"capacity": capacity, **fields})

    return shrink


@pytest.fixture
def claimed(admit_item: Callable[..., Any], reviewer: Any) -> ReviewItem:
    """One admitted item, claimed by ``reviewer`` under a fresh lease."""
    admit_item()
    item = services.claim(reviewer=reviewer)
    assert item is not None
    return item


@pytest.fixture
def lease_over(claimed: ReviewItem) -> datetime:
    """A moment just after the claimed item's lease ran out."""
    assert claimed.lease_expires_at is not None
    return claimed.lease_expires_at + timedelta(seconds=1)


@pytest.fixture
def decide_many(admit_item: Callable[..., Any], reviewer: Any) -> Callable[..., None]:
    """Admit, claim and decide one item per entry of ``decisions`` as
    ``reviewer``: True approves, False rejects with ``label``."""

    def decide(decisions: list[bool], label: str = "code_error") -> None:
        for approve in decisions:
            admit_item()
            item = services.claim(reviewer=reviewer)
            services.decide(item_id=item.pk, reviewer=reviewer, approve=approve, reason_label="" if approve else label)

    return decide
