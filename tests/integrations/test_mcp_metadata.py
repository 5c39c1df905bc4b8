"""The MCP tool request_review takes the agent's metadata, get_verdict hands
it back, and metadata the server refuses is a result naming the field, not
a crash. Over stdio, with the SDK's own session, against the live server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from mcp import ClientSession

from .test_mcp_stdio import call, with_session

pytestmark = pytest.mark.slow


def test_metadata_goes_with_the_request_and_comes_back_with_the_verdict(
    live_url: str, issue: Callable[..., str]
) -> None:
    token = issue("coding-agent", ("outputs",))
    mine = {"task": "t-12", "branch": "fix/flaky-test"}

    async def scenario(session: ClientSession) -> list[tuple[dict[str, Any], bool]]:
        pushed = await call(session, "request_review", task="t", output="o", metadata=mine)
        read = await call(session, "get_verdict", item_id=pushed[0]["item_id"])
        refused = await call(session, "request_review", task="t", output="o2", metadata={"blob": "x" * 9000})
        return [pushed, read, refused]

    pushed, read, refused = with_session(live_url, token, scenario)
    assert not pushed[1] and not read[1]
    assert read[0]["metadata"] == mine
    assert refused[1] and refused[0]["error"] == "invalid" and set(refused[0]["fields"]) == {"metadata"}
