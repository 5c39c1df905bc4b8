"""reviewqueue as LangGraph's human in the loop.

A node calls ``request_review(client, task=..., output=...)`` (an async node
``await arequest_review(async_client, ...)``). It pushes the output to a
review queue, with the graph's thread id, checkpoint namespace and review
key in the item's ``metadata`` (under ``"langgraph"``, which the item's
webhook events carry back), then pauses the graph with ``interrupt()``. When the graph is resumed the node
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

A ``Resumer`` (``AsyncResumer`` for graphs run with ``ainvoke``) turns
verdicts into ``Command(resume=...)`` on the thread that asked, from the signed webhook (``WebhookReceiver``, a WSGI and an ASGI app)
or by polling (``Resumer.poll``). It resumes a thread only while that thread
is paused on that item, and records each resumed item in a ledger (SQLite,
shared by every process that resumes), so a webhook delivered twice resumes
the graph once.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
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
    AsyncClient,
    Backpressure,
    Client,
    Event,
    Item,
    Output,
    ReviewqueueError,
    standard_secret,
    verify_signature,
)

log = logging.getLogger(__name__)

THREAD_PREFIX = "langgraph:"
# The key of the interrupt's value that names the item it waits for.
ITEM_KEY = "reviewqueue_item_id"
# The key of the item's metadata under which request_review names its thread.
METADATA_KEY = "langgraph"
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


# Long: the push's keywords, passed on to the client; the body is short.
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
    metadata: Mapping[str, Any] | None = None,
    **fields: Any,
) -> Verdict | Pressure:
    """Ask for review from inside a LangGraph node, and pause the graph until
    the verdict resumes it. Call it from a node of a graph compiled with a
    checkpointer and run with a ``thread_id``. ``key`` tells apart two
    reviews asked in one node run; ``metadata`` is yours, kept beside the
    thread's own under ``"langgraph"``. Safe to repeat, and repeated on
    resume: the push is idempotent by thread, node run and ``key``.
    """
    asked = _Ask.here(key, metadata)
    pushed = client.push_output(**asked.push(task, output, queue, priority, cutoff_reason, callback_url), **fields)
    return asked.after(pushed, output, wait_in_draft)


# Long: as request_review.
async def arequest_review(
    client: AsyncClient,
    *,
    task: str,
    output: str,
    queue: str | None = None,
    priority: int | None = None,
    cutoff_reason: str | None = None,
    callback_url: str | None = None,
    key: str = "review",
    wait_in_draft: bool = True,
    metadata: Mapping[str, Any] | None = None,
    **fields: Any,
) -> Verdict | Pressure:
    """``request_review`` for an async node (a graph run with ``ainvoke`` or
    ``astream``), pushing with an ``AsyncClient``. The same item, key and
    metadata as ``request_review``, so either resumer resumes it; safe to
    repeat in the same way."""
    asked = _Ask.here(key, metadata)
    pushed = await client.push_output(
        **asked.push(task, output, queue, priority, cutoff_reason, callback_url), **fields
    )
    return asked.after(pushed, output, wait_in_draft)


@dataclass(frozen=True)
class _Ask:
    """One review asked from the node running now: what to push, and what to
    do with the answer. Shared by request_review and arequest_review."""

    thread_id: str
    namespace: str
    key: str
    metadata: dict[str, Any]
    checkpoint_id: str | None

    @classmethod
    def here(cls, key: str, metadata: Mapping[str, Any] | None) -> _Ask:
        configurable = get_config()["configurable"]
        thread_id = str(configurable["thread_id"])
        namespace = str(configurable.get("checkpoint_ns") or "")
        mine = {"thread_id": thread_id, "checkpoint_ns": namespace, "key": key}
        checkpoint = configurable.get("checkpoint_map") or {}
        return cls(
            thread_id,
            namespace,
            key,
            {**(metadata or {}), METADATA_KEY: mine},
            checkpoint.get("") if isinstance(checkpoint, Mapping) else None,
        )

    def push(
        self,
        task: str,
        output: str,
        queue: str | None,
        priority: int | None,
        cutoff_reason: str | None,
        callback_url: str | None,
    ) -> dict[str, Any]:
        """The push's arguments. The thread and namespace travel in
        ``metadata``; the idempotency key keeps its readable form
        (``langgraph:<thread>:<namespace>:<key>``) while it fits, so a thread
        paused by an earlier version pushes the same key again on resume, and
        ``source_run_id`` still names the thread for receivers that read
        ``run_id``. Longer ones (deep subgraphs) get a digest key instead."""
        source_run_id = f"{THREAD_PREFIX}{self.thread_id}"
        readable = f"{source_run_id}:{self.namespace}:{self.key}"
        if len(readable) <= MAX_ID_LENGTH:
            idempotency_key = readable
        else:
            named = json.dumps([self.thread_id, self.namespace, self.key]).encode()
            idempotency_key = f"{THREAD_PREFIX}sha256:{hashlib.sha256(named).hexdigest()}"
        return {
            "idempotency_key": idempotency_key,
            "task_description": task,
            "final_output": output,
            "source_run_id": source_run_id if len(source_run_id) <= MAX_ID_LENGTH else None,
            "queue": queue,
            "priority": priority,
            "cutoff_reason": cutoff_reason,
            "callback_url": callback_url,
            "metadata": self.metadata,
        }

    def after(self, pushed: Output | Backpressure, output: str, wait_in_draft: bool) -> Verdict | Pressure:
        """Pressure as a value, or pause the graph on the item (``interrupt()``
        raises to pause; on resume it returns the verdict's value)."""
        if isinstance(pushed, Backpressure):
            return Pressure("held", retry_after=pushed.retry_after, detail=pushed.detail or pushed.error)
        if pushed.outcome == "shed":
            return Pressure("shed", item_id=pushed.item_id, mode=pushed.mode)
        if pushed.outcome == "filtered":
            return Verdict("reject", pushed.item_id, reason="filtered")
        if pushed.backoff and not wait_in_draft and pushed.outcome != "duplicate":
            return Pressure("draft", item_id=pushed.item_id, mode=pushed.mode)
        answer = interrupt(
            {
                ITEM_KEY: pushed.item_id,
                "output": output,
                "thread_id": self.thread_id,
                "checkpoint_ns": self.namespace,
                "checkpoint_id": self.checkpoint_id,
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


def thread_of_event(event: Event) -> str | None:
    """The thread an item event is for: named in the item's metadata, or, for
    an item pushed before the adapter wrote metadata, in its ``run_id``."""
    mine = event.metadata.get(METADATA_KEY)
    if isinstance(mine, Mapping) and isinstance(mine.get("thread_id"), str):
        return str(mine["thread_id"])
    return thread_of(event.run_id)


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
        thread_id = thread_of_event(event)
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


class AsyncGraph(Protocol):
    """What the async resumer needs of a compiled LangGraph graph."""

    async def aget_state(self, config: Any) -> Any: ...

    async def ainvoke(self, input: Any, config: Any = None) -> Any: ...


class AsyncResumer:
    """``Resumer`` for graphs run with ``ainvoke`` (async nodes, an async
    checkpointer such as ``AsyncSqliteSaver``): the same rules, the same
    ``Ledger`` (so a sync and an async resumer may share one), awaited.
    Use it from the event loop the graph's checkpointer belongs to; mount
    ``WebhookReceiver(secret, resumer.on_event).asgi`` to feed it webhooks."""

    def __init__(self, graph: AsyncGraph, *, ledger: Ledger | None = None) -> None:
        self.graph = graph
        self.ledger = ledger or Ledger()

    async def paused_on(self, thread_id: str) -> list[Any]:
        """The thread's pending interrupts that wait for a review."""
        state = await self.graph.aget_state({"configurable": {"thread_id": thread_id}})
        return [p for p in state.interrupts if isinstance(p.value, Mapping) and ITEM_KEY in p.value]

    async def on_event(self, event: Event) -> Resumed:
        """A verified webhook event: resume its thread if it decides its item."""
        thread_id = thread_of_event(event)
        decision = decision_of_event(event)
        if thread_id is None or event.item_id is None:
            return Resumed("ignored", item_id=event.item_id)
        if decision is None:
            return Resumed("undecided", thread_id, event.item_id)
        return await self.resume(thread_id, event.item_id, decision)

    async def poll(self, client: AsyncClient, thread_ids: Iterable[str]) -> list[Resumed]:
        """``Resumer.poll`` with an ``AsyncClient``."""
        done = []
        for thread_id in thread_ids:
            for pending in await self.paused_on(thread_id):
                decision = decision_of_item(await client.item(int(pending.value[ITEM_KEY])))
                if decision is not None:
                    done.append(await self.resume(thread_id, int(pending.value[ITEM_KEY]), decision))
        return done

    async def resume(self, thread_id: str, item_id: int, decision: Decision) -> Resumed:
        """``Resumer.resume``, awaited: once, only while the thread is paused
        on the item, only for the caller that claims it in the ledger."""
        paused = [p for p in await self.paused_on(thread_id) if int(p.value[ITEM_KEY]) == item_id]
        if not paused:
            return Resumed("not_waiting", thread_id, item_id)
        # The ledger is SQLite and may wait on another process's insert: off the event loop.
        if not await asyncio.to_thread(self.ledger.claim, item_id, thread_id):
            return Resumed("duplicate", thread_id, item_id)
        value = resume_value(decision, paused[0].value)
        config = {"configurable": {"thread_id": thread_id}}
        try:
            result = await self.graph.ainvoke(Command(resume={paused[0].id: value}), config)
        except BaseException:
            await asyncio.to_thread(self.ledger.release, item_id)
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
    500, so the server delivers the event again. An async handler
    (``AsyncResumer.on_event``) is awaited on the ASGI app's event loop, so
    it serves through ``receiver.asgi`` only."""

    def __init__(self, secret: str, handle: Callable[[Event], Any]) -> None:
        standard_secret(secret)  # a secret that is not whsec_<base64> is refused here, not at each delivery
        self.secret = secret
        self.handle = handle
        self.is_async = inspect.iscoroutinefunction(handle)

    def _verified(self, headers: Mapping[str, str], body: bytes) -> Event | tuple[int, dict[str, Any]]:
        try:
            return verify_signature(self.secret, headers, body)
        except ReviewqueueError as exc:
            return 400, {"error": exc.code}

    @staticmethod
    def _done(event: Event, done: Any) -> tuple[int, dict[str, Any]]:
        outcome = getattr(done, "outcome", None)
        return 200, {"event_id": event.id, **({"outcome": outcome} if outcome else {})}

    def receive(self, headers: Mapping[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
        """The status and JSON body to answer one delivery with. ``headers``
        in any case: ``verify_signature`` reads the ones it signs."""
        event = self._verified(headers, body)
        if not isinstance(event, Event):
            return event
        if self.is_async:
            log.error("an async webhook handler serves through the ASGI app only", extra={"event_id": event.id})
            return 500, {"error": "handler_is_async"}
        try:
            done = self.handle(event)
        except Exception:
            log.exception("webhook handler failed", extra={"event_id": event.id})
            return 500, {"error": "handler_failed"}
        return self._done(event, done)

    async def areceive(self, headers: Mapping[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
        """``receive`` for the ASGI app: an async handler is awaited here; a
        sync one, which resumes a graph and so blocks, runs off the event loop."""
        if not self.is_async:
            return await asyncio.to_thread(self.receive, headers, body)
        event = self._verified(headers, body)
        if not isinstance(event, Event):
            return event
        try:
            done = await self.handle(event)
        except Exception:
            log.exception("webhook handler failed", extra={"event_id": event.id})
            return 500, {"error": "handler_failed"}
        return self._done(event, done)

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
            status, answer = await self.areceive(dict(pairs), b"".join(chunks))
        payload = json.dumps(answer).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})
