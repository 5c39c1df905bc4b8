"""The Celery tasks' registered names. Queued messages, the beat schedule and
routes refer to tasks by these names, so moving a task between modules must
not change them."""

from __future__ import annotations

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
