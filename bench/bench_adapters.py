"""What each adapter adds to push + verdict, against the bare Client in the same run.

    .venv/bin/python bench/bench_adapters.py [--per-round 20] [--rounds 5] [--conn-max-age N]

A scratch database gets one producer token (scope ``outputs``) and a
capacity far above the load; gunicorn serves the real app (one worker, the
same for every side). Each side does the same work in each round: push
``--per-round`` outputs one after another (timed), a reviewer decides them
all through the review services (not timed: the same human step for every
side; the server runs with no undo window, so a verdict is told at once),
then reads each verdict (timed):

- ``client``: ``Client.push_output`` and ``Client.item`` (the baseline);
- ``async``: ``AsyncClient.push_output`` and ``AsyncClient.item``, awaited on one event loop;
- ``mcp``: the MCP tools ``request_review`` and ``get_verdict`` through the SDK's
  ClientSession, over stdio to ``python -m reviewqueue.mcp`` (one session for the run);
- ``langgraph``: a one-node graph on a SQLite checkpointer run until
  ``request_review`` pauses it (push + interrupt + checkpoint), then
  ``Resumer.poll`` (the item read, the ledger, and the resume, in which the
  node pushes again as a duplicate and the graph finishes);
- ``langgraph-async``: the same graph with an async node calling
  ``arequest_review`` with an ``AsyncClient``, on the async SQLite
  checkpointer, run with ``ainvoke``, then ``AsyncResumer.poll``; the client,
  checkpointer and graph live on one event loop in its own thread (as the
  ``mcp`` side keeps its session), each call handed to it.

Rounds interleave the sides (client, async, mcp, langgraph, langgraph-async,
client, ...).
Prints the mean milliseconds per push + verdict of each side in each round,
the medians, and each adapter's ratio of medians over the client's (1.0 is
no overhead). Checks: every push enqueued once and every verdict read back
approved, one row per push on each side.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

from benchlib import (
    DESCRIPTION,
    OUTPUT,
    conn_max_age_label,
    free_port,
    issue_producer_token,
    scratch_database,
    setup_django,
    start_server,
    stop_server,
)

SIDES = ("client", "async", "mcp", "langgraph", "langgraph-async")


class Side:
    """One adapter: ``push(key) -> item id`` and ``verdict(item id) -> status``, blocking."""

    def __init__(self, name: str, push: Callable[[str], int], verdict: Callable[[int], str]) -> None:
        self.name = name
        self.push = push
        self.verdict = verdict
        self.per_op: list[float] = []  # mean seconds per push + verdict, one per round
        self.items: list[int] = []
        self.wrong: list[str] = []


def bare(url: str, token: str) -> tuple[Side, Callable[[], None]]:
    from reviewqueue.client import Client

    client = Client(url, token)

    def push(key: str) -> int:
        return client.push_output(idempotency_key=key, task_description=DESCRIPTION, final_output=OUTPUT).item_id  # type: ignore[union-attr]

    return Side("client", push, lambda item_id: client.item(item_id).status), client.close


def awaited(url: str, token: str) -> tuple[Side, Callable[[], None]]:
    from reviewqueue.client import AsyncClient

    loop = asyncio.new_event_loop()
    client = AsyncClient(url, token)

    def push(key: str) -> int:
        pushed = loop.run_until_complete(
            client.push_output(idempotency_key=key, task_description=DESCRIPTION, final_output=OUTPUT)
        )
        return pushed.item_id  # type: ignore[union-attr]

    def verdict(item_id: int) -> str:
        return loop.run_until_complete(client.item(item_id)).status

    def close() -> None:
        loop.run_until_complete(client.aclose())
        loop.close()

    return Side("async", push, verdict), close


def mcp_session(url: str, token: str) -> tuple[Side, Callable[[], None]]:
    """A ClientSession held open across the run by a task on a loop in its own
    thread (the SDK's transport must be entered and left by one task); each
    tool call is handed to that loop, which costs the same small hop for
    every call."""
    import threading

    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "reviewqueue.mcp"],
        env={"REVIEWQUEUE_URL": url, "REVIEWQUEUE_TOKEN": token, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    opened: asyncio.Future[ClientSession] = loop.create_future()
    stop = asyncio.Event()

    async def hold() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            opened.set_result(session)
            await stop.wait()

    held = asyncio.run_coroutine_threadsafe(hold(), loop)
    session = asyncio.run_coroutine_threadsafe(asyncio.wait_for(asyncio.shield(opened), 60), loop).result()

    def tool(name: str, **arguments: Any) -> dict[str, Any]:
        answer = asyncio.run_coroutine_threadsafe(session.call_tool(name, arguments), loop).result()
        if answer.is_error or answer.structured_content is None:
            raise RuntimeError(f"{name} failed: {answer.content}")
        return dict(answer.structured_content)

    def push(key: str) -> int:
        return int(tool("request_review", task=DESCRIPTION, output=OUTPUT, idempotency_key=key)["item_id"])

    def close() -> None:
        loop.call_soon_threadsafe(stop.set)
        held.result(30)
        loop.call_soon_threadsafe(loop.stop)

    return Side("mcp", push, lambda item_id: str(tool("get_verdict", item_id=item_id)["status"])), close


class GraphState(TypedDict, total=False):
    key: str
    result: str


def graph_side(url: str, token: str, folder: Path) -> tuple[Side, Callable[[], None]]:
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    from reviewqueue.client import Client
    from reviewqueue.integrations.langgraph import Ledger, Resumer, Verdict, request_review

    client = Client(url, token)

    def review(state: GraphState) -> GraphState:
        answer = request_review(client, task=DESCRIPTION, output=OUTPUT, key=state["key"])
        return {"result": answer.decision if isinstance(answer, Verdict) else answer.kind}

    builder = StateGraph(GraphState)
    builder.add_node("review", review)
    builder.add_edge(START, "review")
    builder.add_edge("review", END)
    connection = sqlite3.connect(folder / "graph.sqlite", check_same_thread=False)
    graph = builder.compile(checkpointer=SqliteSaver(connection))
    resumer = Resumer(graph, ledger=Ledger(folder / "resumed.sqlite"))
    threads: dict[int, str] = {}

    def push(key: str) -> int:
        state = graph.invoke({"key": key}, {"configurable": {"thread_id": key}})
        item_id = int(state["__interrupt__"][0].value["reviewqueue_item_id"])
        threads[item_id] = key
        return item_id

    def verdict(item_id: int) -> str:
        (done,) = resumer.poll(client, [threads[item_id]])
        return "approved" if done.outcome == "resumed" and done.result["result"] == "approve" else done.outcome

    def close() -> None:
        client.close()
        connection.close()

    return Side("langgraph", push, verdict), close


def async_graph_side(url: str, token: str, folder: Path) -> tuple[Side, Callable[[], None]]:
    """The graph run with ``ainvoke``: its AsyncClient and AsyncSqliteSaver are
    entered and left by one task on a loop in its own thread (as the mcp
    side's session), and each push and verdict is handed to that loop."""
    import threading

    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.graph import END, START, StateGraph

    from reviewqueue.client import AsyncClient
    from reviewqueue.integrations.langgraph import AsyncResumer, Ledger, Verdict, arequest_review

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    opened: asyncio.Future[tuple[Any, AsyncResumer, AsyncClient]] = loop.create_future()
    stop = asyncio.Event()

    async def hold() -> None:
        async with (
            AsyncClient(url, token) as client,
            AsyncSqliteSaver.from_conn_string(str(folder / "graph-async.sqlite")) as saver,
        ):

            async def review(state: GraphState) -> GraphState:
                answer = await arequest_review(client, task=DESCRIPTION, output=OUTPUT, key=state["key"])
                return {"result": answer.decision if isinstance(answer, Verdict) else answer.kind}

            builder = StateGraph(GraphState)
            builder.add_node("review", review)
            builder.add_edge(START, "review")
            builder.add_edge("review", END)
            graph = builder.compile(checkpointer=saver)
            opened.set_result((graph, AsyncResumer(graph, ledger=Ledger(folder / "resumed-async.sqlite")), client))
            await stop.wait()

    held = asyncio.run_coroutine_threadsafe(hold(), loop)
    graph, resumer, client = asyncio.run_coroutine_threadsafe(
        asyncio.wait_for(asyncio.shield(opened), 60), loop
    ).result()
    threads: dict[int, str] = {}

    def push(key: str) -> int:
        started = graph.ainvoke({"key": key}, {"configurable": {"thread_id": key}})
        state = asyncio.run_coroutine_threadsafe(started, loop).result()
        item_id = int(state["__interrupt__"][0].value["reviewqueue_item_id"])
        threads[item_id] = key
        return item_id

    def verdict(item_id: int) -> str:
        (done,) = asyncio.run_coroutine_threadsafe(resumer.poll(client, [threads[item_id]]), loop).result()
        return "approved" if done.outcome == "resumed" and done.result["result"] == "approve" else done.outcome

    def close() -> None:
        loop.call_soon_threadsafe(stop.set)
        held.result(30)
        loop.call_soon_threadsafe(loop.stop)

    return Side("langgraph-async", push, verdict), close


def decide_all(item_ids: list[int], reviewer: Any) -> None:
    """The reviewer's step, through the services the review page calls."""
    from reviewqueue import services

    for item_id in item_ids:
        claimed = services.claim(reviewer=reviewer)
        assert claimed is not None and claimed.pk == item_id, (claimed, item_id)
        services.decide(item_id=item_id, reviewer=reviewer, approve=True)


def one_round(side: Side, keys: list[str], reviewer: Any) -> None:
    pushed, elapsed = [], 0.0
    for key in keys:
        started = time.perf_counter()
        pushed.append(side.push(key))
        elapsed += time.perf_counter() - started
    decide_all(pushed, reviewer)
    for item_id in pushed:
        started = time.perf_counter()
        status = side.verdict(item_id)
        elapsed += time.perf_counter() - started
        if status != "approved":
            side.wrong.append(f"item {item_id}: {status}")
    side.items += pushed
    side.per_op.append(elapsed / len(keys))


def report(sides: list[Side]) -> dict[str, float]:
    base = sides[0]
    for n in range(len(base.per_op)):
        row = "   ".join(f"{s.name} {s.per_op[n] * 1000:7.2f} ms" for s in sides)
        print(f"  round {n + 1:2d}   {row}")
    medians = {s.name: statistics.median(s.per_op) for s in sides}
    print("  median     " + "   ".join(f"{name} {value * 1000:7.2f} ms" for name, value in medians.items()))
    ratios = {s.name: medians[s.name] / medians[base.name] for s in sides[1:]}
    for name, ratio in ratios.items():
        print(f"  {name:15s} / client, push + verdict: ratio of medians {ratio:5.2f}")
    return ratios


def run(args: argparse.Namespace) -> bool:
    with scratch_database(args.database) as url:
        setup_django(url)
        from django.contrib.auth import get_user_model
        from django.db import connections

        from reviewqueue.access import ensure_groups
        from reviewqueue.models import Queue, ReviewItem

        Queue.objects.filter(pk=Queue.default().pk).update(capacity=10_000_000)
        token = issue_producer_token("bench-adapters")
        reviewer = get_user_model().objects.create_user(username="bench-reviewer", password="unused-0123456789")
        reviewer.groups.add(ensure_groups()["reviewer"])
        connections.close_all()
        port = free_port()
        folder = Path(tempfile.mkdtemp(prefix="rq-bench-adapters-"))
        # The undo window would hold every verdict back 15 s on every side
        # alike; the bench times the adapters, so the server tells verdicts at once.
        os.environ["REVIEWQUEUE_UNDO_SECONDS"] = "0"
        server = start_server(url, port, str(folder / "gunicorn.log"), workers=1, conn_max_age=args.conn_max_age)
        base = f"http://127.0.0.1:{port}"
        made = [
            bare(base, token),
            awaited(base, token),
            mcp_session(base, token),
            graph_side(base, token, folder),
            async_graph_side(base, token, folder),
        ]
        sides = [side for side, _ in made]
        try:
            for side in sides:  # warm connections, imports and the graph's tables
                one_round(side, [f"warm-{side.name}-{n}" for n in range(2)], reviewer)
                side.per_op.clear()
            for n in range(args.rounds):
                for side in sides:
                    one_round(side, [f"{side.name}-{n}-{k}" for k in range(args.per_round)], reviewer)
        finally:
            for _, close in made:
                close()
            stop_server(server)
        print(
            f"adapters, push + verdict: {args.rounds} rounds x {args.per_round} outputs per side, gunicorn -w 1, "
            f"PostgreSQL, {conn_max_age_label(args.conn_max_age)}"
        )
        report(sides)
        ok = True
        for side in sides:
            rows = ReviewItem.objects.filter(pk__in=side.items).count()
            print(f"  {side.name:15s} pushed {len(side.items)}, rows {rows}, verdicts not approved {len(side.wrong)}")
            ok = ok and rows == len(side.items) == len(set(side.items)) and not side.wrong
        connections.close_all()
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-round", type=int, default=20, help="outputs per round per side")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--conn-max-age", type=int, default=None)
    parser.add_argument("--database", default="rq_bench_adapters")
    args = parser.parse_args()
    sys.exit(0 if run(args) else 1)


if __name__ == "__main__":
    main()
