"""Agents behind one small interface: a prompt in, an :class:`AgentReply` out.

The runner never asks an agent whether it is done (ARCHITECTURE.md rule 1): an agent
only answers prompts; red lines and stop guards decide when the loop ends.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import yaml

from loops.hints import RESUME_HEADER
from loops.reply import Agent, AgentError, AgentReply, estimate_tokens

if TYPE_CHECKING:
    from loops.spec import Task

REPLAY_DIR = Path(__file__).parent / "replays"


# ---------------------------------------------------------------- scripted


@dataclass(frozen=True)
class Replay:
    task_id: str
    attempts: tuple[str, ...]
    note: str = ""
    # What the recorded agent answered when a reviewer sent its output back
    # with a note: played instead of ``attempts`` in a resumed run. Empty:
    # a resumed run replays ``attempts`` as a fresh one would.
    resumed: tuple[str, ...] = ()


def load_replay(path: str | Path) -> Replay:
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    attempts = tuple(str(a) for a in data["attempts"])
    if not attempts:
        raise ValueError(f"{path}: a replay needs at least one attempt")
    resumed = tuple(str(a) for a in data.get("resumed") or ())
    return Replay(task_id=str(data["task"]), attempts=attempts, note=str(data.get("note", "")), resumed=resumed)


def shipped_replays() -> dict[str, Replay]:
    """Every replay under ``loops/replays``, keyed by task id."""
    replays = (load_replay(p) for p in sorted(REPLAY_DIR.glob("*.yaml")))
    return {r.task_id: r for r in replays}


# A task without a shipped replay still runs offline: code tasks get an answer
# that defines nothing (so the red line fails the same way each time and the
# stuck guard ends it), open tasks get successive drafts.
_DEFAULT_ATTEMPTS: Mapping[str, tuple[str, ...]] = {
    "verifiable": ("# no answer yet\n",),
    "grey": ("# no answer yet\n",),
    "open": ("Draft 1.", "Draft 2, revised.", "Draft 3, tightened."),
}


def default_replay(task: Task) -> Replay:
    return Replay(task_id=task.id, attempts=_DEFAULT_ATTEMPTS[str(task.kind)], note="default")


class ScriptedAgent:
    """Replays recorded attempts in order; after the last one it repeats it,
    as a stuck agent would."""

    name = "scripted"

    def __init__(self, replay: Replay) -> None:
        self.replay = replay
        self.calls = 0

    def attempt(self, prompt: str) -> AgentReply:
        # A resumed run's prompt says so, as it would to a model; the replay
        # answers with what was recorded for that case, if anything was.
        attempts = self.replay.resumed if self.replay.resumed and RESUME_HEADER in prompt else self.replay.attempts
        text = attempts[min(self.calls, len(attempts) - 1)]
        self.calls += 1
        return AgentReply(text=text, tokens=estimate_tokens(prompt, text))


# ---------------------------------------------------------------- openai


class OpenAIAgent:
    """Any OpenAI-compatible ``/chat/completions`` endpoint.

    Retries transport errors, 429 and 5xx with exponential backoff; other 4xx
    fail at once since repeating the request cannot help.
    """

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        temperature: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        base_url = base_url or os.environ.get("LLM_BASE_URL", "")
        if not base_url:
            raise AgentError("LLM_BASE_URL is not set")
        self.model = model or os.environ.get("LLM_MODEL", "")
        if not self.model:
            raise AgentError("LLM_MODEL is not set")
        key = api_key if api_key is not None else os.environ.get("LLM_API_KEY", "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.retries = retries
        self.backoff_s = backoff_s
        self.temperature = temperature
        self.sleep = sleep
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.client = httpx.Client(timeout=timeout_s, headers=headers, transport=transport)

    def attempt(self, prompt: str) -> AgentReply:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        data = self._post(body)
        try:
            text = str(data["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError) as exc:
            raise AgentError("endpoint answered without choices[0].message.content") from exc
        usage = data.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or estimate_tokens(prompt))
        completion_tokens = int(usage.get("completion_tokens") or estimate_tokens(text))
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        return AgentReply(text=text, tokens=prompt_tokens + completion_tokens)

    def _post(self, body: Mapping[str, Any]) -> dict[str, Any]:
        last: str = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                response = self.client.post(self.url, json=body)
            except httpx.TransportError as exc:  # timeouts included
                last = type(exc).__name__
                continue
            if response.status_code == 429 or response.status_code >= 500:
                last = f"HTTP {response.status_code}"
                continue
            if response.status_code >= 400:
                raise AgentError(f"HTTP {response.status_code} from the endpoint")
            try:
                return dict(response.json())
            except ValueError as exc:
                raise AgentError("endpoint answered with invalid JSON") from exc
        raise AgentError(f"endpoint failed after {self.retries + 1} tries: {last}")

    def close(self) -> None:
        self.client.close()


# ---------------------------------------------------------------- command


class CommandAgent:
    """An external command: the prompt on stdin, the answer on stdout.

    Any coding-agent CLI fits. The command inherits the environment because
    such tools need their own credentials; it is the operator's choice of tool.
    """

    name = "command"

    def __init__(
        self,
        command: str | Sequence[str],
        *,
        timeout_s: float = 300.0,
        cwd: str | Path | None = None,
    ) -> None:
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.argv:
            raise AgentError("empty command")
        self.timeout_s = timeout_s
        self.cwd = cwd

    def attempt(self, prompt: str) -> AgentReply:
        try:
            done = subprocess.run(
                self.argv,
                input=prompt,
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                cwd=self.cwd,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise AgentError(f"command timed out after {self.timeout_s:g} s") from exc
        except OSError as exc:
            raise AgentError(f"command could not start: {type(exc).__name__}") from exc
        if done.returncode != 0:
            raise AgentError(f"command exited with status {done.returncode}")
        return AgentReply(text=done.stdout, tokens=estimate_tokens(prompt, done.stdout))


# ---------------------------------------------------------------- factory

AGENT_NAMES: tuple[str, ...] = ("scripted", "openai", "command", "scored")


def make_agent(name: str, *, task: Task | None = None, **options: Any) -> Agent:
    """A fresh agent for one loop. ``task`` picks the scripted replay and the
    scored agent's curve; the other agents ignore it."""
    if name == "scripted":
        replay = options.get("replay")
        if replay is None:
            if task is None:
                raise AgentError("the scripted agent needs a task or a replay")
            replay = shipped_replays().get(task.id) or default_replay(task)
        return ScriptedAgent(replay)
    if name == "openai":
        return OpenAIAgent(**options)
    if name == "command":
        command = options.pop("command", None) or os.environ.get("LOOPS_AGENT_COMMAND", "")
        if not command:
            raise AgentError("the command agent needs command=... or LOOPS_AGENT_COMMAND")
        return CommandAgent(command, **options)
    if name == "scored":
        # Imported here so that loading the other agents does not load numpy;
        # loops.scored imports only loops.reply, so this is no cycle.
        from loops.scored import make_scored_agent

        return make_scored_agent(task=task, **options)
    raise AgentError(f"unknown agent {name!r}; choose from {', '.join(AGENT_NAMES)}")
