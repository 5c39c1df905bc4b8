"""Numbers as the operator pages write them: durations, flow ratios, figures
with their unit and the change between two of them. Plain Python: no Django."""

from __future__ import annotations

import math
from collections.abc import Mapping

# What each decision is called wherever a verdict or an answer is shown:
# what was done, in the past tense ("Approved", never "Approve" beside
# "approved with edits"). Keyed by Verdict.Decision's stored values.
DECISION_WORDS = {
    "approve": "approved",
    "reject": "rejected",
    "edit": "approved with edits",
    "send_back": "sent back",
}


def decision_words(decision: str) -> str:
    """'approved', 'rejected', 'approved with edits' or 'sent back'; an
    unknown value as it is stored."""
    return DECISION_WORDS.get(decision, decision)


def fmt_duration(seconds: float | None) -> str:
    """'1 h 05 min', '3 min 20 s', '12 s' — short enough for a table cell."""
    if seconds is None:
        return "—"
    s = int(seconds)
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s} s"


def fmt_ratio(ratio: float | None) -> str:
    if ratio is None:
        return "—"
    return "∞" if math.isinf(ratio) else f"{ratio:.2f}"


def fmt_number(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def fmt_figure(value: float | None, unit: str, digits: int) -> str:
    if value is None:
        return "—"
    return f"{value:,.{digits}f} {unit}"


def fmt_change(before: float | None, after: float | None, digits: int) -> tuple[str, str]:
    """The change as a signed number and its tone: worse (up), better (down) or none."""
    if before is None or after is None:
        return "", "muted"
    delta = round(after - before, digits)
    if delta == 0:
        return "=", "muted"
    sign = "+" if delta > 0 else "−"
    return f"{sign}{abs(delta):,.{digits}f}", "worse" if delta > 0 else "better"


def audit_value(value: object, words: Mapping[str, str] | None = None) -> str:
    """A value of a change-log entry as words: a switch as on or off, a
    blank as blank, a mapping (a bulk action's filter and result) as its
    keys and values without braces or quotes; ``words`` names stored values
    (a reason label's ``logic_error`` as "logic error")."""
    words = words or {}
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None or value == "":
        return "blank"
    if isinstance(value, dict):
        parts = [f"{str(key).replace('_', ' ')} {audit_value(item, words)}" for key, item in value.items()]
        return ", ".join(parts) or "none"
    if isinstance(value, list | tuple):
        return ", ".join(audit_value(item, words) for item in value) or "none"
    return words.get(value, str(value)) if isinstance(value, str) else str(value)
