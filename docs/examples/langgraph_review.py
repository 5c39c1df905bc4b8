"""A LangGraph agent whose output a human team reviews through reviewqueue.

The graph: a (fake) agent writes an output, ``review`` asks for review with
``request_review`` and pauses, and the reviewer's verdict decides what
happens next: approve or edit finishes with the output, reject finishes with
the reason, send back runs the agent again with the note. The graph's state
lives in a SQLite checkpoint file, so one process can start it and another
resume it.

    # start a thread; it pauses and prints the item it waits for
    python docs/examples/langgraph_review.py start --thread t-1 --db graph.sqlite --callback-url http://127.0.0.1:9000/
    # resume paused threads from the signed webhook (WSGI, on --listen) ...
    python docs/examples/langgraph_review.py serve --listen 127.0.0.1:9000 --db graph.sqlite
    # ... or by polling the server
    python docs/examples/langgraph_review.py poll --thread t-1 --db graph.sqlite

Configured by REVIEWQUEUE_URL, REVIEWQUEUE_TOKEN and, to serve webhooks,
REVIEWQUEUE_WEBHOOK_SECRET. Each step is printed as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from socketserver import ThreadingMixIn
from typing import Any, TypedDict
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from reviewqueue.client import Client
from reviewqueue.integrations.langgraph import Ledger, Pressure, Resumer, WebhookReceiver, request_review

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


def fake_agent(state: State) -> State:
    """Stands in for the model: a first answer, then the answer with the
    reviewer's note addressed (as a comment, enough to see the loop turn)."""
    turns = state.get("turns", 0) + 1
    output = state.get("output") or "def is_even(n):\n    return n % 2 == 0\n"
    if state.get("note"):
        output += f"# revised: {state['note']}\n"
    return {"output": output, "turns": turns}


def build_graph(client: Client, checkpointer: Any, callback_url: str | None = None) -> Any:
    def review(state: State) -> State:
        answer = request_review(
            client,
            task=state["task"],
            output=state["output"],
            cutoff_reason="step_limit",
            callback_url=callback_url,
            key=f"turn-{state['turns']}",
        )
        if isinstance(answer, Pressure):
            # Nobody will review it now: finish with the unreviewed output, marked.
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


def open_graph(args: argparse.Namespace, client: Client) -> Any:
    connection = sqlite3.connect(args.db, check_same_thread=False)
    return build_graph(client, SqliteSaver(connection), getattr(args, "callback_url", None))


def start(args: argparse.Namespace, client: Client) -> None:
    graph = open_graph(args, client)
    state = graph.invoke({"task": args.task}, {"configurable": {"thread_id": args.thread}})
    paused = [p.value for p in state.get("__interrupt__", [])]
    if paused:
        say("paused", thread_id=args.thread, item_id=paused[0]["reviewqueue_item_id"])
    else:
        say("finished", thread_id=args.thread, decision=state.get("decision"), result=state.get("result"))


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


def serve(args: argparse.Namespace, client: Client) -> None:
    resumer = Resumer(open_graph(args, client), ledger=Ledger(args.db + ".resumed"))

    def handle(event: Any) -> Any:
        done = resumer.on_event(event)
        report(done)
        return done

    receiver = WebhookReceiver(os.environ["REVIEWQUEUE_WEBHOOK_SECRET"], handle)

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *log_args: Any) -> None:
            pass

    class Threading(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    host, _, port = args.listen.rpartition(":")
    with make_server(host, int(port), receiver.wsgi, server_class=Threading, handler_class=Quiet) as httpd:
        say("listening", url=f"http://{host}:{httpd.server_port}/")
        httpd.serve_forever()


def poll(args: argparse.Namespace, client: Client) -> None:
    resumer = Resumer(open_graph(args, client), ledger=Ledger(args.db + ".resumed"))
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        done = resumer.poll(client, [args.thread])
        for each in done:
            report(each)
        if not list(resumer.paused_on(args.thread)):
            return
        time.sleep(args.interval)
    say("timed_out", thread_id=args.thread)


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
    args = parser.parse_args(argv)
    url = os.environ.get("REVIEWQUEUE_URL", "http://127.0.0.1:8000")
    with Client(url, os.environ["REVIEWQUEUE_TOKEN"]) as client:
        {"start": start, "serve": serve, "poll": poll}[args.command](args, client)
    return 0


if __name__ == "__main__":
    sys.exit(main())
