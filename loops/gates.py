"""Filter-rule gates: cheap mechanical checks proposed by reviewers' rejection
labels (``reviewqueue.policy.FILTER_GATES`` names them).

A gate is a pre-gate like the format red line: in the runner a failing gate is
a failure the agent gets a hint about, never a stop signal by itself.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable

from loops.redline import extract_code

Gate = Callable[[str], str | None]

_PLACEHOLDER = re.compile(
    r"lorem ipsum|\[(?:insert|your|placeholder)[^\]]*\]|<(?:placeholder|insert)[^>]*>|\{\{[^}]*\}\}",
    re.IGNORECASE,
)
_CLAIM = re.compile(
    r"\b(?:all|the)\s+(?:unit\s+)?tests?\s+(?:now\s+)?pass(?:es|ed)?\b"
    r"|\btests?\s+(?:are\s+)?passing\b"
    r"|\bI\s+(?:have\s+)?(?:tested|verified|ran\s+the\s+tests?|confirmed)\b"
    r"|\b(?:verified|tested)\s+(?:and\s+)?(?:works|working|correct)\b"
    r"|\b100\s?%\s+(?:test\s+)?coverage\b",
    re.IGNORECASE,
)
_TODO = re.compile(r"\b(?:TODO|FIXME|XXX)\b")


def python_syntax(output: str) -> str | None:
    code = extract_code(output)
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return f"does not parse as Python (line {exc.lineno})"
    except ValueError:
        return "does not parse as Python"
    return None


def well_formed(output: str) -> str | None:
    text = output.strip()
    if not text:
        return "empty output"
    if any(not ch.isprintable() and ch not in "\n\r\t" for ch in text):
        return "contains control characters"
    if _PLACEHOLDER.search(text):
        return "contains a placeholder"
    return None


def no_unverified_claims(output: str) -> str | None:
    match = _CLAIM.search(output)
    if match:
        return f"claims a check it cannot show ({match.group(0).strip()!r})"
    return None


def _is_stub(body: list[ast.stmt]) -> bool:
    statements = body
    if statements and isinstance(statements[0], ast.Expr):
        value = statements[0].value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            statements = statements[1:]  # a docstring alone is still a stub
    if not statements:
        return True
    if len(statements) != 1:
        return False
    only = statements[0]
    if isinstance(only, ast.Pass):
        return True
    if isinstance(only, ast.Expr) and isinstance(only.value, ast.Constant):
        return only.value.value is Ellipsis
    if isinstance(only, ast.Raise) and only.exc is not None:
        exc = only.exc.func if isinstance(only.exc, ast.Call) else only.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def no_todo(output: str) -> str | None:
    if _TODO.search(output):
        return "leaves a TODO/FIXME marker"
    try:
        tree = ast.parse(extract_code(output))
    except (SyntaxError, ValueError):
        return None  # not code: the marker search above is all that applies
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _is_stub(node.body):
            return f"function {node.name} has a stub body"
    return None


GATES: dict[str, Gate] = {
    "python_syntax": python_syntax,
    "well_formed": well_formed,
    "no_unverified_claims": no_unverified_claims,
    "no_todo": no_todo,
}


def run_gates(output: str, names: Iterable[str]) -> list[str]:
    """Reasons of the failing gates, each prefixed with its gate name.
    An unknown gate name is an error: a silently skipped gate is a hole."""
    reasons = []
    for name in names:
        try:
            gate = GATES[name]
        except KeyError as exc:
            raise KeyError(f"unknown gate {name!r}") from exc
        reason = gate(output)
        if reason is not None:
            reasons.append(f"{name}: {reason}")
    return reasons
