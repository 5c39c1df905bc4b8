"""Task specs: the file format, validation, the built-in suite, and what a
check keeps secret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from loops.spec import Check, Task, TaskError, TaskKind, builtin_suite, load_tasks

TASKS = [
    {
        "id": "double",
        "description": "Write double(x).",
        "kind": "verifiable",
        "checks": [{"id": "c1", "code": "assert double(2) == 4"}],
        "priority": 3,
        "step_limit": 4,
    },
    {"id": "poem", "description": "Write a poem.", "kind": "open"},
    {
        "id": "fmt",
        "description": "Return JSON.",
        "kind": "grey",
        "checks": [{"id": "c1", "stdin": "1", "stdout": "2"}],
        "sampling_rate": 0.5,
        "format_check": "json",
    },
]


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_it_loads_tasks_from_yaml_or_json(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"tasks{suffix}"
    text = json.dumps({"tasks": TASKS}) if suffix == ".json" else yaml.safe_dump(TASKS)
    path.write_text(text)

    tasks = load_tasks(path)

    assert [t.id for t in tasks] == ["double", "poem", "fmt"]
    assert tasks[0].kind is TaskKind.VERIFIABLE and tasks[0].priority == 3 and tasks[0].step_limit == 4
    assert tasks[1].kind is TaskKind.OPEN and not tasks[1].has_red_line
    assert tasks[2].sampling_rate == 0.5 and tasks[2].checks[0].stdout == "2"


def test_it_round_trips_every_builtin_task_through_json() -> None:
    for task in builtin_suite():
        assert Task.from_dict(json.loads(json.dumps(task.to_dict()))) == task


@pytest.mark.parametrize(
    "patch",
    [
        {"kind": "nonsense"},
        {"checks": []},
        {"step_limit": 0},
        {"sampling_rate": 1.5},
        {"format_check": "xml"},
        {"description": "  "},
        {"surprise": True},
        {"checks": [{"id": "c1", "code": "assert 1"}, {"id": "c1", "code": "assert 2"}]},
    ],
)
def test_it_rejects_an_invalid_task(patch: dict[str, object]) -> None:
    with pytest.raises(TaskError):
        Task.from_dict({**TASKS[0], **patch})


def test_it_rejects_duplicate_task_ids(tmp_path: Path) -> None:
    path = tmp_path / "dup.json"
    path.write_text(json.dumps([TASKS[1], TASKS[1]]))
    with pytest.raises(TaskError, match="duplicate"):
        load_tasks(path)


def test_it_ships_repairable_conceptual_and_open_tasks() -> None:
    suite = builtin_suite()
    groups = {t.group for t in suite}
    assert {"repairable", "conceptual", "open"} <= groups
    assert {"is_even", "fizzbuzz", "stack", "to_bin", "str_length"} <= {t.id for t in suite}


def test_it_counts_expected_values_among_a_checks_secrets(suite: dict[str, Task]) -> None:
    task = suite["to_bin"]
    secrets = task.secrets()
    assert "assert to_bin(8) == '100'" in secrets
    assert "100" in secrets


def test_it_rejects_checks_on_open_tasks() -> None:
    with pytest.raises(ValueError):
        Task(id="o", description="d", kind=TaskKind.OPEN, checks=(Check(id="c", code="assert 1"),))


def test_a_check_carries_an_optional_description_for_the_reviewer() -> None:
    check = Check.from_dict({"id": "c", "code": "assert f(0) == 1", "about": "handles n = 0"})
    assert check.about == "handles n = 0"
    assert Check.from_dict(check.to_dict()) == check
    assert "handles n = 0" in check.secrets()  # a hint may not echo it either
    assert Check.from_dict({"id": "c", "code": "assert 1"}).about is None


def test_a_check_with_an_unknown_field_or_an_overlong_description_is_refused() -> None:
    with pytest.raises(TaskError, match="unknown fields abuot"):
        Check.from_dict({"id": "c", "code": "assert 1", "abuot": "typo"})
    with pytest.raises(TaskError, match="about is longer"):
        Check.from_dict({"id": "c", "code": "assert 1", "about": "x" * 201})
