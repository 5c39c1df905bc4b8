"""A real HTTP receiver on loopback for webhook tests: a ThreadingHTTPServer in
a thread of the test process that records every request and answers as the
test scripts it (a status code per request, a hang, or nothing at all when
stopped, so connections are refused)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..worker_helpers import free_port


@dataclass
class Received:
    """One request as the receiver saw it."""

    headers: dict[str, str]
    body: bytes
    status: int
    at: float

    @property
    def event(self) -> dict[str, Any]:
        return json.loads(self.body)


@dataclass
class Receiver:
    """Scripted answers: ``statuses`` are used in turn (then ``default``);
    ``hang`` seconds are slept before answering; ``gate``, when set, blocks
    each request until it is set."""

    port: int = field(default_factory=free_port)
    statuses: list[int] = field(default_factory=list)
    default: int = 200
    hang: float = 0.0
    # what each answer's body holds
    reply: bytes = b"ok"
    gate: threading.Event | None = None
    requests: list[Received] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    server: ThreadingHTTPServer | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    # requests being handled right now, and the most there ever were at once
    inside: int = 0
    most_inside: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def answer(self) -> int:
        with self.lock:
            return self.statuses.pop(0) if self.statuses else self.default

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    receiver.inside += 1
                    receiver.most_inside = max(receiver.most_inside, receiver.inside)
                receiver.arrived.set()
                if receiver.gate is not None:
                    receiver.gate.wait(120)
                if receiver.hang:
                    time.sleep(receiver.hang)
                status = receiver.answer()
                with receiver.lock:
                    receiver.inside -= 1
                    receiver.requests.append(Received(dict(self.headers.items()), body, status, time.monotonic()))
                with contextlib.suppress(OSError):
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(receiver.reply)))
                    self.end_headers()
                    self.wfile.write(receiver.reply)

            def log_message(self, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Stop listening: connections to the port are refused from now on."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def events(self, status: int | None = 200) -> list[dict[str, Any]]:
        with self.lock:
            return [r.event for r in self.requests if status is None or r.status == status]

    def count(self, predicate: Callable[[Received], bool] = lambda r: True) -> int:
        with self.lock:
            return sum(1 for r in self.requests if predicate(r))


@contextlib.contextmanager
def receiving(**kwargs: Any) -> Iterator[Receiver]:
    receiver = Receiver(**kwargs)
    receiver.start()
    try:
        yield receiver
    finally:
        if receiver.gate is not None:
            receiver.gate.set()
        receiver.stop()
