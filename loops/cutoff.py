"""Cutoff preprocessing (ARCHITECTURE.md rule 4): what of a loop reaches a reviewer.

Only the reviewed output (the best attempt's, thinking stripped), that
attempt's error, which attempt it is and how many checks it passed (with the
reviewer's descriptions of the failing ones), the attempt count and the cutoff
reason travel to the queue; the trace stays behind.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loops.result import LoopResult

CUTOFF_REASONS: tuple[str, ...] = (
    "step_limit",
    "stuck",
    "oscillation",
    "regression",
    "wall_clock",
    "token_budget",
    "format_anomaly",
    "draft",
)

_TAGS = "think|thinking|reasoning|reflection"
_BLOCK = re.compile(rf"<({_TAGS})\b[^>]*>.*?</\1\s*>", re.DOTALL | re.IGNORECASE)
_UNCLOSED = re.compile(rf"<(?:{_TAGS})\b[^>]*>.*\Z", re.DOTALL | re.IGNORECASE)
# Some chat templates open the thinking block themselves, so the reply starts
# inside it and only the closing tag shows.
_ORPHAN_CLOSE = re.compile(rf"\A.*?</(?:{_TAGS})\s*>", re.DOTALL | re.IGNORECASE)


def strip_thinking(text: str) -> str:
    """``text`` without thinking blocks, closed, unclosed or opened upstream."""
    text = _BLOCK.sub("", text)
    text = _UNCLOSED.sub("", text)
    text = _ORPHAN_CLOSE.sub("", text)
    return text.strip()


def cutoff_summary(result: LoopResult) -> dict[str, Any]:
    """The fields of a cut-off loop that go to the review queue, and no more."""
    return {
        "task_id": result.task_id,
        "final_output": result.final_output,
        "last_error": result.last_error,
        "attempts": result.attempts,
        "cutoff_reason": result.stop_reason,
        "draft": result.draft,
        "reviewed_attempt": result.reviewed_attempt,
        "checks_passed": result.reviewed_checks_passed,
        "checks_total": result.checks_total or None,
        "reviewed_score": result.reviewed_estimate,
        "failing_checks": [{"id": c.id, "about": c.about} for c in result.failing_checks],
    }
