"""Fixtures for webhook tests: a producer token with a signing secret, an item
with a callback URL to a real loopback receiver, and announcements captured
instead of published (the in-process tests call delivery themselves)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reviewqueue import services
from reviewqueue.tokens import issue_token

from .receiver import Receiver, receiving


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    with receiving() as server:
        settings.WEBHOOK_ALLOWED_HOSTS = [server.host]
        yield server


@pytest.fixture
def announced(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Delivery pks that would have been sent to the broker."""
    sent: list[int] = []
    monkeypatch.setattr("reviewqueue.services.outbox.announce", sent.append)
    monkeypatch.setattr("reviewqueue.webhooks.announce", sent.append)
    return sent


@pytest.fixture
def producer_token(db: None, receiver: Receiver) -> tuple[Any, str]:
    token, plain = issue_token(name="acme", scopes=["outputs", "tasks"], webhook_url=receiver.url)
    return token, plain


@pytest.fixture
def decided(
    admit_item: Callable[..., Any], reviewer: Any, receiver: Receiver, producer_token: Any, announced: list[int]
) -> Callable[..., Any]:
    """Admit an item for producer acme with the receiver as its callback, claim
    it and decide it; returns the verdict."""

    def decide(approve: bool = True, **admit: Any) -> Any:
        item = admit_item(producer="acme", callback_url=receiver.url, **admit).item
        claimed = services.claim(reviewer=reviewer)
        assert claimed is not None and claimed.pk == item.pk
        return services.decide(
            item_id=item.pk, reviewer=reviewer, approve=approve, reason_label="" if approve else "logic_error", note="n"
        )

    return decide
