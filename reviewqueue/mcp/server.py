"""The MCP tools, each one call of ``AsyncClient`` whose answer, error or
backpressure included, comes back as a tool result an agent can read.

Every result is a JSON object (as text, and as structured content). Refusals
the agent can act on carry ``error`` (the API's code), ``detail``, and
``fields`` for a bad argument; they are marked ``isError`` so the agent's
host shows them as failed calls, but the server keeps running. A queue that
asks to be asked later is not an error: ``held_back`` with ``retry_after``
and the ``idempotency_key`` to repeat the call with.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mcp.server import MCPServer
from mcp_types import CallToolResult, TextContent

from reviewqueue.client import (
    AsyncClient,
    Backpressure,
    Item,
    ReviewqueueError,
    VerdictTimeout,
)

# A tool call that waits holds the agent's turn; an hour is the most one may ask.
MAX_WAIT_SECONDS = 3600.0
# What queue_status reports of GET /api/stats (the rest is for dashboards).
STATUS_KEYS = (
    "queue",
    "mode",
    "depth",
    "pending",
    "claimed",
    "capacity",
    "low_watermark",
    "high_watermark",
    "oldest_waiting_seconds",
    "ratio_stays_above_one",
)
ADVICE = {
    "normal": "the queue keeps up: push as usual",
    "draft": "the queue is past its high watermark: push fewer outputs, only those a human must see",
    "shedding": "the queue is full: the lowest priority outputs are dropped; push only what matters most",
}


@dataclass(frozen=True)
class Settings:
    url: str
    token: str


def settings_from_env() -> Settings:
    """``REVIEWQUEUE_URL`` (default http://127.0.0.1:8000) and ``REVIEWQUEUE_TOKEN``
    (a producer token; the scope ``outputs`` is enough for every tool)."""
    return Settings(
        url=os.environ.get("REVIEWQUEUE_URL", "http://127.0.0.1:8000"), token=os.environ.get("REVIEWQUEUE_TOKEN", "")
    )


def result(body: dict[str, Any], *, error: bool = False) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(body, sort_keys=True))],
        structured_content=body,
        is_error=error,
    )


def refusal(exc: ReviewqueueError) -> CallToolResult:
    body: dict[str, Any] = {"error": exc.code, "detail": str(exc)}
    for name in ("fields", "missing_scope", "retry_after", "status_code", "last_status"):
        value = getattr(exc, name, None)
        if value not in (None, {}, ""):
            body[name] = value
    return result(body, error=True)


def verdict(item: Item) -> dict[str, Any]:
    """What an agent needs of an item: where it stands and, once decided, what
    the reviewer said. ``output_to_use`` is set for an edit (use it instead)."""
    body: dict[str, Any] = {"item_id": item.item_id, "status": item.status, "decided": item.decided}
    if item.awaiting:
        body["awaiting"] = item.awaiting
    if item.metadata:
        body["metadata"] = item.metadata
    if item.verdict is not None:
        body["decision"] = item.verdict.decision
        body["reason_label"] = item.verdict.reason_label
        body["note"] = item.verdict.note
        if item.verdict.edited_output is not None:
            body["output_to_use"] = item.verdict.edited_output
    elif item.note:
        body["note"] = item.note
    return body


# Long: the four tools are closures over one client and the settings; each is short.
def build_server(settings: Settings, *, name: str = "reviewqueue") -> MCPServer:
    """The MCP server with its four tools, talking to ``settings.url``."""
    server = MCPServer(
        name,
        instructions=(
            "Ask the human review team for a verdict on an output: request_review, then "
            "wait_for_verdict (or get_verdict later). Respect held_back and the queue's mode."
        ),
    )

    clients: list[AsyncClient] = []

    async def call(use: Callable[[AsyncClient], Awaitable[CallToolResult]]) -> CallToolResult:
        if not settings.token:
            return result(
                {
                    "error": "not_configured",
                    "detail": "set REVIEWQUEUE_TOKEN (a producer token with the outputs scope)",
                },
                error=True,
            )
        if not clients:
            # One client for the server's life: its connections are kept alive
            # between tool calls (the server runs one event loop).
            clients.append(AsyncClient(settings.url, settings.token))
        try:
            return await use(clients[0])
        except ReviewqueueError as exc:
            return refusal(exc)

    @server.tool()
    async def request_review(
        task: str,
        output: str,
        queue: str | None = None,
        priority: int | None = None,
        cutoff_reason: str | None = None,
        idempotency_key: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> CallToolResult:
        """Send an output to the human review queue. Returns its item_id and the
        queue's mode (normal, draft or shedding). When the answer says
        held_back, wait retry_after seconds and call again with the same
        idempotency_key. cutoff_reason says why the agent stopped (step_limit,
        stuck, external, ...); a higher priority is shed last. metadata is a
        JSON object of yours (a task or branch name) that get_verdict
        hands back and reviewers never see."""
        key = idempotency_key or f"mcp-{uuid.uuid4().hex}"

        async def push(client: AsyncClient) -> CallToolResult:
            pushed = await client.push_output(
                idempotency_key=key,
                task_description=task,
                final_output=output,
                queue=queue,
                priority=priority,
                cutoff_reason=cutoff_reason,
                metadata=metadata,
            )
            if isinstance(pushed, Backpressure):
                return result(
                    {
                        "held_back": True,
                        "retry_after": pushed.retry_after,
                        "error": pushed.error,
                        "detail": pushed.detail,
                        "idempotency_key": key,
                        "advice": f"nothing was queued: wait {pushed.retry_after:g} s, then call again with this key",
                    }
                )
            return result(
                {
                    "item_id": pushed.item_id,
                    "outcome": pushed.outcome,
                    "status": pushed.status,
                    "queue": str(pushed.raw.get("queue") or queue or ""),
                    "mode": pushed.mode,
                    "backoff": pushed.backoff,
                    "idempotency_key": key,
                    "advice": "shed: nobody will review this output"
                    if pushed.outcome == "shed"
                    else ADVICE.get(pushed.mode, ""),
                }
            )

        return await call(push)

    @server.tool()
    async def get_verdict(item_id: int) -> CallToolResult:
        """Where an item stands now: its status and, once decided, the decision
        (approve, reject, edit, send_back), the reviewer's note and reason, and
        output_to_use after an edit. Does not wait."""

        async def read(client: AsyncClient) -> CallToolResult:
            return result(verdict(await client.item(item_id)))

        return await call(read)

    @server.tool()
    async def wait_for_verdict(item_id: int, timeout_s: float = 300.0) -> CallToolResult:
        """Wait up to timeout_s seconds (at most an hour) for the item's verdict,
        then answer as get_verdict does; decided false and timed_out true when
        nobody decided in time (call again to keep waiting)."""
        timeout = min(max(float(timeout_s), 0.0), MAX_WAIT_SECONDS)

        async def wait(client: AsyncClient) -> CallToolResult:
            try:
                item = await client.wait_for_verdict(item_id, timeout=timeout)
            except VerdictTimeout as exc:
                return result(
                    {"item_id": item_id, "decided": False, "timed_out": True, "status": exc.last_status or "unknown"}
                )
            return result(verdict(item))

        return await call(wait)

    @server.tool()
    async def queue_status(queue: str | None = None) -> CallToolResult:
        """How busy a review queue is (the default queue unless named): mode,
        depth, capacity, the oldest wait, and advice on how much to push."""

        async def status(client: AsyncClient) -> CallToolResult:
            stats = await client.stats(queue)
            body = {key: stats[key] for key in STATUS_KEYS if key in stats}
            body["advice"] = ADVICE.get(str(stats.get("mode")), "")
            return result(body)

        return await call(status)

    return server
