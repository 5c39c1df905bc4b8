"""What an admission answers, shared by both admission paths.

A plain value; no database access, no lock.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..models import ReviewItem


@dataclass(frozen=True)
class AdmitResult:
    outcome: str  # "enqueued" | "shed" | "duplicate" | "filtered"
    item: ReviewItem
    mode: str
    shed_item: ReviewItem | None = None
    depth: int = 0  # the queue's depth after this admission
    capacity: int = 0  # the queue's capacity
    queue: str = ""  # the slug of the item's queue
