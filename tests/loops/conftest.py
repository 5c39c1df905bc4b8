"""Fixtures shared by the loop tests."""

from __future__ import annotations

import pytest

from loops.spec import Task, TaskKind, builtin_suite


@pytest.fixture(scope="session")
def suite() -> dict[str, Task]:
    """The built-in suite's tasks, by id."""
    return {t.id: t for t in builtin_suite()}


@pytest.fixture
def essay() -> Task:
    """A scored grey task (no hidden checks) that stops on ``confirm2``."""
    return Task(id="essay", description="Write an essay.", kind=TaskKind.GREY, scored=True, stop_rule="confirm2")
