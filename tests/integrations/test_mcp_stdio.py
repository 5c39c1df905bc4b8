"""The MCP server as a coding agent runs it: ``python -m reviewqueue.mcp`` in
a process of its own, spoken to over stdio by the SDK's own ClientSession,
with an outputs-only token against the live server. A verdict made by a
reviewer comes back through wait_for_verdict; refusals and a busy queue come
back as results the agent reads, and the server keeps answering."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from reviewqueue.mcp.server import ADVICE
from tests.client.flavours import run_async

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def server_params(url: str, token: str) -> StdioServerParameters:
    env = {"REVIEWQUEUE_URL": url, "REVIEWQUEUE_TOKEN": token, "PYTHONPATH": str(ROOT)}
    return StdioServerParameters(command=sys.executable, args=["-m", "reviewqueue.mcp"], env=env, cwd=str(ROOT))


def with_session(url: str, token: str, scenario: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        async with stdio_client(server_params(url, token)) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await scenario(session)

    return run_async(run())


async def call(session: ClientSession, tool: str, **arguments: Any) -> tuple[dict[str, Any], bool]:
    answer = await session.call_tool(tool, arguments)
    assert answer.structured_content is not None, answer
    return dict(answer.structured_content), bool(answer.is_error)


def in_thread(work: Callable[[], None]) -> Callable[[], None]:
    """ORM work for asyncio.to_thread: the thread's connection is closed after."""

    def run() -> None:
        from django.db import connection

        try:
            work()
        finally:
            connection.close()

    return run


def test_a_review_round_trip_over_stdio(
    live_url: str, issue: Callable[..., str], decide_as_reviewer: Callable[..., None]
) -> None:
    token = issue("coding-agent", ("outputs",))

    async def scenario(session: ClientSession) -> dict[str, Any]:
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert names == {"request_review", "get_verdict", "wait_for_verdict", "queue_status"}
        pushed, failed = await call(
            session, "request_review", task="Write is_even(n)", output="def is_even(n): return n % 2 == 0"
        )
        assert not failed and (pushed["outcome"], pushed["mode"], pushed["queue"]) == ("enqueued", "normal", "default")
        now, _ = await call(session, "get_verdict", item_id=pushed["item_id"])
        assert (now["status"], now["decided"]) == ("pending", False)
        status, failed = await call(session, "queue_status")
        assert not failed and (status["queue"], status["mode"], status["depth"]) == ("default", "normal", 1)
        item_id = pushed["item_id"]
        waiting = asyncio.ensure_future(call(session, "wait_for_verdict", item_id=item_id, timeout_s=60))
        await asyncio.sleep(0.5)
        reject = in_thread(lambda: decide_as_reviewer(item_id, approve=False, reason_label="logic_error", note="n<0"))
        await asyncio.to_thread(reject)
        verdict, failed = await waiting
        assert not failed
        return verdict

    verdict = with_session(live_url, token, scenario)
    assert verdict["status"] == "rejected" and verdict["decided"] is True
    assert (verdict["decision"], verdict["reason_label"], verdict["note"]) == ("reject", "logic_error", "n<0")


def test_refusals_and_a_busy_queue_are_results_the_agent_reads(live_url: str, issue: Callable[..., str]) -> None:
    from reviewqueue.models import Queue

    Queue.current()
    Queue.objects.update(capacity=3)  # the third item fills it: past the high watermark
    token = issue("coding-agent", ("outputs",))

    async def scenario(session: ClientSession) -> list[tuple[dict[str, Any], bool]]:
        answers = [await call(session, "request_review", task="t", output=f"o{n}", priority=1) for n in range(3)]
        answers.append(await call(session, "request_review", task="t", output="o", priority=5000))
        answers.append(await call(session, "get_verdict", item_id=999_999))
        answers.append(await call(session, "queue_status", queue="no-such-queue"))
        answers.append(await call(session, "wait_for_verdict", item_id=answers[0][0]["item_id"], timeout_s=0.2))
        answers.append(await call(session, "queue_status"))
        return answers

    *pushes, bad_priority, unknown, bad_queue, timed_out, status = with_session(live_url, token, scenario)
    assert [failed for _, failed in pushes] == [False, False, False]
    assert [p["backoff"] for p, _ in pushes] == [False, False, True]
    busy = pushes[2][0]
    assert busy["mode"] in ("draft", "shedding") and busy["advice"] == ADVICE[busy["mode"]]
    assert bad_priority[1] and bad_priority[0]["error"] == "invalid" and set(bad_priority[0]["fields"]) == {"priority"}
    assert unknown[1] and (unknown[0]["error"], unknown[0]["status_code"]) == ("not_found", 404)
    assert bad_queue[1] and set(bad_queue[0]["fields"]) == {"queue"}
    assert not timed_out[1] and timed_out[0] == {
        "item_id": pushes[0][0]["item_id"],
        "decided": False,
        "timed_out": True,
        "status": "pending",
    }
    assert not status[1] and (status[0]["mode"], status[0]["depth"]) == (busy["mode"], 3)


def test_a_token_without_the_scope_or_no_token_is_a_readable_refusal(live_url: str, issue: Callable[..., str]) -> None:
    async def push(session: ClientSession) -> tuple[dict[str, Any], bool]:
        return await call(session, "request_review", task="t", output="o")

    scraper, failed = with_session(live_url, issue("scraper", ("metrics",)), push)
    assert failed and (scraper["error"], scraper["missing_scope"]) == ("forbidden", "outputs")
    missing, failed = with_session(live_url, "", push)
    assert failed and missing["error"] == "not_configured"


def test_the_same_tools_over_streamable_http(live_url: str, issue: Callable[..., str], tmp_path: Path) -> None:
    import os
    import subprocess

    from mcp.client.streamable_http import streamable_http_client

    from tests.reviewqueue.worker_helpers import free_port, wait_for

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REVIEWQUEUE_URL": live_url}
    env["REVIEWQUEUE_TOKEN"] = issue("http-agent", ("outputs",))
    command = [sys.executable, "-m", "reviewqueue.mcp", "--transport", "streamable-http", "--port", str(port)]
    with open(tmp_path / "mcp-http.log", "w") as log:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)

    def listening() -> bool:
        import socket

        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with (
            streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            pushed, _ = await call(session, "request_review", task="t", output="o", priority=2)
            status, _ = await call(session, "queue_status", queue="default")
            return pushed, status

    try:
        wait_for(listening, 30, "the MCP server to listen")
        pushed, status = run_async(scenario())
    finally:
        server.kill()
        server.wait(10)
    assert (pushed["outcome"], pushed["queue"]) == ("enqueued", "default")
    assert (status["queue"], status["depth"]) == ("default", 1)
