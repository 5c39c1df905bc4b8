"""Fixtures for webhook tests: a producer token with a signing secret, an item
with a callback URL to a real loopback receiver, and announcements captured
instead of published (the in-process tests call delivery themselves)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reviewqueue import services
from reviewqueue.tokens import issue_token

from ..worker_helpers import publishing_to
from .deployment import Deployment
from .receiver import Receiver, receiving


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    with receiving() as server:
        settings.WEBHOOK_ALLOWED_HOSTS = [server.host]
        yield server


@pytest.fixture
def announced(monkeypatch: pytest.MonkeyPatch, settings: Any) -> list[int]:
    """Delivery pks that would have been sent to the broker. Verdicts here
    are final at once (no undo window): these tests are about sending an
    event; when a verdict's event becomes due is test_final_verdicts.py's."""
    settings.REVIEWQUEUE_UNDO_SECONDS = 0
    sent: list[int] = []

    def announce(pk: int, countdown: float | None = None) -> None:
        sent.append(pk)

    monkeypatch.setattr("reviewqueue.services.outbox.announce", announce)
    monkeypatch.setattr("reviewqueue.webhooks.announce", announce)
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


@pytest.fixture
def deploy(broker_url: str, tmp_path: Path, reviewer: Any, settings: Any) -> Iterator[Callable[..., Deployment]]:
    made: list[Deployment] = []

    def make(*receivers: Receiver, **env: str) -> Deployment:
        settings.WEBHOOK_ALLOWED_HOSTS = [r.host for r in receivers]
        issue_token(name="acme", scopes=["outputs"], webhook_url=receivers[0].url)
        deployment = Deployment(broker_url, tmp_path, reviewer, list(receivers), **env)
        made.append(deployment)
        return deployment

    with publishing_to(broker_url):
        yield make
    for deployment in made:
        deployment.stop()
