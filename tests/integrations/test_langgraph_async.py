"""The LangGraph adapter for async graphs (``arequest_review``,
``AsyncResumer``) with the real langgraph package: async nodes, a graph run
with ``ainvoke`` on the async SQLite checkpointer, against a scripted server
(tests/client/stub.py). Each verdict resumes the node with its value through
the ASGI receiver, a webhook delivered twice at once resumes the graph once,
and the thread travels in the item's metadata. The round trip with a live
server and a real worker is in test_langgraph_async_round_trip.py."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from reviewqueue.client import AsyncClient
from reviewqueue.integrations.langgraph import AsyncResumer, Ledger, WebhookReceiver
from tests.client.flavours import run_async
from tests.client.stub import Answer, scripted
from tests.integrations.langgraph_helpers import GUESS, ROOT, SECRET, event, signed, wsgi_post

from .test_langgraph import FIRST, VERDICTS, enqueued

EXAMPLE = ROOT / "docs" / "examples" / "langgraph_review_async.py"


def load_async_example() -> ModuleType:
    """docs/examples/langgraph_review_async.py as a module (it is a script)."""
    name = "langgraph_review_async_example"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLE)
        assert spec is not None and spec.loader is not None
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


class Rig:
    """The async example graph on an async SQLite checkpoint, its resumer and
    receiver, all on the event loop of one ``run_async`` call."""

    def __init__(self, client: AsyncClient, saver: Any, tmp_path: Path) -> None:
        self.graph = load_async_example().build_graph(client, saver)
        self.resumer = AsyncResumer(self.graph, ledger=Ledger(tmp_path / "resumed.sqlite"))
        self.receiver = WebhookReceiver(SECRET, self.resumer.on_event)

    async def start(self, thread_id: str) -> dict[str, Any]:
        return await self.graph.ainvoke({"task": "Write is_even"}, {"configurable": {"thread_id": thread_id}})

    async def deliver(self, body: bytes, **signing: Any) -> tuple[int, dict[str, Any]]:
        """One POST through the ASGI app, as an ASGI server calls it."""
        sent: list[dict[str, Any]] = []
        messages = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> dict[str, Any]:
            return messages.pop(0)

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        raw = [(k.lower().encode(), v.encode()) for k, v in signed(body, **signing).items()]
        await self.receiver.asgi({"type": "http", "method": "POST", "headers": raw}, receive, send)
        return sent[0]["status"], json.loads(sent[1]["body"])

    async def state(self, thread_id: str) -> Any:
        return await self.graph.aget_state({"configurable": {"thread_id": thread_id}})


def with_rig(url: str, tmp_path: Path, body: Callable[[Rig], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with (
            AsyncClient(url, "t") as client,
            AsyncSqliteSaver.from_conn_string(str(tmp_path / "graph.sqlite")) as saver,
        ):
            return await body(Rig(client, saver, tmp_path))

    return run_async(main())


@pytest.mark.parametrize("verdict", sorted(VERDICTS))
def test_each_verdict_resumes_the_paused_async_node_with_its_value(tmp_path: Path, verdict: str) -> None:
    data, decision, result = VERDICTS[verdict]

    async def body(rig: Rig) -> tuple[Any, Any, Any]:
        paused = await rig.start("t-1")
        answer = await rig.deliver(event(7, "t-1", **data))
        return paused, answer, await rig.state("t-1")

    with scripted(enqueued(7), enqueued(7, outcome="duplicate")) as server:
        paused, answer, state = with_rig(server.url, tmp_path, body)
    assert [p.value["reviewqueue_item_id"] for p in paused["__interrupt__"]] == [7]
    assert answer == (200, {"event_id": "evt_1", "outcome": "resumed"})
    assert (state.next, state.values["decision"], state.values["result"]) == ((), decision, result)
    first, again = (r.json() for r in server.requests)
    assert first == again, "the resumed node pushes the same output under the same key"


def test_the_push_names_the_thread_in_the_items_metadata(tmp_path: Path) -> None:
    async def body(rig: Rig) -> None:
        await rig.start("t-meta")

    with scripted(enqueued(7)) as server:
        with_rig(server.url, tmp_path, body)
    pushed = server.requests[0].json()
    assert pushed["metadata"] == {
        "agent": "async-example",
        "langgraph": {"thread_id": "t-meta", "checkpoint_ns": pushed["metadata"]["langgraph"]["checkpoint_ns"],
                      "key": "turn-1"},
    }  # fmt: skip
    assert pushed["metadata"]["langgraph"]["checkpoint_ns"].startswith("review:")
    # kept as before, so a thread paused by an earlier version pushes the same key on resume
    assert pushed["source_run_id"] == "langgraph:t-meta"
    assert pushed["idempotency_key"] == f"langgraph:t-meta:{pushed['metadata']['langgraph']['checkpoint_ns']}:turn-1"


def test_the_thread_in_the_metadata_resumes_even_without_a_run_id(tmp_path: Path) -> None:
    long_thread = "t-" + "x" * 250  # too long for source_run_id: only the metadata names it

    async def body(rig: Rig) -> tuple[Any, Any]:
        await rig.start(long_thread)
        envelope = json.loads(event(7, long_thread, decision="approve"))
        envelope["run_id"] = None
        envelope["data"]["metadata"] = {"langgraph": {"thread_id": long_thread}}
        answer = await rig.deliver(json.dumps(envelope).encode())
        return answer, await rig.state(long_thread)

    with scripted(enqueued(7), enqueued(7, outcome="duplicate")) as server:
        answer, state = with_rig(server.url, tmp_path, body)
    assert answer[1]["outcome"] == "resumed" and state.values["result"] == FIRST
    first, again = (r.json() for r in server.requests)
    assert "source_run_id" not in first and len(first["idempotency_key"]) <= 200
    assert first["idempotency_key"] == again["idempotency_key"], "the digest key is the same on resume"


def test_a_webhook_delivered_twice_at_once_resumes_the_async_graph_once(tmp_path: Path) -> None:
    async def body(rig: Rig) -> tuple[list[Any], Any, Any]:
        await rig.start("t-1")
        payload = event(7, "t-1", decision="approve")
        answers = await asyncio.gather(*(rig.deliver(payload) for _ in range(3)))
        return list(answers), await rig.deliver(payload), await rig.state("t-1")

    # Only two pushes are scripted: a second resume would push a third time and fail.
    with scripted(enqueued(7), enqueued(7, outcome="duplicate")) as server:
        answers, later, state = with_rig(server.url, tmp_path, body)
    assert sorted(a[1]["outcome"] for a in answers).count("resumed") == 1
    assert {a[0] for a in answers} == {200}
    assert later == (200, {"event_id": "evt_1", "outcome": "not_waiting"})
    assert len(server.requests) == 2 and state.values["result"] == FIRST


def test_the_async_resumer_polls_with_the_async_client(tmp_path: Path) -> None:
    pending = Answer(200, {"item_id": 7, "status": "pending", "awaiting": "review"})
    rejected = Answer(
        200,
        {"item_id": 7, "status": "rejected", "decision": "reject",
         "verdict": {"decision": "reject", "reason_label": "unclear", "note": "why", "edited_output": None}},
    )  # fmt: skip

    async def body(rig: Rig) -> tuple[Any, Any, Any]:
        await rig.start("t-1")
        async with AsyncClient(server.url, "t") as client:
            first = await rig.resumer.poll(client, ["t-1"])
            second = await rig.resumer.poll(client, ["t-1"])
        return first, second, await rig.state("t-1")

    with scripted(enqueued(7), pending, rejected, enqueued(7, outcome="duplicate")) as server:
        first, second, state = with_rig(server.url, tmp_path, body)
    assert first == [] and [r.outcome for r in second] == ["resumed"]
    assert state.values["result"] == "rejected: unclear why"


def test_forged_deliveries_reach_no_async_handler_and_wsgi_refuses_one(tmp_path: Path) -> None:
    async def body(rig: Rig) -> tuple[Any, Any, Any]:
        await rig.start("t-1")
        payload = event(7, "t-1", decision="approve")
        forged = await rig.deliver(payload, secret=GUESS)
        # An async handler cannot run inside a WSGI server's thread: a 500, so the event comes again.
        through_wsgi = await asyncio.to_thread(wsgi_post, rig.receiver.wsgi, signed(payload), payload)
        return forged, through_wsgi, await rig.state("t-1")

    with scripted(enqueued(7)) as server:
        forged, through_wsgi, state = with_rig(server.url, tmp_path, body)
    assert forged == (400, {"error": "signature_mismatch"})
    assert through_wsgi == (500, {"error": "handler_is_async"})
    assert len(state.interrupts) == 1 and len(server.requests) == 1
