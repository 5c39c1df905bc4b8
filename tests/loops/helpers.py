"""Agent doubles shared by the loop tests."""

from __future__ import annotations

from loops.agents import Replay, ScriptedAgent
from loops.reply import AgentReply


def scripted(*attempts: str, task_id: str = "t") -> ScriptedAgent:
    """A scripted agent that gives ``attempts`` in order, then repeats the last."""
    return ScriptedAgent(Replay(task_id=task_id, attempts=attempts))


class RecordingAgent(ScriptedAgent):
    """A scripted agent that keeps every prompt it is sent."""

    def __init__(self, replay: Replay) -> None:
        super().__init__(replay)
        self.prompts: list[str] = []

    def attempt(self, prompt: str) -> AgentReply:
        self.prompts.append(prompt)
        return super().attempt(prompt)


class ScoreSequence:
    """An agent whose answers carry the given judge scores, one per attempt."""

    name = "scores"

    def __init__(self, *scores: float) -> None:
        self.scores = iter(scores)
        self.calls = 0

    def attempt(self, prompt: str) -> AgentReply:
        self.calls += 1
        return AgentReply(text=f"draft {self.calls}", tokens=1, score=next(self.scores))
