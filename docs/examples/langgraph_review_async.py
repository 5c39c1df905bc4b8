"""The LangGraph agent of langgraph_review.py, asynchronous: its nodes are
coroutines, the graph runs with ``ainvoke`` on an ``AsyncSqliteSaver``, it asks
for review with ``arequest_review`` over an ``AsyncClient``, and an
``AsyncResumer`` resumes it from the signed webhook (an ASGI app) or by polling.

    # start a thread; it pauses and prints the item it waits for
    python docs/examples/langgraph_review_async.py start --thread t-1 --db graph.sqlite --callback-url http://127.0.0.1:9000/
    # resume paused threads from the signed webhook (ASGI under uvicorn, on --listen) ...
    python docs/examples/langgraph_review_async.py serve --listen 127.0.0.1:9000 --db graph.sqlite
    # ... or by polling the server
    python docs/examples/langgraph_review_async.py poll --thread t-1 --db graph.sqlite

Configured by REVIEWQUEUE_URL, REVIEWQUEUE_TOKEN and, to serve webhooks,
REVIEWQUEUE_WEBHOOK_SECRET. ``serve`` needs an ASGI server (uvicorn here).
Each step is printed as one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any, TypedDict

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph

from reviewqueue.client import AsyncClient
from reviewqueue.integrations.langgraph import AsyncResumer, Ledger, Pressure, WebhookReceiver, arequest_review

TASK = "Write is_even(n) that returns True for even integers."


class State(TypedDict, total=False):
    task: str
    output: str
    note: str
    turns: int
    decision: str
    result: str


def say(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


async def fake_agent(state: State) -> State:
    """Stands in for the model (an awaited call in a real agent)."""
    await asyncio.sleep(0)
    turns = state.get("turns", 0) + 1
    output = state.get("output") or "def is_even(n):\n    return n % 2 == 0\n"
    if state.get("note"):
        output += f"# revised: {state['note']}\n"
    return {"output": output, "turns": turns}


def build_graph(client: AsyncClient, checkpointer: Any, callback_url: str | None = None) -> Any:
    async def review(state: State) -> State:
        answer = await arequest_review(
            client,
            task=state["task"],
            output=state["output"],
            cutoff_reason="step_limit",
            callback_url=callback_url,
            key=f"turn-{state['turns']}",
            metadata={"agent": "async-example"},
        )
        if isinstance(answer, Pressure):
            return {"decision": answer.kind, "result": f"unreviewed ({answer.kind})"}
        if answer.approved:
            return {"decision": answer.decision, "result": answer.output or ""}
        if answer.decision == "send_back":
            return {"decision": "send_back", "note": answer.note}
        return {"decision": "reject", "result": f"rejected: {answer.reason} {answer.note}".strip()}

    def again(state: State) -> str:
        return "agent" if state.get("decision") == "send_back" and state.get("turns", 0) < 3 else END

    graph = StateGraph(State)
    graph.add_node("agent", fake_agent)
    graph.add_node("review", review)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", "review")
    graph.add_conditional_edges("review", again, ["agent", END])
    return graph.compile(checkpointer=checkpointer)


def report(done: Any) -> None:
    state = done.result or {}
    say(
        done.outcome,
        thread_id=done.thread_id,
        item_id=done.item_id,
        decision=(done.value or {}).get("decision"),
        result=state.get("result"),
        paused="__interrupt__" in state,
    )


async def start(args: argparse.Namespace, client: AsyncClient, saver: Any) -> None:
    graph = build_graph(client, saver, args.callback_url)
    state = await graph.ainvoke({"task": args.task}, {"configurable": {"thread_id": args.thread}})
    paused = [p.value for p in state.get("__interrupt__", [])]
    if paused:
        say("paused", thread_id=args.thread, item_id=paused[0]["reviewqueue_item_id"])
    else:
        say("finished", thread_id=args.thread, decision=state.get("decision"), result=state.get("result"))


async def serve(args: argparse.Namespace, client: AsyncClient, saver: Any) -> None:
    import uvicorn

    resumer = AsyncResumer(build_graph(client, saver), ledger=Ledger(args.db + ".resumed"))

    async def handle(event: Any) -> Any:
        done = await resumer.on_event(event)
        report(done)
        return done

    receiver = WebhookReceiver(os.environ["REVIEWQUEUE_WEBHOOK_SECRET"], handle)
    host, _, port = args.listen.rpartition(":")
    # The receiver runs on this event loop, the one the checkpointer's connection belongs to.
    # interface="asgi3": uvicorn cannot tell a bound method's ASGI version by itself.
    config = uvicorn.Config(
        receiver.asgi, host=host, port=int(port), interface="asgi3", lifespan="off", log_level="warning"
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started and not serving.done():
        await asyncio.sleep(0.05)
    say("listening", url=f"http://{host}:{port}/")
    await serving


async def poll(args: argparse.Namespace, client: AsyncClient, saver: Any) -> None:
    resumer = AsyncResumer(build_graph(client, saver), ledger=Ledger(args.db + ".resumed"))
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        for each in await resumer.poll(client, [args.thread]):
            report(each)
        if not await resumer.paused_on(args.thread):
            return
        await asyncio.sleep(args.interval)
    say("timed_out", thread_id=args.thread)


async def run(args: argparse.Namespace) -> None:
    url = os.environ.get("REVIEWQUEUE_URL", "http://127.0.0.1:8000")
    async with (
        AsyncClient(url, os.environ["REVIEWQUEUE_TOKEN"]) as client,
        AsyncSqliteSaver.from_conn_string(args.db) as saver,
    ):
        await {"start": start, "serve": serve, "poll": poll}[args.command](args, client, saver)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("start", "serve", "poll"))
    parser.add_argument("--db", default="graph.sqlite", help="the SQLite checkpoint file")
    parser.add_argument("--thread", default="thread-1")
    parser.add_argument("--task", default=TASK)
    parser.add_argument("--callback-url", help="start: where the verdict's webhook goes")
    parser.add_argument("--listen", default="127.0.0.1:9000", help="serve: host:port")
    parser.add_argument("--interval", type=float, default=2.0, help="poll: seconds between polls")
    parser.add_argument("--timeout", type=float, default=3600.0, help="poll: seconds to wait in all")
    asyncio.run(run(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
