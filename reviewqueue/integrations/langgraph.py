"""reviewqueue as LangGraph's human in the loop.

A node calls ``request_review(client, task=..., output=...)``. It pushes the
output to a review queue, with the graph's thread id in the item's
``source_run_id`` (``langgraph:<thread id>``, which webhook events carry back
as ``run_id``) and the node's checkpoint namespace in its idempotency key,
then pauses the graph with ``interrupt()``. When the graph is resumed the node
runs again from the top: the same push is a duplicate of the first (same
key), and ``interrupt()`` now returns the reviewer's answer, which
``request_review`` hands back as a ``Verdict``:

- approve: ``output`` is the output pushed;
- edit: ``output`` is the reviewer's edited output;
- reject: ``reason`` (the reason label) and ``note``;
- send_back: ``note``, for another turn.

Backpressure reaches the node as a ``Pressure`` value instead of a pause:
``held`` (the server said to retry after ``retry_after`` s; nothing was
queued), ``shed`` (the queue dropped this output: nobody will review it) and,
with ``wait_in_draft=False``, ``draft`` (queued, but the queue is past its high
watermark: the node may go on without waiting).

A ``Resumer`` turns verdicts into ``Command(resume=...)`` on the thread that
asked, from the signed webhook (``WebhookReceiver``, a WSGI and an ASGI app)
or by polling (``Resumer.poll``). It resumes a thread only while that thread
is paused on that item, and records each resumed item in a ledger (SQLite,
shared by every process that resumes), so a webhook delivered twice resumes
the graph once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, Protocol

from langgraph.config import get_config
from langgraph.types import Command, interrupt

from reviewqueue.client import (
    Backpressure,
    Client,
    Event,
    Item,
    ReviewqueueError,
    standard_secret,
    verify_signature,
)

log = logging.getLogger(__name__)

THREAD_PREFIX = "langgraph:"
# The key of the interrupt's value that names the item it waits for.
ITEM_KEY = "reviewqueue_item_id"
MAX_ID_LENGTH = 200  # the API's limit on idempotency_key and source_run_id


# --- what the node gets back ------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """The reviewer's answer, as the node sees it after the resume."""

    decision: str
    """``approve``, ``edit``, ``reject`` or ``send_back``."""
    item_id: int
    output: str | None = None
    """approve: the output pushed; edit: the reviewer's corrected output."""
    reason: str = ""
    note: str = ""

    @property
    def approved(self) -> bool:
        return self.decision in ("approve", "edit")


@dataclass(frozen=True)
class Pressure:
    """The queue pushed back: the node was not paused. ``kind`` is ``held``
    (push again after ``retry_after`` s: the same node run repeats the same
    key), ``shed`` (dropped to make room; nobody will review it) or ``draft``
    (queued, but the queue is past its high watermark)."""

    kind: str
    item_id: int | None = None
    retry_after: float | None = None
    mode: str = ""
    detail: str = ""


def request_review(
    client: Client,
    *,
    task: str,
    output: str,
    queue: str | None = None,
    priority: int | None = None,
    cutoff_reason: str | None = None,
    callback_url: str | None = None,
    key: str = "review",
    wait_in_draft: bool = True,
    **fields: Any,
) -> Verdict | Pressure:
    """Ask for review from inside a LangGraph node, and pause the graph until
    the verdict resumes it. Call it from a node of a graph compiled with a
    checkpointer and run with a ``thread_id``. ``key`` tells apart two
    reviews asked in one node run. Safe to repeat, and repeated on resume:
    the push is idempotent by thread, node run and ``key``.
    """
    configurable = get_config()["configurable"]
    thread_id = str(configurable["thread_id"])
    namespace = str(configurable.get("checkpoint_ns") or "")
    source_run_id = f"{THREAD_PREFIX}{thread_id}"
    idempotency_key = f"{source_run_id}:{namespace}:{key}"
    if len(idempotency_key) > MAX_ID_LENGTH:
        raise ValueError(f"thread id, node and key make an idempotency key over {MAX_ID_LENGTH} characters")
    pushed = client.push_output(
        idempotency_key=idempotency_key,
        task_description=task,
        final_output=output,
        source_run_id=source_run_id,
        queue=queue,
        priority=priority,
        cutoff_reason=cutoff_reason,
        callback_url=callback_url,
        **fields,
    )
    if isinstance(pushed, Backpressure):
        return Pressure("held", retry_after=pushed.retry_after, detail=pushed.detail or pushed.error)
    if pushed.outcome == "shed":
        return Pressure("shed", item_id=pushed.item_id, mode=pushed.mode)
    if pushed.outcome == "filtered":
        return Verdict("reject", pushed.item_id, reason="filtered")
    if pushed.backoff and not wait_in_draft and pushed.outcome != "duplicate":
        return Pressure("draft", item_id=pushed.item_id, mode=pushed.mode)
    checkpoint = configurable.get("checkpoint_map") or {}
    answer = interrupt(
        {
            ITEM_KEY: pushed.item_id,
            "output": output,
            "thread_id": thread_id,
            "checkpoint_ns": namespace,
            "checkpoint_id": checkpoint.get("") if isinstance(checkpoint, Mapping) else None,
            "mode": pushed.mode,
        }
    )
    return answer_of(answer)


def answer_of(value: Mapping[str, Any]) -> Verdict | Pressure:
    """The resume value (a plain dict, as the checkpointer stores it) as the node's result."""
    decision = str(value.get("decision") or "")
    item_id = int(value[ITEM_KEY])
    if decision == "shed":
        return Pressure("shed", item_id=item_id)
    return Verdict(
        decision,
        item_id,
        output=value.get("output"),
        reason=str(value.get("reason") or ""),
        note=str(value.get("note") or ""),
    )


# --- verdicts into resume values --------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """A final answer on an item, from an event or a poll."""

    decision: str
    reason: str = ""
    note: str = ""
    edited_output: str | None = None


def decision_of_event(event: Event) -> Decision | None:
    """The decision a webhook event carries; None for events that decide nothing."""
    data = event.data
    note = str(data.get("note") or "")
    if event.type == "item.decided":
        if data.get("decision") == "reject":
            return Decision("reject", str(data.get("reason_label") or ""), note)
        if data.get("edited"):
            return Decision("edit", note=note, edited_output=data.get("edited_output"))
        return Decision("approve", note=note)
    if event.type == "item.sent_back":
        return Decision("send_back", note=note)
    if event.type == "item.shed":
        return Decision("shed")
    if event.type == "item.filtered":
        return Decision("reject", "filtered", str(data.get("filter_reason") or ""))
    return None


def decision_of_item(item: Item) -> Decision | None:
    """The decision an item read by polling carries; None until it is decided."""
    if not item.decided:
        return None
    verdict = item.verdict
    note = item.note
    if item.status == "shed":
        return Decision("shed")
    if item.status == "filtered":
        return Decision("reject", "filtered", note)
    if item.status == "sent_back":
        return Decision("send_back", note=note)
    if item.status == "rejected":
        return Decision("reject", verdict.reason_label if verdict else "", note)
    if verdict is not None and verdict.decision == "edit":
        return Decision("edit", note=note, edited_output=verdict.edited_output)
    return Decision("approve", note=note)


def resume_value(decision: Decision, paused: Mapping[str, Any]) -> dict[str, Any]:
    """What ``interrupt()`` returns in the resumed node: approve → the output
    the node pushed (kept in the interrupt's value), edit → the edited
    output, reject → the reason and note, send back → the note."""
    value: dict[str, Any] = {ITEM_KEY: paused[ITEM_KEY], "decision": decision.decision}
    if decision.decision == "approve":
        value["output"] = paused.get("output")
    elif decision.decision == "edit":
        value["output"] = decision.edited_output
    elif decision.decision == "reject":
        value["reason"] = decision.reason
    if decision.note and decision.decision != "shed":
        value["note"] = decision.note
    return value


# --- resuming ---------------------------------------------------------------------------------


class Graph(Protocol):
    """What the resumer needs of a compiled LangGraph graph."""

    def get_state(self, config: Any) -> Any: ...

    def invoke(self, input: Any, config: Any = None) -> Any: ...


class Ledger:
    """The items already resumed, in SQLite: a row per item, inserted before
    the resume. Two deliveries of one event, in one process or two, race for
    the insert, and only the winner resumes. ``path`` is a file every
    resuming process shares (``:memory:`` for one process)."""

    def __init__(self, path: str | PathLike[str] = ":memory:") -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, timeout=30, check_same_thread=False, isolation_level=None)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS reviewqueue_resumed"
            " (item_id INTEGER PRIMARY KEY, thread_id TEXT NOT NULL, resumed_at REAL NOT NULL)"
        )

    def claim(self, item_id: int, thread_id: str) -> bool:
        """True for the one caller that may resume this item."""
        with self._lock:
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO reviewqueue_resumed VALUES (?, ?, ?)", (item_id, thread_id, time.time())
            )
            return cursor.rowcount == 1

    def release(self, item_id: int) -> None:
        """Give a claim back after a resume that failed, so a redelivery tries again."""
        with self._lock:
            self._db.execute("DELETE FROM reviewqueue_resumed WHERE item_id = ?", (item_id,))

    def resumed(self) -> list[tuple[int, str]]:
        with self._lock:
            return list(self._db.execute("SELECT item_id, thread_id FROM reviewqueue_resumed ORDER BY item_id"))


@dataclass(frozen=True)
class Resumed:
    """What the resumer did with one verdict: ``outcome`` is ``resumed``,
    ``duplicate`` (resumed already), ``not_waiting`` (the thread is not
    paused on this item), ``undecided`` or ``ignored`` (not an item a graph asked for)."""

    outcome: str
    thread_id: str | None = None
    item_id: int | None = None
    value: dict[str, Any] | None = None
    result: Any = field(default=None, repr=False)


def thread_of(run_id: str | None) -> str | None:
    """The thread id ``request_review`` put in the item's source_run_id."""
    if run_id and run_id.startswith(THREAD_PREFIX):
        return run_id[len(THREAD_PREFIX) :]
    return None


class Resumer:
    """Resumes paused graphs with their verdicts. ``graph`` is the compiled
    graph with its (persistent) checkpointer; ``ledger`` a ``Ledger`` shared by
    every process that resumes these graphs. Safe to call again with the
    same verdict: the second call resumes nothing."""

    def __init__(self, graph: Graph, *, ledger: Ledger | None = None) -> None:
        self.graph = graph
        self.ledger = ledger or Ledger()

    def paused_on(self, thread_id: str) -> Iterator[Any]:
        """The thread's pending interrupts that wait for a review."""
        state = self.graph.get_state({"configurable": {"thread_id": thread_id}})
        for pending in state.interrupts:
            if isinstance(pending.value, Mapping) and ITEM_KEY in pending.value:
                yield pending

    def on_event(self, event: Event) -> Resumed:
        """A verified webhook event: resume its thread if it decides its item."""
        thread_id = thread_of(event.run_id)
        decision = decision_of_event(event)
        if thread_id is None or event.item_id is None:
            return Resumed("ignored", item_id=event.item_id)
        if decision is None:
            return Resumed("undecided", thread_id, event.item_id)
        return self.resume(thread_id, event.item_id, decision)

    def poll(self, client: Client, thread_ids: Iterable[str]) -> list[Resumed]:
        """Ask the server about every item these threads wait for, and resume
        the threads whose item is decided. Call it on a timer instead of
        receiving webhooks."""
        done = []
        for thread_id in thread_ids:
            for pending in list(self.paused_on(thread_id)):
                decision = decision_of_item(client.item(int(pending.value[ITEM_KEY])))
                if decision is not None:
                    done.append(self.resume(thread_id, int(pending.value[ITEM_KEY]), decision))
        return done

    def resume(self, thread_id: str, item_id: int, decision: Decision) -> Resumed:
        """Resume ``thread_id`` from its checkpoint with ``decision`` on
        ``item_id``, once: only while it is paused on that item, and only for
        the caller that claims the item in the ledger."""
        paused = [p for p in self.paused_on(thread_id) if int(p.value[ITEM_KEY]) == item_id]
        if not paused:
            return Resumed("not_waiting", thread_id, item_id)
        if not self.ledger.claim(item_id, thread_id):
            return Resumed("duplicate", thread_id, item_id)
        value = resume_value(decision, paused[0].value)
        config = {"configurable": {"thread_id": thread_id}}
        try:
            result = self.graph.invoke(Command(resume={paused[0].id: value}), config)
        except BaseException:
            self.ledger.release(item_id)
            raise
        log.info("graph resumed", extra={"thread_id": thread_id, "item_id": item_id, "decision": value["decision"]})
        return Resumed("resumed", thread_id, item_id, value, result)


# --- the webhook receiver ---------------------------------------------------------------------


class WebhookReceiver:
    """Receives reviewqueue's signed webhooks and hands each verified event to
    ``handle`` (``Resumer.on_event``, say). Mount ``receiver.wsgi`` in a WSGI
    app (Flask, Django, ``wsgiref``) or ``receiver.asgi`` in an ASGI one
    (Starlette, FastAPI, uvicorn). An unsigned, forged or stale request is
    answered 400 and acted on by nothing; a handler that fails is answered
    500, so the server delivers the event again."""

    def __init__(self, secret: str, handle: Callable[[Event], Any]) -> None:
        standard_secret(secret)  # a secret that is not whsec_<base64> is refused here, not at each delivery
        self.secret = secret
        self.handle = handle

    def receive(self, headers: Mapping[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
        """The status and JSON body to answer one delivery with. ``headers``
        in any case: ``verify_signature`` reads the ones it signs."""
        try:
            event = verify_signature(self.secret, headers, body)
        except ReviewqueueError as exc:
            return 400, {"error": exc.code}
        try:
            done = self.handle(event)
        except Exception:
            log.exception("webhook handler failed", extra={"event_id": event.id})
            return 500, {"error": "handler_failed"}
        outcome = getattr(done, "outcome", None)
        return 200, {"event_id": event.id, **({"outcome": outcome} if outcome else {})}

    def wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if environ.get("REQUEST_METHOD") != "POST":
            return self._wsgi_answer(start_response, 405, {"error": "method_not_allowed"})
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        pairs = [(k[5:].replace("_", "-"), v) for k, v in environ.items() if k.startswith("HTTP_")]
        return self._wsgi_answer(start_response, *self.receive(dict(pairs), body))

    @staticmethod
    def _wsgi_answer(start_response: Callable[..., Any], status: int, body: dict[str, Any]) -> list[bytes]:
        payload = json.dumps(body).encode()
        reason = {200: "OK", 400: "Bad Request", 405: "Method Not Allowed", 500: "Internal Server Error"}[status]
        start_response(
            f"{status} {reason}", [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
        )
        return [payload]

    async def asgi(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        if scope.get("method") != "POST":
            status, answer = 405, {"error": "method_not_allowed"}
        else:
            pairs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope.get("headers", [])]
            # The handler resumes a graph, which blocks: off the event loop.
            status, answer = await asyncio.to_thread(self.receive, dict(pairs), b"".join(chunks))
        payload = json.dumps(answer).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})
