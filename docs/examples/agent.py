"""An example agent that closes the loop with reviewqueue.

It pushes its cut-off output for review, waits for the verdict, and when a
reviewer sends the output back with a note it revises the output and pushes
the revision, until the output is approved, rejected, filtered or shed, or it
runs out of rounds.

Two ways to wait:

- ``--wait poll`` (the default) asks the server with ``wait_for_verdict``.
- ``--wait webhook`` starts a small receiver on ``--listen`` and passes its
  address as the output's ``callback_url``; the receiver accepts only
  requests whose Standard Webhooks signature (``webhook-id``,
  ``webhook-timestamp``, ``webhook-signature``) verifies with ``--secret``,
  and takes each signed ``webhook-id`` once. The server must allow the
  receiver's host (``WEBHOOK_ALLOWED_HOSTS``).

How a revision is made is pluggable: ``--revise package.module:function``
names a ``function(output: str, note: str) -> str``; from Python, pass
``revise=`` to ``run_agent``. The default only appends the note as a comment,
which is enough to see the loop turn.

Either way the agent hears only final verdicts: a verdict reaches it once
the reviewer's undo window (``REVIEWQUEUE_UNDO_SECONDS``, 15 s by default)
has closed, so a verdict the reviewer took back never reaches it, and a
send-back is accepted as ``previous_item`` from that moment on.

    python docs/examples/agent.py --url http://127.0.0.1:8000 --token rq_... \\
        --task "Write is_even(n)" --output-file answer.py

Each step is printed as one JSON line on stdout; the last says how it ended.
The exit status is 0 when the output was approved, 1 otherwise.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import queue
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from reviewqueue.client import (
    Backpressure,
    Client,
    Event,
    Output,
    ReviewqueueError,
    verify_signature,
)

Revise = Callable[[str, str], str]
# The events after which an item will not change on its own.
FINAL_EVENTS = {"item.decided", "item.sent_back", "item.shed", "item.filtered"}
# A webhook body is a small JSON event; anything larger is refused unread.
MAX_BODY = 1_000_000


@dataclass(frozen=True)
class Verdict:
    """How one pushed output ended: ``status`` is approved, rejected,
    filtered, shed or sent_back; ``note`` is the reviewer's, if any."""

    status: str
    note: str = ""


class Waiter(Protocol):
    callback_url: str | None

    def wait(self, item_id: int, timeout: float) -> Verdict: ...


def say(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def append_note(output: str, note: str) -> str:
    """The default revision: the note, kept as a comment above the output."""
    return f"# revised after review: {note}\n{output}"


class PollingWaiter:
    """Waits by asking the server (``Client.wait_for_verdict``)."""

    callback_url: str | None = None

    def __init__(self, client: Client) -> None:
        self.client = client

    def wait(self, item_id: int, timeout: float) -> Verdict:
        item = self.client.wait_for_verdict(item_id, timeout=timeout)
        return Verdict(item.status, item.note)


class WebhookWaiter:
    """Waits for the server's signed webhook on a receiver of its own.

    Deliveries may repeat (the server retries until it gets a 2xx), so events
    are taken once by their signed id (``Event.id``, which
    ``verify_signature`` checked against ``webhook-id``): an id that is not
    signed could be changed by whoever replays a captured delivery. A request
    that does not verify, however malformed, is answered 400 and ignored.
    """

    def __init__(self, secret: str, host: str = "127.0.0.1", port: int = 0) -> None:
        self.secret = secret
        self.events: queue.Queue[Event] = queue.Queue()
        self.seen: set[str] = set()
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer((host, port), self._handler())
        bound_host, bound_port = self.httpd.server_address[:2]
        self.callback_url: str | None = f"http://{bound_host}:{bound_port}/reviewqueue"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def receive(self, headers: Any, body: bytes) -> int:
        """Check one delivery and queue its event; the HTTP status to answer."""
        try:
            event = verify_signature(self.secret, headers, body)
        except ReviewqueueError as exc:
            say("webhook_refused", code=exc.code)
            return 400
        with self.lock:
            if event.id in self.seen:
                return 200
            self.seen.add(event.id)
        self.events.put(event)
        return 200

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        waiter = self

        class Receiver(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = self.headers.get("Content-Length") or "0"
                if not length.isascii() or not length.isdigit() or int(length) > MAX_BODY:
                    status = 400  # answer, never die: the sender learns it was refused
                else:
                    status = waiter.receive(self.headers, self.rfile.read(int(length)))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Receiver

    def wait(self, item_id: int, timeout: float) -> Verdict:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no webhook for item {item_id} within {timeout:g} s")
            try:
                event = self.events.get(timeout=remaining)
            except queue.Empty:
                continue
            if event.item_id == item_id and event.type in FINAL_EVENTS:
                return _verdict_of(event)


def _verdict_of(event: Event) -> Verdict:
    note = str(event.data.get("note") or "")
    if event.type == "item.decided":
        return Verdict("approved" if event.data.get("decision") == "approve" else "rejected", note)
    return Verdict(event.type.removeprefix("item."), note)


def push(
    client: Client, key: str, task: str, output: str, callback_url: str | None, previous_item: int | None = None
) -> Output:
    """Push one output, waiting out backpressure: the server asked for a
    pause, and the same idempotency key makes repeating safe. A revision
    names the sent-back item it revises (``previous_item``), so the server
    keeps it as that item's next version, with the reviewer's note in its
    history."""
    revises = {} if previous_item is None else {"previous_item": previous_item}
    while True:
        pushed = client.push_output(
            idempotency_key=key,
            task_description=task,
            final_output=output,
            cutoff_reason="step_limit",
            callback_url=callback_url,
            **revises,
        )
        if not isinstance(pushed, Backpressure):
            return pushed
        say("held_back", retry_after=pushed.retry_after, error=pushed.error)
        time.sleep(pushed.retry_after)


def run_agent(
    client: Client,
    waiter: Waiter,
    *,
    task: str,
    output: str,
    revise: Revise = append_note,
    rounds: int = 3,
    timeout: float = 3600.0,
    key: str | None = None,
) -> Verdict:
    """Push ``output``, wait for its verdict, and push a revision each time it
    is sent back, ``rounds`` pushes at most. Returns the last verdict."""
    key = key or f"example-{uuid.uuid4().hex[:12]}"
    verdict = Verdict("not_pushed")
    previous_item: int | None = None
    for round_number in range(1, rounds + 1):
        pushed = push(client, f"{key}-v{round_number}", task, output, waiter.callback_url, previous_item)
        say("pushed", item_id=pushed.item_id, outcome=pushed.outcome, backoff=pushed.backoff, round=round_number)
        if pushed.outcome in ("shed", "filtered"):
            return Verdict(pushed.outcome)
        verdict = waiter.wait(pushed.item_id, timeout)
        say("verdict", item_id=pushed.item_id, status=verdict.status, note=verdict.note)
        if verdict.status != "sent_back":
            return verdict
        previous_item = pushed.item_id
        output = revise(output, verdict.note)
    return verdict


def load_revise(spec: str | None) -> Revise:
    if not spec:
        return append_note
    module, _, name = spec.partition(":")
    function: Revise = getattr(importlib.import_module(module), name)
    return function


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Push an output to reviewqueue and wait for its verdict.")
    parser.add_argument("--url", default=os.environ.get("REVIEWQUEUE_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--token", default=os.environ.get("REVIEWQUEUE_TOKEN"), help="or REVIEWQUEUE_TOKEN")
    parser.add_argument("--task", default="Write is_even(n) that returns True for even integers.")
    parser.add_argument("--output-file", help="the output to push (default: a small is_even)")
    parser.add_argument("--key", help="idempotency key stem; each round appends -v<n>")
    parser.add_argument("--wait", choices=("poll", "webhook"), default="poll")
    parser.add_argument("--listen", default="127.0.0.1:0", help="webhook receiver address, host:port")
    parser.add_argument("--secret", default=os.environ.get("REVIEWQUEUE_WEBHOOK_SECRET"), help="webhook secret")
    parser.add_argument("--revise", help="module:function(output, note) -> revised output")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for each verdict")
    args = parser.parse_args(argv)
    if not args.token:
        parser.error("--token or REVIEWQUEUE_TOKEN is required")
    if args.wait == "webhook" and not args.secret:
        parser.error("--wait webhook needs --secret or REVIEWQUEUE_WEBHOOK_SECRET")
    return args


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    output = Path(args.output_file).read_text() if args.output_file else "def is_even(n):\n    return n % 2 == 0\n"
    with Client(args.url, args.token) as client:
        if args.wait == "webhook":
            host, _, port = args.listen.rpartition(":")
            waiter: Waiter = WebhookWaiter(args.secret, host or "127.0.0.1", int(port or 0))
        else:
            waiter = PollingWaiter(client)
        try:
            verdict = run_agent(
                client,
                waiter,
                task=args.task,
                output=output,
                revise=load_revise(args.revise),
                rounds=args.rounds,
                timeout=args.timeout,
                key=args.key,
            )
        except (ReviewqueueError, TimeoutError) as exc:
            say("failed", error=getattr(exc, "code", "timeout"), detail=str(exc))
            return 1
        finally:
            if isinstance(waiter, WebhookWaiter):
                waiter.close()
    say("done", status=verdict.status)
    return 0 if verdict.status == "approved" else 1


if __name__ == "__main__":
    sys.exit(main())
