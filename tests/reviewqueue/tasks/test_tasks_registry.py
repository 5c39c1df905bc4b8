"""The Celery tasks' registered names. Queued messages, the beat schedule and
routes refer to tasks by these names, so moving a task between modules must
not change them."""

from __future__ import annotations

import ast
from pathlib import Path

from reviewqueue import task_names
from reviewqueue.celery import app

EXPECTED_TASKS = {
    "reviewqueue.tasks.escalate_disagreements",
    "reviewqueue.tasks.estimate_reliability",
    "reviewqueue.tasks.evaluate_alerts",
    "reviewqueue.tasks.expire_leases",
    "reviewqueue.tasks.resubmit_stale_runs",
    "reviewqueue.tasks.run_loop",
    "reviewqueue.tasks.run_simulation",
    "reviewqueue.tasks.sample_depth",
    "reviewqueue.tasks.webhooks.deliver",
    "reviewqueue.tasks.webhooks.sweep",
}


def test_the_projects_tasks_are_registered_under_their_stable_names() -> None:
    registered = {name for name in app.tasks if not name.startswith("celery.")}
    assert registered == EXPECTED_TASKS


def test_each_name_is_one_constant_in_task_names() -> None:
    assert {v for k, v in vars(task_names).items() if k.isupper()} == EXPECTED_TASKS


def test_no_other_module_writes_a_task_name_out() -> None:
    # A second copy of a name (a service's send_task, the beat schedule, a
    # decorator) would drift the day a task is renamed: all read task_names.
    root = Path(task_names.__file__).resolve().parent
    copies = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "task_names.py" or "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in EXPECTED_TASKS:
                copies.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not copies
