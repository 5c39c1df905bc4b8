"""The async LangGraph round trip as it runs in production: a graph with an
async fake agent node, run with ``ainvoke``, is started in one process and
pauses on review; a reviewer, signed in, claims and edits the output through
the review pages; a real Celery worker delivers the signed webhook to the
ASGI receiver (uvicorn) of another process, whose ``AsyncResumer`` resumes the
graph from its async SQLite checkpoint. The right thread resumes, with the
reviewer's edited output, once: the same event delivered again (an
operator's redelivery, through the worker) resumes nothing. The item carries
the thread in its metadata, which the producer reads back and the reviewer
never sees.

Runs on PostgreSQL + Redis when DATABASE_URL and REDIS_URL are set, else on
SQLite and the embedded broker."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from django.test import Client
from django.urls import reverse
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from reviewqueue import webhooks
from reviewqueue.client import AsyncClient
from reviewqueue.models import ReviewItem, Verdict, WebhookDelivery
from reviewqueue.tokens import issue_token
from tests.client.flavours import run_async
from tests.integrations.langgraph_helpers import ROOT
from tests.reviewqueue.conftest import broker_url
from tests.reviewqueue.worker_helpers import Workers, free_port, publishing_to, wait_for

from .test_langgraph_async import EXAMPLE, load_async_example

__all__ = ["broker_url"]

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

EDITED = "def is_even(n):\n    return n % 2 == 0  # reviewed, async\n"


@pytest.fixture(scope="session", autouse=True)
def _plain_http_live_server() -> None:
    # As tests/browser/conftest.py: the live server builds its middleware once,
    # before the per-test settings run; without this it redirects to HTTPS.
    from django.conf import settings

    settings.SECURE_SSL_REDIRECT = False


class Lines:
    """A subprocess's stdout read line by line in a thread, as JSON."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.other: list[str] = []  # what else it printed (a traceback), for a failure's message
        threading.Thread(target=self._read, args=(proc.stdout,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            if line.strip().startswith("{"):
                self.lines.put(json.loads(line))
            else:
                self.other.append(line)

    def next(self, timeout: float = 90) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"no line from the process within {timeout} s; so far {self.seen}; {self.other[-20:]}"
            ) from None
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
    and the async example's ASGI receiver (serve) in a process of its own."""
    settings.REVIEWQUEUE_UNDO_SECONDS = 2  # the verdict is final, and its event due, 2 s after it is given
    port = free_port()
    host = f"127.0.0.1:{port}"
    settings.WEBHOOK_ALLOWED_HOSTS = [host]
    token, plain = issue_token(name="async-graph-agent", scopes=["outputs"], webhook_url=f"http://{host}/")
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
            yield {"env": env, "db": db, "receiver": out, "token": plain, "url": live_server.url}
        finally:
            receiver.kill()
            receiver.wait(10)
            workers.kill_all()


def run_until_paused(system: dict[str, Any], thread_id: str) -> int:
    """Start a thread of the async graph in a process of its own; it pauses
    on review and exits. The item it waits for."""
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
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("{")]
    paused = json.loads(line)
    assert paused["event"] == "paused" and paused["thread_id"] == thread_id, paused
    return int(paused["item_id"])


def graph_state(system: dict[str, Any], thread_id: str) -> Any:
    """The thread's state as its checkpoint holds it, read here with aget_state."""

    async def read() -> Any:
        async with (
            AsyncClient("http://unused.invalid", "t") as client,
            AsyncSqliteSaver.from_conn_string(system["db"]) as saver,
        ):
            graph = load_async_example().build_graph(client, saver)
            return await graph.aget_state({"configurable": {"thread_id": thread_id}})

    return run_async(read())


def test_an_async_graph_is_reviewed_and_resumed_once_elsewhere_by_the_webhook(
    system: dict[str, Any], client: Client, make_user: Any
) -> None:
    waiting = run_until_paused(system, "async-thread-review-me")
    other = run_until_paused(system, "async-thread-not-yet")
    item = ReviewItem.objects.get(pk=waiting)
    assert item.metadata_object()["langgraph"]["thread_id"] == "async-thread-review-me"
    assert item.metadata_object()["agent"] == "async-example"

    # A reviewer, signed in: claim the next item, edit it, approve. The card shows no metadata.
    client.force_login(make_user("rita", "reviewer"))
    card = client.post(reverse("review:next"), follow=True).content.decode()
    assert "async-thread-review-me" not in card and "async-example" not in card
    answer = client.post(reverse("review:decide", args=[waiting]), {"decision": "edit", "edited_output": EDITED})
    assert answer.status_code in (200, 302), answer.content[:300]
    assert Verdict.objects.get(item_id=waiting).decision == "edit"

    def told() -> str:
        return repr(list(WebhookDelivery.objects.values("event_type", "status", "attempts", "last_error")))

    # The worker delivers item.decided once the verdict is final; the receiver's process resumes the graph.
    try:
        resumed = system["receiver"].next(120)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; deliveries: {told()}") from None
    assert (resumed["event"], resumed["thread_id"], resumed["item_id"]) == (
        "resumed",
        "async-thread-review-me",
        waiting,
    )
    assert (resumed["decision"], resumed["result"], resumed["paused"]) == ("edit", EDITED, False)
    delivery = WebhookDelivery.objects.get(item_id=waiting, event_type="item.decided")
    wait_for(lambda: WebhookDelivery.objects.get(pk=delivery.pk).status == "delivered", 60, "the first delivery")

    # The same event again, through the worker: answered, acted on by nothing.
    assert webhooks.redeliver([delivery.pk]) == 1
    again = system["receiver"].next(120)
    assert (again["event"], again["item_id"]) == ("not_waiting", waiting)

    finished = graph_state(system, "async-thread-review-me")
    assert (finished.next, finished.values["result"], finished.values["decision"]) == ((), EDITED, "edit")
    still = graph_state(system, "async-thread-not-yet")
    assert [p.value["reviewqueue_item_id"] for p in still.interrupts] == [other]
    assert ReviewItem.objects.filter(producer="async-graph-agent").count() == 2, "the resumed push was a duplicate"

    # The producer reads the same metadata back on the item, with the verdict.
    async def read_item() -> Any:
        async with AsyncClient(system["url"], system["token"]) as rq:
            return await rq.item(waiting)

    told = run_async(read_item())
    assert (told.status, told.metadata["langgraph"]["thread_id"]) == ("approved", "async-thread-review-me")
