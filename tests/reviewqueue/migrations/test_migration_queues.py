"""The migration to many queues keeps every row: today's policy row becomes
the queue ``default`` with the same settings and state, and everything that
belongs to a queue (items, verdicts, runs, label counts, filter rules, the
mode, step-limit and policy histories, depth samples, what-ifs) is given to
it; the label counts move to their per-queue table count for count. Tested
forwards on a database that holds data, and back."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("reviewqueue", "0009_trust_the_verdicts")]
AFTER = [("reviewqueue", "0010_many_queues")]
QUEUED = (
    "ReviewItem",
    "Verdict",
    "LoopRun",
    "FilterRule",
    "ModeChange",
    "StepLimitChange",
    "PolicyAudit",
    "DepthSample",
    "SimulationRun",
)


def _apps(target: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)
    return MigrationExecutor(connection).loader.project_state(target).apps


def _fill(apps: Any) -> None:
    """One of everything, as a single-queue installation would hold it."""
    get = lambda name: apps.get_model("reviewqueue", name)
    now = timezone.now()
    policies = get("QueuePolicy").objects
    policies.exclude(pk=1).delete()  # one policy row, as before there were queues
    policies.update_or_create(
        pk=1,
        defaults={"capacity": 7, "step_limit": 4, "mode": "draft", "depth": 2, "instructions": "Judge **carefully**."},
    )
    items = [
        get("ReviewItem").objects.create(
            task_description=f"task {n}",
            cutoff_reason="step_limit",
            idempotency_key=f"k{n}",
            producer="p",
            status=status,
        )
        for n, status in enumerate(["pending", "claimed", "approved", "rejected", "shed"])
    ]
    get("Verdict").objects.create(item=items[2], decision="approve")
    get("Verdict").objects.create(item=items[3], decision="reject", reason_label="logic_error")
    get("LoopRun").objects.create(run_id="r-1", task_id="t", task={}, item=items[0])
    get("LabelCount").objects.create(label="logic_error", count=3)
    get("LabelCount").objects.create(label="incomplete", count=1)
    get("FilterRule").objects.create(label="logic_error", gate="parses", description="d")
    get("ModeChange").objects.create(previous="normal", mode="draft", depth=6, created_at=now)
    get("StepLimitChange").objects.create(previous=5, step_limit=4, created_at=now)
    get("PolicyAudit").objects.create(changes={"capacity": [50, 7]}, created_at=now)
    get("DepthSample").objects.create(
        created_at=now - timedelta(minutes=1), depth=2, pending=1, claimed=1, mode="draft", capacity=7, step_limit=4
    )
    get("SimulationRun").objects.create(params={"hours": 1})
    get("CircuitBreakerEntry").objects.create(item=items[4], priority=1, depth=7, capacity=7, incoming=True)


def _counts(apps: Any, names: tuple[str, ...]) -> dict[str, int]:
    return {name: apps.get_model("reviewqueue", name).objects.count() for name in names}


def test_one_queue_becomes_the_default_queue_and_keeps_every_row() -> None:
    old = _apps(BEFORE)
    _fill(old)
    before = _counts(old, (*QUEUED, "CircuitBreakerEntry"))
    labels_before = dict(old.get_model("reviewqueue", "LabelCount").objects.values_list("label", "count"))
    try:
        new = _apps(AFTER)
        Queue = new.get_model("reviewqueue", "Queue")
        (queue,) = Queue.objects.all()
        assert (queue.slug, queue.name, queue.open_to_all, queue.archived_at) == ("default", "Default", True, None)
        assert (queue.capacity, queue.step_limit, queue.mode, queue.depth) == (7, 4, "draft", 2)
        assert queue.instructions == "Judge **carefully**."
        assert _counts(new, (*QUEUED, "CircuitBreakerEntry")) == before
        for name in QUEUED:
            queues = set(new.get_model("reviewqueue", name).objects.values_list("queue_id", flat=True))
            assert queues == {queue.pk}, name
        counts = new.get_model("reviewqueue", "LabelCount").objects.values_list("queue_id", "label", "count")
        assert sorted(counts) == sorted((queue.pk, label, n) for label, n in labels_before.items())

        back = _apps(BEFORE)
        assert _counts(back, (*QUEUED, "CircuitBreakerEntry")) == before
        policy = back.get_model("reviewqueue", "QueuePolicy").objects.get()
        assert (policy.capacity, policy.mode, policy.depth) == (7, "draft", 2)
        assert dict(back.get_model("reviewqueue", "LabelCount").objects.values_list("label", "count")) == labels_before
    finally:
        _apps(MigrationExecutor(connection).loader.graph.leaf_nodes())


def test_going_back_refuses_while_another_queue_holds_rows() -> None:
    _apps(BEFORE)
    try:
        new = _apps(AFTER)
        other = new.get_model("reviewqueue", "Queue").objects.create(slug="team-b", name="Team B")
        new.get_model("reviewqueue", "ReviewItem").objects.create(
            queue=other, task_description="t", cutoff_reason="step_limit", idempotency_key="b1"
        )
        with pytest.raises(RuntimeError, match="reviewitem rows belong to other queues"):
            _apps(BEFORE)
        assert new.get_model("reviewqueue", "ReviewItem").objects.filter(queue=other).count() == 1
    finally:
        _apps(MigrationExecutor(connection).loader.graph.leaf_nodes())
