"""The red line's sandbox seen from the product: a producer's hostile check on
a real worker reads nothing, and where the sandbox cannot run, tasks with
checks are refused (API), runs fail (worker) and the dashboard says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from loops import sandbox
from reviewqueue.models import LoopRun
from reviewqueue.tasks.loops import run_loop
from reviewqueue.tokens import issue_token

from ..worker_helpers import Workers, finished, publishing_to, wait_for

SECRET = "worker-secret-key-that-must-not-leak-0123456789abcdef"
# The probe's own check: read the worker's SECRET_KEY from its parent's
# environment, or from any process the check can see. It passes only if found.
STEAL = (
    "import glob, os\n"
    "seen = b''\n"
    "for path in ['/proc/%d/environ' % os.getppid(), '/proc/1/environ', *glob.glob('/proc/*/environ')]:\n"
    "    try:\n"
    "        seen += open(path, 'rb').read()\n"
    "    except OSError:\n"
    "        pass\n"
    f"assert b'{SECRET}' in seen\n"
)
TASK = {
    "id": "steal",
    "description": "Write is_even(n)",
    "kind": "verifiable",
    "checks": [{"id": "c1", "code": STEAL}],
}


@pytest.fixture
def auth(db: None) -> dict[str, str]:
    _, plain = issue_token(name="producer-x", scopes=["tasks"])
    return {"Authorization": f"Bearer {plain}"}


@pytest.fixture
def no_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sandbox.MODE_ENV, raising=False)
    monkeypatch.setenv(sandbox.BWRAP_ENV, "/nonexistent/bwrap")


def _post(client: Any, body: Any, headers: dict[str, str]) -> Any:
    return client.post("/api/tasks", data=json.dumps(body), content_type="application/json", headers=headers)


def test_the_api_refuses_checks_when_the_sandbox_cannot_run(
    client: Any, auth: dict[str, str], no_bubblewrap: None
) -> None:
    response = _post(client, {"task": TASK, "run_id": "refused-1"}, auth)
    assert response.status_code == 503
    body = response.json()
    assert body["error"] == "sandbox_unavailable"
    assert "not sandboxed" in body["detail"] and "bubblewrap" in body["detail"]
    assert not LoopRun.objects.filter(run_id="refused-1").exists()


def test_the_api_refuses_checks_in_the_unsandboxed_mode_too(
    client: Any, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sandbox.MODE_ENV, "none")
    response = _post(client, {"task": TASK, "run_id": "refused-2"}, auth)
    assert response.status_code == 503
    assert "REDLINE_SANDBOX=none" in response.json()["detail"]


def test_a_run_fails_closed_when_the_sandbox_cannot_run(db: None, no_bubblewrap: None) -> None:
    for _ in range(2):  # safe to run twice
        outcome = run_loop.run(task=TASK, run_id="closed-1")
    assert outcome == "failed"
    run = LoopRun.objects.get(run_id="closed-1")
    assert run.outcome == "failed" and "not sandboxed" in run.error


def test_the_dashboard_shows_a_banner_when_the_red_line_is_not_sandboxed(
    client: Client, operator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    client.force_login(operator)
    monkeypatch.delenv(sandbox.MODE_ENV, raising=False)
    assert 'id="sandbox-banner"' not in client.get("/ops/").content.decode()
    monkeypatch.setenv(sandbox.MODE_ENV, "none")
    page = client.get("/ops/").content.decode()
    assert 'id="sandbox-banner"' in page and "not sandboxed" in page


def test_the_dashboard_says_sandboxed_when_bubblewrap_runs(
    client: Client, operator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the deployed stack's smoke test reads: the positive statement, not only a missing banner."""
    client.force_login(operator)
    monkeypatch.delenv(sandbox.MODE_ENV, raising=False)
    assert sandbox.status().sandboxed, sandbox.status().reason
    page = client.get("/ops/").content.decode()
    assert 'id="sandbox-status"' in page and "sandboxed (bubblewrap)" in page
    monkeypatch.setenv(sandbox.MODE_ENV, "none")
    assert 'id="sandbox-status"' not in client.get("/ops/").content.decode()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_hostile_check_on_a_real_worker_reads_no_secret(broker_url: str, tmp_path: Path) -> None:
    _, plain = issue_token(name="producer-x", scopes=["tasks"])
    workers = Workers(broker_url, tmp_path, SECRET_KEY=SECRET)
    try:
        workers.start(concurrency=1)
        with publishing_to(broker_url):
            response = _post(Client(), {"task": TASK, "run_id": "steal-1"}, {"Authorization": f"Bearer {plain}"})
        assert response.status_code == 201, response.content
        wait_for(lambda: finished("steal-1"), timeout=90)
    finally:
        workers.kill_all()
    run = LoopRun.objects.get(run_id="steal-1")
    # The check ran (not refused, not failed) and found nothing: never converged.
    assert run.outcome != "auto_passed", run.outcome
    assert run.outcome in {"enqueued", "filtered", "shed"}, (run.outcome, run.error)
