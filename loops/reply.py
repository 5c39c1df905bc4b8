"""What every agent shares: the :class:`Agent` interface, its :class:`AgentReply`,
its :class:`AgentError`, and a token estimate for agents that report none.

The concrete agents (``loops.agents``, ``loops.scored``) import this module and
nothing imports them back, so the dependency runs one way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class AgentReply:
    """One answer. ``score`` is set only by agents whose red line is a score."""

    text: str
    tokens: int
    score: float | None = None


class AgentError(RuntimeError):
    """The agent could not produce an answer (endpoint down, command failed)."""


@runtime_checkable
class Agent(Protocol):
    name: str

    def attempt(self, prompt: str) -> AgentReply: ...


def estimate_tokens(*texts: str) -> int:
    """A rough count (about four characters a token) for agents that report none."""
    return sum(max(1, len(text) // 4) for text in texts if text)
