"""Task specs: what the agent sees, plus the hidden red line it never sees.

A task file (YAML or JSON) holds a list of tasks, or a mapping with a
``tasks`` list. See ``loops/README.md`` for the format.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

SUITE_DIR = Path(__file__).parent / "suite"
FORMAT_CHECKS: tuple[str, ...] = ("python", "json", "json_schema")
ABOUT_MAX = 200  # a check's reviewer description is one short line on the card


class TaskKind(StrEnum):
    VERIFIABLE = "verifiable"  # a demand red line: hidden tests or input/output cases
    GREY = "grey"  # a red line with known gaps: auto-passes get sampled for audit
    OPEN = "open"  # no red line: hard cutoff, always unverified


class TaskError(ValueError):
    """A task definition is invalid; the message names the task and the field."""


@dataclass(frozen=True)
class Check:
    """One hidden check.

    ``code`` runs after the candidate in its namespace (typically an assert);
    ``stdin``/``stdout`` instead run the candidate as a program on that input
    and compare its output, ignoring trailing whitespace. ``about`` is an
    optional description for the human reviewer ("handles n = 0"): shown on
    the review card when the check fails, never to the agent.
    """

    id: str
    code: str | None = None
    stdin: str | None = None
    stdout: str | None = None
    about: str | None = None

    def to_dict(self) -> dict[str, str]:
        out = {"id": self.id}
        for key in ("code", "stdin", "stdout", "about"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "check") -> Check:
        if "id" not in data:
            raise TaskError(f"{where}: a check needs an id")
        check = cls(
            id=str(data["id"]),
            code=_opt_str(data.get("code")),
            stdin=_opt_str(data.get("stdin")),
            stdout=_opt_str(data.get("stdout")),
            about=_opt_str(data.get("about")),
        )
        unknown = set(data) - {"id", "code", "stdin", "stdout", "about"}
        if unknown:
            raise TaskError(f"{where} {check.id}: unknown fields {', '.join(sorted(unknown))}")
        if check.about is not None and len(check.about) > ABOUT_MAX:
            raise TaskError(f"{where} {check.id}: about is longer than {ABOUT_MAX} characters")
        if (check.code is None) == (check.stdout is None):
            raise TaskError(f"{where} {check.id}: give either code or stdout (with stdin)")
        return check

    def secrets(self) -> tuple[str, ...]:
        """The texts a hint must never reveal, in any encoding: the whole
        check, its reviewer description (it names what the check tests) and,
        for code checks, each literal in it (an expected value alone is
        already a leak)."""
        texts = [s for s in (self.code, self.stdin, self.stdout, self.about) if s and s.strip()]
        if self.code:
            texts.extend(_literals(self.code))
        return tuple(texts)


def _literals(code: str) -> list[str]:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    return [
        str(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, (str, int, float))
        and not isinstance(node.value, bool)
    ]


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class Task:
    id: str
    description: str
    kind: TaskKind
    checks: tuple[Check, ...] = ()
    format_check: str | None = None
    format_schema: Mapping[str, Any] | None = field(default=None, compare=False)
    priority: int = 1  # higher is more important
    step_limit: int | None = None
    sampling_rate: float | None = None
    scored: bool = False  # the red line is a noisy score read through a stop rule
    stop_rule: str | None = None
    group: str = ""  # a free label for reports, e.g. repairable / conceptual

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", TaskKind(self.kind))
        object.__setattr__(self, "checks", tuple(self.checks))
        where = f"task {self.id!r}"
        if not self.id:
            raise TaskError("a task needs an id")
        if not self.description.strip():
            raise TaskError(f"{where}: description is empty")
        if self.kind is TaskKind.OPEN and self.checks:
            raise TaskError(f"{where}: an open task has no red line, so no checks")
        if self.kind is not TaskKind.OPEN and not self.checks and not self.scored:
            raise TaskError(f"{where}: a {self.kind} task needs checks (or scored: true)")
        if self.format_check is not None and self.format_check not in FORMAT_CHECKS:
            raise TaskError(f"{where}: format_check must be one of {', '.join(FORMAT_CHECKS)}")
        if self.format_check == "json_schema" and not self.format_schema:
            raise TaskError(f"{where}: format_check json_schema needs format_schema")
        if self.step_limit is not None and self.step_limit < 1:
            raise TaskError(f"{where}: step_limit must be at least 1")
        if self.sampling_rate is not None and not 0 <= self.sampling_rate <= 1:
            raise TaskError(f"{where}: sampling_rate must be in [0, 1]")
        ids = [c.id for c in self.checks]
        if len(ids) != len(set(ids)):
            raise TaskError(f"{where}: check ids must be unique")

    @property
    def has_red_line(self) -> bool:
        return self.kind is not TaskKind.OPEN

    def secrets(self) -> tuple[str, ...]:
        return tuple(s for check in self.checks for s in check.secrets())

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe; :meth:`from_dict` reverses it exactly."""
        out: dict[str, Any] = {
            "id": self.id,
            "description": self.description,
            "kind": str(self.kind),
            "checks": [c.to_dict() for c in self.checks],
            "format_check": self.format_check,
            "format_schema": dict(self.format_schema) if self.format_schema else None,
            "priority": self.priority,
            "step_limit": self.step_limit,
            "sampling_rate": self.sampling_rate,
            "scored": self.scored,
            "stop_rule": self.stop_rule,
            "group": self.group,
        }
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Task:
        known = {
            "id",
            "description",
            "kind",
            "checks",
            "format_check",
            "format_schema",
            "priority",
            "step_limit",
            "sampling_rate",
            "scored",
            "stop_rule",
            "group",
        }
        task_id = str(data.get("id", ""))
        unknown = set(data) - known
        if unknown:
            raise TaskError(f"task {task_id!r}: unknown fields {', '.join(sorted(unknown))}")
        try:
            kind = TaskKind(data.get("kind", "verifiable"))
        except ValueError as exc:
            raise TaskError(f"task {task_id!r}: kind must be verifiable, grey or open") from exc
        where = f"task {task_id!r}"
        return cls(
            id=task_id,
            description=str(data.get("description", "")),
            kind=kind,
            checks=tuple(Check.from_dict(c, where) for c in data.get("checks") or ()),
            format_check=_opt_str(data.get("format_check")),
            format_schema=data.get("format_schema"),
            priority=int(data.get("priority", 1)),
            step_limit=None if data.get("step_limit") is None else int(data["step_limit"]),
            sampling_rate=(None if data.get("sampling_rate") is None else float(data["sampling_rate"])),
            scored=bool(data.get("scored", False)),
            stop_rule=_opt_str(data.get("stop_rule")),
            group=str(data.get("group") or ""),
        )


def parse_tasks(data: Any, source: str = "tasks") -> list[Task]:
    items: Any = data.get("tasks") if isinstance(data, Mapping) else data
    if not isinstance(items, Sequence) or isinstance(items, str):
        raise TaskError(f"{source}: expected a list of tasks or a mapping with 'tasks'")
    tasks = [Task.from_dict(item) for item in items]
    ids = [t.id for t in tasks]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise TaskError(f"{source}: duplicate task ids {', '.join(duplicates)}")
    return tasks


def load_tasks(path: str | Path) -> list[Task]:
    """Tasks from a ``.json`` file, or YAML for any other suffix."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    return parse_tasks(data, str(path.name))


def builtin_suite() -> list[Task]:
    """The shipped suite: repairable, conceptual and open tasks."""
    tasks: list[Task] = []
    for path in sorted(SUITE_DIR.glob("*.yaml")):
        tasks.extend(load_tasks(path))
    return tasks
