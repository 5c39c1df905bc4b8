"""What docs/API.md says about how long a producer waits for a verdict at
most holds the numbers the code uses: the undo window's default, the
outbox sweep's period and grace, and the client's longest poll."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from django.conf import settings

from reviewqueue import webhooks
from reviewqueue.client import Client

ROOT = Path(__file__).resolve().parents[3]


def _api_md() -> str:
    return " ".join((ROOT / "docs" / "API.md").read_text().split())


def test_the_undo_windows_default_is_the_one_documented() -> None:
    source = (ROOT / "reviewqueue" / "settings.py").read_text()
    default = int(re.search(r'envint\("REVIEWQUEUE_UNDO_SECONDS", (\d+)\)', source).group(1))
    assert f"`REVIEWQUEUE_UNDO_SECONDS` ({default} by default)" in _api_md()


def test_the_webhooks_longest_wait_is_the_sweeps_period_and_grace() -> None:
    period = int(settings.CELERY_BEAT_SCHEDULE["sweep-webhooks"]["schedule"].total_seconds())
    grace = webhooks.SWEEP_GRACE_SECONDS
    assert f"the outbox sweep (every {period} s, after a {grace} s grace)" in _api_md()
    assert f"so at most the window plus {period + grace} s" in _api_md()


def test_the_clients_longest_poll_is_the_one_documented() -> None:
    longest = inspect.signature(Client.wait_for_verdict).parameters["max_interval"].default
    assert f"(`max_interval`, {longest:g} s by default)" in _api_md()
