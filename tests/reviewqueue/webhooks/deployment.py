"""Webhook workers and beat for end-to-end tests: celery worker processes and
celery beat (the webhook sweep every 5 s) sharing one environment with the
test process's database and broker, and a reviewer making verdicts here on
items whose callback URLs point at the test's receivers."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from reviewqueue import services
from reviewqueue.models import EventType, WebhookDelivery
from reviewqueue.services.outbox import record_event

from ..worker_helpers import ROOT, Workers, database_url
from .receiver import Receiver

# Short retries, so a test sees several; the defaults are in settings.py.
FAST_RETRIES = {"WEBHOOK_RETRY_FIRST_SECONDS": "1", "WEBHOOK_RETRY_MAX_SECONDS": "4", "LOG_LEVEL": "INFO"}


def beat(broker_url: str, log_dir: Path, env: dict[str, str]) -> subprocess.Popen:
    """celery beat in its own process: the webhook sweep every 5 s."""
    full = {**os.environ, "DATABASE_URL": database_url(), "CELERY_BROKER_URL": broker_url, **env}
    log = open(log_dir / "beat.log", "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "reviewqueue.celery", "beat", "-s", str(log_dir / "beat-schedule")],
        cwd=ROOT,
        env=full,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    return proc


class Deployment:
    """Workers and beat sharing one environment, and a reviewer making verdicts
    here on items whose callback URLs point at the test's receivers."""

    def __init__(self, broker_url: str, log_dir: Path, reviewer: Any, receivers: list[Receiver], **env: str) -> None:
        hosts = ",".join(r.host for r in receivers)
        self.env = {**FAST_RETRIES, "WEBHOOK_ALLOWED_HOSTS": hosts, **env}
        self.workers = Workers(broker_url, log_dir, **self.env)
        self.broker_url, self.log_dir, self.reviewer = broker_url, log_dir, reviewer
        self.beat: subprocess.Popen | None = None
        self.n = 0

    def start(self, concurrency: int = 4) -> subprocess.Popen:
        if self.beat is None:
            self.beat = beat(self.broker_url, self.log_dir, self.env)
        return self.workers.start(concurrency=concurrency)

    def stop(self) -> None:
        self.workers.kill_all()
        if self.beat is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.beat.pid, signal.SIGKILL)
            self.beat.wait(timeout=10)

    def verdict(self, url: str, approve: bool = True) -> WebhookDelivery:
        """Admit, claim and decide one item whose events go to ``url``."""
        self.n += 1
        item = services.admit(
            idempotency_key=f"hook-{self.n}",
            task_description="t",
            final_output="o",
            cutoff_reason="step_limit",
            producer="acme",
            callback_url=url,
        ).item
        assert services.claim(reviewer=self.reviewer).pk == item.pk
        services.decide(
            item_id=item.pk, reviewer=self.reviewer, approve=approve, reason_label="" if approve else "unclear"
        )
        return WebhookDelivery.objects.get(item=item, event_type="item.decided")

    def event(self, url: str) -> WebhookDelivery:
        """One event for ``url`` about an item of its own (an ``item.shed``
        written straight to the outbox, as the server writes it, whatever URL
        check it passed): each is ordered only after itself, so several may
        be in flight at once."""
        self.n += 1
        item = services.admit(
            idempotency_key=f"event-{self.n}",
            task_description="t",
            final_output="o",
            cutoff_reason="step_limit",
            producer="acme",
        ).item
        delivery = record_event(EventType.ITEM_SHED, url=url, producer="acme", item=item, data={"priority": 0})
        assert delivery is not None
        return delivery

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for path in self.log_dir.glob("worker*.log"):
            for line in path.read_text().splitlines():
                with contextlib.suppress(ValueError):
                    lines.append(json.loads(line))
        return lines
