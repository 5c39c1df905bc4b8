"""The LangGraph round trip as it runs in production: a graph with a fake
agent node is started in one process and pauses on review; a reviewer signed
in to the review page in Chromium edits and approves the output; a real
Celery worker delivers the signed webhook to a receiver in another process,
which resumes the graph from its SQLite checkpoint. The right thread resumes,
with the reviewer's edited output, and once: the same event delivered again
(an operator's redelivery, through the worker) resumes nothing.

Runs on PostgreSQL + Redis when DATABASE_URL and REDIS_URL are set, else on
SQLite and the embedded broker."""

from __future__ import annotations

import json
import os
import queue
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from reviewqueue import webhooks
from reviewqueue.client import Client
from reviewqueue.models import ReviewItem, Verdict, WebhookDelivery
from reviewqueue.tokens import issue_token
from tests.browser.helpers import card_item, start, wait_for_card_change
from tests.integrations.langgraph_helpers import EXAMPLE, ROOT, load_example
from tests.reviewqueue.conftest import broker_url
from tests.reviewqueue.worker_helpers import Workers, free_port, publishing_to, wait_for

__all__ = ["broker_url"]

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

EDITED = "def is_even(n):\n    return n % 2 == 0  # reviewed\n"


@pytest.fixture(autouse=True)
def _no_login_limit(settings: Any) -> None:
    settings.RATELIMIT_ENABLE = False


class Lines:
    """A subprocess's stdout read line by line in a thread, as JSON."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, args=(proc.stdout,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            if line.strip().startswith("{"):
                self.lines.put(json.loads(line))

    def next(self, timeout: float = 90) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line from the process within {timeout} s; so far {self.seen}") from None
        self.seen.append(line)
        return line


def example(command: str, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE), command, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.fixture
def system(live_server: Any, broker_url: str, tmp_path: Path, settings: Any) -> Iterator[dict[str, Any]]:
    """A producer token with a webhook secret, a worker delivering webhooks,
    and the example's webhook receiver (serve) in a process of its own."""
    port = free_port()
    host = f"127.0.0.1:{port}"
    settings.WEBHOOK_ALLOWED_HOSTS = [host]
    token, plain = issue_token(name="graph-agent", scopes=["outputs"], webhook_url=f"http://{host}/")
    env = {
        "REVIEWQUEUE_URL": live_server.url,
        "REVIEWQUEUE_TOKEN": plain,
        "REVIEWQUEUE_WEBHOOK_SECRET": token.webhook_secret,
    }
    db = str(tmp_path / "graph.sqlite")
    workers = Workers(broker_url, tmp_path, WEBHOOK_ALLOWED_HOSTS=host)
    with publishing_to(broker_url):
        workers.start(concurrency=2)
        receiver = example("serve", env, "--db", db, "--listen", host)
        try:
            out = Lines(receiver)
            assert out.next(60)["event"] == "listening"
            yield {"env": env, "db": db, "receiver": out, "callback": f"http://{host}/"}
        finally:
            receiver.kill()
            receiver.wait(10)
            workers.kill_all()


def run_until_paused(system: dict[str, Any], thread_id: str) -> int:
    """Start a thread of the graph in a process of its own; it pauses on
    review and exits. The item it waits for."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "start", "--db", system["db"], "--thread", thread_id],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **system["env"]},
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (line,) = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    assert line["event"] == "paused" and line["thread_id"] == thread_id, line
    return int(line["item_id"])


def graph_state(system: dict[str, Any], thread_id: str) -> Any:
    """The thread's state as its checkpoint holds it, read here."""
    connection = sqlite3.connect(system["db"], check_same_thread=False)
    try:
        with Client("http://unused.invalid", "t") as client:
            graph = load_example().build_graph(client, SqliteSaver(connection))
            return graph.get_state({"configurable": {"thread_id": thread_id}})
    finally:
        connection.close()


def test_a_paused_graph_is_reviewed_in_the_browser_and_resumed_once_elsewhere(
    system: dict[str, Any], new_context: Any, login: Any, make_user: Any, artifacts: Path
) -> None:
    waiting = run_until_paused(system, "thread-review-me")
    other = run_until_paused(system, "thread-not-yet")
    item = ReviewItem.objects.get(pk=waiting)
    assert (item.source_run_id, item.producer, item.callback_url) == (
        "langgraph:thread-review-me",
        "graph-agent",
        system["callback"],
    )
    assert item.idempotency_key.startswith("langgraph:thread-review-me:review:")

    make_user("rita", "reviewer")
    page = new_context(viewport={"width": 1280, "height": 900}).new_page()
    login(page, "rita")
    start(page)
    assert card_item(page) == str(waiting), "the first paused thread's item is first in the queue"
    page.keyboard.press("e")
    page.locator("#edited-output").fill(EDITED)
    page.screenshot(path=str(artifacts / "langgraph-review-edit-1280px.png"), full_page=True)
    page.keyboard.press("Control+Enter")
    wait_for_card_change(page, str(waiting))
    assert card_item(page) == str(other)
    assert Verdict.objects.get(item_id=waiting).decision == "edit"

    # The worker delivers item.decided; the receiver's process resumes the graph.
    resumed = system["receiver"].next(120)
    assert (resumed["event"], resumed["thread_id"], resumed["item_id"]) == ("resumed", "thread-review-me", waiting)
    assert (resumed["decision"], resumed["result"], resumed["paused"]) == ("edit", EDITED, False)
    delivery = WebhookDelivery.objects.get(item_id=waiting, event_type="item.decided")
    wait_for(lambda: WebhookDelivery.objects.get(pk=delivery.pk).status == "delivered", 60, "the first delivery")

    # The same event again, through the worker: answered, acted on by nothing.
    assert webhooks.redeliver([delivery.pk]) == 1
    again = system["receiver"].next(120)
    assert (again["event"], again["item_id"]) == ("not_waiting", waiting)

    def delivered_twice() -> bool:
        row = WebhookDelivery.objects.get(pk=delivery.pk)
        return row.attempts >= 2 and row.status == "delivered"

    wait_for(delivered_twice, 60, "the second delivery")

    finished = graph_state(system, "thread-review-me")
    assert (finished.next, finished.values["result"], finished.values["decision"]) == ((), EDITED, "edit")
    still = graph_state(system, "thread-not-yet")
    assert [p.value["reviewqueue_item_id"] for p in still.interrupts] == [other]
    assert ReviewItem.objects.filter(producer="graph-agent").count() == 2, "the resumed node's push was a duplicate"
