"""The LangGraph adapter with the real langgraph package and its SQLite
checkpointer, against a scripted server (tests/client/stub.py) for the
answers a live queue cannot be made to give on demand: each verdict resumes
the node with its value, backpressure reaches the node as a value, and a
webhook delivered twice at once resumes the graph once. The round trip with
a live server, a real worker and a reviewer in a browser is in
tests/browser/test_langgraph_review.py."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from reviewqueue.client import Client
from reviewqueue.integrations.langgraph import Ledger, Resumer, WebhookReceiver
from tests.client.flavours import run_async
from tests.client.stub import Answer, scripted
from tests.integrations.langgraph_helpers import GUESS, SECRET, event, load_example, signed, wsgi_post

FIRST = "def is_even(n):\n    return n % 2 == 0\n"


def enqueued(item_id: int, mode: str = "normal", outcome: str = "enqueued") -> Answer:
    body = {"outcome": outcome, "item_id": item_id, "queue": "default", "status": "pending", "mode": mode}
    return Answer(
        201 if outcome == "enqueued" else 200, {**body, "depth": 1, "capacity": 9, "backoff": mode != "normal"}
    )


class Rig:
    """The example graph on a SQLite checkpoint, a resumer and its receiver."""

    def __init__(self, url: str, tmp_path: Path) -> None:
        self.client = Client(url, "t")
        self.db = sqlite3.connect(tmp_path / "graph.sqlite", check_same_thread=False)
        self.graph = load_example().build_graph(self.client, SqliteSaver(self.db))
        self.resumer = Resumer(self.graph, ledger=Ledger(tmp_path / "resumed.sqlite"))
        self.receiver = WebhookReceiver(SECRET, self.resumer.on_event)

    def start(self, thread_id: str) -> dict[str, Any]:
        return self.graph.invoke({"task": "Write is_even"}, {"configurable": {"thread_id": thread_id}})

    def deliver(self, body: bytes, **signing: Any) -> tuple[int, dict[str, Any]]:
        return wsgi_post(self.receiver.wsgi, signed(body, **signing), body)

    def state(self, thread_id: str) -> Any:
        return self.graph.get_state({"configurable": {"thread_id": thread_id}})

    def close(self) -> None:
        self.client.close()
        self.db.close()


VERDICTS = {
    "approve": ({"decision": "approve", "edited": False, "note": ""}, "approve", FIRST),
    "edit": ({"decision": "approve", "edited": True, "edited_output": "def is_even(n): return not n % 2"}, "edit",
             "def is_even(n): return not n % 2"),
    "reject": ({"decision": "reject", "reason_label": "logic_error", "note": "off by one"}, "reject",
               "rejected: logic_error off by one"),
}  # fmt: skip


@pytest.mark.parametrize("verdict", sorted(VERDICTS))
def test_each_verdict_resumes_the_paused_node_with_its_value(tmp_path: Path, verdict: str) -> None:
    data, decision, result = VERDICTS[verdict]
    with scripted(enqueued(7), enqueued(7, outcome="duplicate")) as server:
        rig = Rig(server.url, tmp_path)
        paused = rig.start("t-1")
        (interrupt,) = paused["__interrupt__"]
        assert interrupt.value["reviewqueue_item_id"] == 7 and interrupt.value["output"] == FIRST
        assert rig.deliver(event(7, "t-1", **data)) == (200, {"event_id": "evt_1", "outcome": "resumed"})
        state = rig.state("t-1")
        rig.close()
    assert (state.values["decision"], state.values["result"], state.next) == (decision, result, ())
    first, again = (r.json() for r in server.requests)
    assert first["source_run_id"] == "langgraph:t-1"
    assert first["idempotency_key"].startswith("langgraph:t-1:review:") and first["idempotency_key"].endswith(":turn-1")
    assert again == first, "the resumed node pushes the same output under the same key: a duplicate"


def test_a_send_back_runs_the_agent_again_with_the_note(tmp_path: Path) -> None:
    script = [enqueued(7), enqueued(7, outcome="duplicate"), enqueued(8), enqueued(8, outcome="duplicate")]
    with scripted(*script) as server:
        rig = Rig(server.url, tmp_path)
        rig.start("t-1")
        assert rig.deliver(event(7, "t-1", "item.sent_back", note="handle n < 0"))[0] == 200
        (second,) = rig.state("t-1").interrupts
        assert second.value["reviewqueue_item_id"] == 8
        assert second.value["output"] == FIRST + "# revised: handle n < 0\n"
        rig.deliver(event(8, "t-1", event_id="evt_2", decision="approve"))
        state = rig.state("t-1")
        rig.close()
    assert (state.values["result"], state.values["turns"]) == (FIRST + "# revised: handle n < 0\n", 2)


def test_only_the_thread_the_item_names_resumes(tmp_path: Path) -> None:
    with scripted(enqueued(7), enqueued(8), enqueued(8, outcome="duplicate")) as server:
        rig = Rig(server.url, tmp_path)
        rig.start("t-1")
        rig.start("t-2")
        assert rig.deliver(event(8, "t-2", decision="approve"))[1]["outcome"] == "resumed"
        # An event naming the wrong thread for an item resumes nothing.
        assert rig.deliver(event(8, "t-1", event_id="evt_x", decision="approve"))[1]["outcome"] == "not_waiting"
        one, two = rig.state("t-1"), rig.state("t-2")
        rig.close()
    assert [i.value["reviewqueue_item_id"] for i in one.interrupts] == [7]
    assert two.next == () and two.values["result"] == FIRST


def test_a_webhook_delivered_twice_at_once_resumes_the_graph_once(tmp_path: Path) -> None:
    # Only two pushes are scripted: a second resume would push a third time and fail.
    with scripted(enqueued(7), enqueued(7, outcome="duplicate")) as server:
        rig = Rig(server.url, tmp_path)
        rig.start("t-1")
        body = event(7, "t-1", decision="approve")
        answers: list[tuple[int, dict[str, Any]]] = []
        barrier = threading.Barrier(3)

        def deliver() -> None:
            barrier.wait()
            answers.append(rig.deliver(body))

        threads = [threading.Thread(target=deliver) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        later = rig.deliver(body)
        state = rig.state("t-1")
        rig.close()
    assert sorted(a[1]["outcome"] for a in answers).count("resumed") == 1
    assert {a[0] for a in answers} == {200}, "a repeat is answered 2xx, so the server stops sending it"
    assert later == (200, {"event_id": "evt_1", "outcome": "not_waiting"})
    assert len(server.requests) == 2
    assert state.values["result"] == FIRST and rig.resumer.ledger.resumed() == [(7, "t-1")]


def test_backpressure_reaches_the_node_as_a_value(tmp_path: Path) -> None:
    held = Answer(503, {"error": "queue_full", "backoff": True}, {"Retry-After": "7"})
    with scripted(held, enqueued(9, mode="shedding", outcome="shed")) as server:
        rig = Rig(server.url, tmp_path)
        first, second = rig.start("t-held"), rig.start("t-shed")
        rig.close()
    assert (first["decision"], first["result"]) == ("held", "unreviewed (held)")
    assert (second["decision"], second["result"]) == ("shed", "unreviewed (shed)")
    assert "__interrupt__" not in first and "__interrupt__" not in second


def test_a_draft_mode_queue_is_a_value_when_the_node_asks_not_to_wait(tmp_path: Path) -> None:
    from langgraph.graph import END, START, StateGraph

    from reviewqueue.integrations.langgraph import Pressure, request_review

    def node(state: dict[str, Any]) -> dict[str, Any]:
        answer = request_review(client, task="t", output="o", wait_in_draft=False)
        assert isinstance(answer, Pressure)
        return {"seen": f"{answer.kind}:{answer.item_id}:{answer.mode}"}

    builder = StateGraph(dict)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    with scripted(enqueued(5, mode="draft")) as server, Client(server.url, "t") as client:
        graph = builder.compile(checkpointer=SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False)))
        state = graph.invoke({}, {"configurable": {"thread_id": "d"}})
    assert state == {"seen": "draft:5:draft"}


def test_the_receiver_refuses_forged_and_stale_deliveries_and_acts_on_none(tmp_path: Path) -> None:
    with scripted(enqueued(7)) as server:
        rig = Rig(server.url, tmp_path)
        rig.start("t-1")
        body = event(7, "t-1", decision="approve")
        forged = rig.deliver(body, secret=GUESS)
        stale = rig.deliver(body, age=3600)
        unsigned = wsgi_post(rig.receiver.wsgi, {}, body)
        paused = rig.state("t-1").interrupts
        rig.close()
    assert [forged[0], stale[0], unsigned[0]] == [400, 400, 400]
    assert forged[1]["error"] == "signature_mismatch" and stale[1]["error"] == "stale_timestamp"
    assert len(paused) == 1 and len(server.requests) == 1


def test_the_receiver_mounts_as_an_asgi_app(tmp_path: Path) -> None:
    with scripted(enqueued(7), enqueued(7, outcome="duplicate")) as server:
        rig = Rig(server.url, tmp_path)
        rig.start("t-1")
        body = event(7, "t-1", decision="reject", reason_label="unclear", note="why")
        sent: list[dict[str, Any]] = []

        async def post(headers: dict[str, str]) -> None:
            messages = [{"type": "http.request", "body": body[:10], "more_body": True},
                        {"type": "http.request", "body": body[10:], "more_body": False}]  # fmt: skip

            async def receive() -> dict[str, Any]:
                return messages.pop(0)

            async def send(message: dict[str, Any]) -> None:
                sent.append(message)

            raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
            await rig.receiver.asgi({"type": "http", "method": "POST", "headers": raw}, receive, send)

        run_async(post(signed(body, secret=GUESS)))
        run_async(post(signed(body)))
        state = rig.state("t-1")
        rig.close()
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [400, 200]
    assert state.values["result"] == "rejected: unclear why"


def test_the_push_names_the_thread_in_the_metadata_beside_the_nodes_own(tmp_path: Path) -> None:
    from langgraph.graph import END, START, StateGraph

    from reviewqueue.integrations.langgraph import Pressure, request_review

    def node(state: dict[str, Any]) -> dict[str, Any]:
        answer = request_review(client, task="t", output="o", key="k", metadata={"trace": "tr-1"})
        return {"seen": answer.kind if isinstance(answer, Pressure) else answer.decision}

    builder = StateGraph(dict)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    with scripted(enqueued(5)) as server, Client(server.url, "t") as client:
        graph = builder.compile(checkpointer=SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False)))
        graph.invoke({}, {"configurable": {"thread_id": "th-9"}})
    metadata = server.requests[0].json()["metadata"]
    assert metadata["trace"] == "tr-1"
    assert (metadata["langgraph"]["thread_id"], metadata["langgraph"]["key"]) == ("th-9", "k")
    assert metadata["langgraph"]["checkpoint_ns"].startswith("node:")
