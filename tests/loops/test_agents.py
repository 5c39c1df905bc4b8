"""The agents: the OpenAI-compatible client against a local fake endpoint, the
command agent, scripted replays and the factory."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from loops.agents import AgentError, CommandAgent, OpenAIAgent, make_agent, shipped_replays
from loops.spec import Task, TaskKind, builtin_suite


class FakeLLM(BaseHTTPRequestHandler):
    # Each test sets ``plan``: a list of (status, delay_s) served in order.
    plan: ClassVar[list[tuple[int, float]]] = []
    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        status, delay = type(self).plan.pop(0) if type(self).plan else (200, 0.0)
        if delay:
            threading.Event().wait(delay)
        payload = {
            "choices": [{"message": {"role": "assistant", "content": "<think>hm</think>answer"}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }
        data = json.dumps(payload if status == 200 else {"error": "boom"}).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    FakeLLM.plan = []
    FakeLLM.requests = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeLLM)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def agent_for(url: str, **options: Any) -> OpenAIAgent:
    sleeps: list[float] = []
    agent = OpenAIAgent(base_url=url, model="m", api_key="k", sleep=sleeps.append, **options)
    agent.sleeps = sleeps  # type: ignore[attr-defined]
    return agent


def test_it_calls_the_chat_endpoint_and_counts_tokens(server: str) -> None:
    agent = agent_for(server)
    reply = agent.attempt("hello")
    assert reply.text == "<think>hm</think>answer"  # stripping thinking is the runner's job
    assert reply.tokens == 18
    sent = FakeLLM.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["auth"] == "Bearer k"
    assert sent["body"]["messages"] == [{"role": "user", "content": "hello"}]


def test_it_retries_a_server_error_with_backoff(server: str) -> None:
    FakeLLM.plan = [(500, 0.0), (200, 0.0)]
    agent = agent_for(server, backoff_s=0.25)
    assert agent.attempt("x").text.endswith("answer")
    assert len(FakeLLM.requests) == 2
    assert agent.sleeps == [0.25]  # type: ignore[attr-defined]


def test_it_retries_after_a_timeout(server: str) -> None:
    FakeLLM.plan = [(200, 1.5), (200, 0.0)]
    agent = agent_for(server, timeout_s=0.3)
    assert agent.attempt("x").tokens == 18
    assert len(FakeLLM.requests) == 2


def test_it_gives_up_after_its_retries(server: str) -> None:
    FakeLLM.plan = [(503, 0.0)] * 3
    agent = agent_for(server, retries=2, backoff_s=0.1)
    with pytest.raises(AgentError, match="3 tries"):
        agent.attempt("x")
    assert agent.sleeps == [0.1, 0.2]  # type: ignore[attr-defined]


def test_it_does_not_retry_a_client_error(server: str) -> None:
    FakeLLM.plan = [(401, 0.0)]
    with pytest.raises(AgentError, match="401"):
        agent_for(server).attempt("x")
    assert len(FakeLLM.requests) == 1


def test_it_reads_the_endpoint_from_the_environment(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_BASE_URL", server)
    monkeypatch.setenv("LLM_MODEL", "env-model")
    monkeypatch.setenv("LLM_API_KEY", "env-key")
    make_agent("openai").attempt("x")
    assert FakeLLM.requests[0]["body"]["model"] == "env-model"
    assert FakeLLM.requests[0]["auth"] == "Bearer env-key"


def test_it_runs_an_external_command_with_the_prompt_on_stdin(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text("import sys\nprompt = sys.stdin.read()\nprint('echo:' + prompt.upper())\n")
    agent = make_agent("command", command=[sys.executable, str(script)])
    reply = agent.attempt("fix it")
    assert reply.text.strip() == "echo:FIX IT"
    assert reply.tokens > 0


def test_it_fails_a_command_that_exits_non_zero(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(AgentError, match="status 3"):
        CommandAgent([sys.executable, str(script)]).attempt("x")


def test_it_times_out_a_slow_command(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text("import time\ntime.sleep(5)\n")
    with pytest.raises(AgentError, match="timed out"):
        CommandAgent([sys.executable, str(script)], timeout_s=0.3).attempt("x")


def test_it_ships_a_replay_for_every_builtin_task() -> None:
    replays = shipped_replays()
    assert {t.id for t in builtin_suite()} <= set(replays)


def test_it_replays_attempts_in_order_then_repeats_the_last(suite: dict[str, Task]) -> None:
    task = suite["is_even"]
    agent = make_agent("scripted", task=task)
    texts = [agent.attempt("p").text for _ in range(4)]
    attempts = shipped_replays()["is_even"].attempts
    assert texts == [attempts[0], attempts[1], attempts[1], attempts[1]]


def test_it_falls_back_to_a_default_replay_per_kind() -> None:
    open_task = Task(id="new_open", description="Write.", kind=TaskKind.OPEN)
    code_task = Task.from_dict({**builtin_suite()[0].to_dict(), "id": "new_code"})
    agent = make_agent("scripted", task=open_task)
    first, second = agent.attempt("p").text, agent.attempt("p").text
    assert first and second and first != second  # drafts progress
    code = make_agent("scripted", task=code_task).attempt("p").text
    assert "def " not in code  # defines nothing, so the red line fails the same way each time


def test_it_rejects_an_unknown_agent() -> None:
    with pytest.raises(AgentError, match="unknown agent"):
        make_agent("psychic")
