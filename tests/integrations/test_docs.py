"""Every example of docs/INTEGRATIONS.md, run as it stands against the live
server: each in a process of its own, with REVIEWQUEUE_URL and
REVIEWQUEUE_TOKEN set, while a reviewer here decides the item it pushed.
The MCP configuration snippet starts the server it names."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.client.flavours import run_async
from tests.reviewqueue.worker_helpers import wait_for

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "INTEGRATIONS.md"


def examples() -> dict[str, tuple[str, str]]:
    """The fenced block after each ``<!-- example: NAME -->``, as (language, code)."""
    found = re.findall(r"<!-- example: ([\w-]+) -->\n```(\w+)\n(.*?)```", DOC.read_text(), re.DOTALL)
    return {name: (language, code) for name, language, code in found}


def test_the_doc_has_an_example_per_adapter() -> None:
    assert set(examples()) == {"async", "langgraph", "langgraph-async", "mcp-config", "mcp"}


@pytest.mark.parametrize(
    ("name", "decision", "expected"),
    [
        ("async", "approve", "verdict approved approve"),
        ("langgraph", "reject", "result reject: logic_error off by one"),
        ("langgraph-async", "reject", "result reject: logic_error off by one"),
        ("mcp", "approve", "verdict approved approve"),
    ],
)
def test_each_example_runs_and_sees_its_verdict(
    live_url: str,
    issue: Callable[..., str],
    decide_as_reviewer: Callable[..., None],
    tmp_path: Path,
    name: str,
    decision: str,
    expected: str,
) -> None:
    from reviewqueue.models import ReviewItem

    language, code = examples()[name]
    assert language == "python"
    script = tmp_path / f"example_{name}.py"  # not langgraph.py: it would shadow the package
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REVIEWQUEUE_URL": live_url, "REVIEWQUEUE_TOKEN": issue("doc-agent")}
    proc = subprocess.Popen(
        [sys.executable, str(script)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:

        def pushed() -> bool:
            assert proc.poll() is None, proc.communicate()
            return ReviewItem.objects.filter(producer="doc-agent").exists()

        wait_for(pushed, 60, f"the {name} example's push")
        item = ReviewItem.objects.get(producer="doc-agent")
        decide_as_reviewer(item.pk, approve=decision == "approve", reason_label="logic_error", note="off by one")
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert f"pushed {item.pk} mode normal" in stdout or name.startswith("langgraph"), stdout
    assert stdout.strip().splitlines()[-1] == expected


def test_the_mcp_configuration_starts_a_server_that_answers(live_url: str, issue: Callable[..., str]) -> None:
    language, snippet = examples()["mcp-config"]
    assert language == "json"
    config: dict[str, Any] = json.loads(snippet)["mcpServers"]["reviewqueue"]
    assert set(config["env"]) == {"REVIEWQUEUE_URL", "REVIEWQUEUE_TOKEN"}
    # The agent's python is this environment's; the URL and token are the live server's.
    env = {"REVIEWQUEUE_URL": live_url, "REVIEWQUEUE_TOKEN": issue("doc-agent", ("outputs",))}
    params = StdioServerParameters(command=sys.executable, args=config["args"], env=env)

    async def status() -> dict[str, Any]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            answer = await session.call_tool("queue_status", {})
            assert not answer.is_error and answer.structured_content is not None
            return dict(answer.structured_content)

    assert config["command"] == "python"
    assert run_async(status())["queue"] == "default"
