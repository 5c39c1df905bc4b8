"""Real receivers for alert tests: an SMTP server (aiosmtpd) and an HTTP
receiver on loopback, and the broker announcements captured instead of sent."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from ..webhooks.receiver import Receiver, receiving
from ..worker_helpers import free_port


@dataclass
class Mailbox:
    """What the SMTP server on loopback received, one message per entry."""

    port: int
    messages: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self.lock:
            self.messages.append(envelope.content.decode("utf-8", "replace"))
        return "250 OK"

    @property
    def apprise_url(self) -> str:
        return f"mailto://127.0.0.1:{self.port}?from=reviewqueue@example.org&to=oncall@example.org&mode=insecure"


@pytest.fixture
def mailbox() -> Iterator[Mailbox]:
    box = Mailbox(port=free_port())
    controller = Controller(box, hostname="127.0.0.1", port=box.port)
    controller.start()
    try:
        yield box
    finally:
        controller.stop()


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    with receiving() as server:
        settings.WEBHOOK_ALLOWED_HOSTS = [server.host]
        yield server


@pytest.fixture
def announced(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Webhook deliveries and alert evaluations that would have gone to the broker."""
    sent: list[Any] = []
    monkeypatch.setattr("reviewqueue.services.outbox.announce", sent.append)
    monkeypatch.setattr("reviewqueue.webhooks.announce", sent.append)
    monkeypatch.setattr("reviewqueue.services.depth.announce_mode_change", lambda pk: sent.append(("alerts", pk)))
    return sent
