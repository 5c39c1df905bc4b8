"""Several queues on one server: each keeps its own depth, mode, shedding,
step limit and tuner, under its own lock (ARCHITECTURE.md, "Many queues").
Concurrent producers run in real threads with their own connections, on
PostgreSQL in CI's main run and on the SQLite file on the embedded defaults."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from django.db import OperationalError, connection, transaction

from loops.spec import builtin_suite
from reviewqueue import services
from reviewqueue.models import CircuitBreakerEntry, LoopRun, ModeChange, Queue, ReviewItem, StepLimitChange
from reviewqueue.services.runs import execute_run, submit_loop

from .threads import in_threads, row_locked

SUITE = {task.id: task for task in builtin_suite()}


def _queue(slug: str, **settings: Any) -> Queue:
    """A queue every reviewer reviews, one review per item."""
    queue = services.create_queue(user=None, slug=slug, settings={"double_review_rate": 0, **settings})
    services.set_reviewers(queue=queue, user=None, open_to_all=True, members=[], groups=[])
    return queue


def _push(queue: str, key: str, priority: int = 1) -> services.AdmitResult:
    return services.admit(
        queue=queue,
        idempotency_key=key,
        task_description="t",
        final_output="o",
        cutoff_reason="step_limit",
        priority=priority,
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_two_queues_with_different_capacities_draft_and_shed_independently() -> None:
    _queue("small", capacity=10)
    _queue("large", capacity=200)
    # four producers fill "small" far past its capacity while four others
    # push a few items each into "large", all at once
    plan = [("small", 30)] * 4 + [("large", 10)] * 4

    def produce(i: int) -> list[tuple[str, str]]:
        queue, count = plan[i]
        return [(queue, _push(queue, f"p{i}-{n}", priority=n % 5).outcome) for n in range(count)]

    outcomes = Counter(pair for mine in in_threads(len(plan), produce) for pair in mine)
    small, large = Queue.objects.get(slug="small"), Queue.objects.get(slug="large")

    # small: past its high watermark into draft, then at capacity shedding;
    # every output is accounted for (produced = enqueued + shed, rule 7)
    assert small.mode == "shedding" and small.depth == 10 == services.queue_depth(small)
    assert outcomes[("small", "enqueued")] + outcomes[("small", "shed")] == 120
    shed = ReviewItem.objects.filter(queue=small, status="shed").count()
    assert shed == 110 == CircuitBreakerEntry.objects.filter(item__queue=small).count()
    assert list(ModeChange.objects.filter(queue=small).order_by("pk").values_list("mode", flat=True)) == [
        "draft",
        "shedding",
    ]
    # the shedding kept the highest priorities
    assert set(ReviewItem.objects.filter(queue=small, status="pending").values_list("priority", flat=True)) == {4}

    # large: untouched by small's backpressure
    assert large.mode == "normal" and large.depth == 40 == services.queue_depth(large)
    assert outcomes[("large", "enqueued")] == 40
    assert not ModeChange.objects.filter(queue=large).exists()
    assert not CircuitBreakerEntry.objects.filter(item__queue=large).exists()
    assert Queue.default().depth == 0


@pytest.mark.django_db(transaction=True)
def test_an_admission_never_waits_on_another_queues_lock() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's; SQLite serialises writers")
    a, b = _queue("team-a"), _queue("team-b")
    with row_locked("reviewqueue_queue", a.pk, wait="2s"):
        assert _push("team-b", "b-1").outcome == "enqueued"
        with pytest.raises(OperationalError, match="lock timeout"), transaction.atomic():
            _push("team-a", "a-1")
    assert _push("team-a", "a-1").outcome == "enqueued"
    assert (Queue.objects.get(pk=a.pk).depth, Queue.objects.get(pk=b.pk).depth) == (1, 1)


@pytest.mark.django_db
def test_a_run_uses_its_queues_step_limit_and_its_verdicts_tune_that_queue_alone(
    django_capture_on_commit_callbacks: Any, reviewer: Any
) -> None:
    _queue("fast", step_limit=4, min_step_limit=3, max_step_limit=6, tuner_window=2, approve_high=0.5)
    Queue.default()
    services.policy_update(user=None, changes={"step_limit": 7, "double_review_rate": 0})
    with django_capture_on_commit_callbacks():  # the worker's message is not needed: run it here
        submit_loop(task=SUITE["release_note"].to_dict(), run_id="r-fast", queue="fast")
        submit_loop(task=SUITE["release_note"].to_dict(), run_id="r-fast-2", queue="fast")
    execute_run(task=SUITE["release_note"].to_dict(), run_id="r-fast")
    execute_run(task=SUITE["release_note"].to_dict(), run_id="r-fast-2")
    runs = LoopRun.objects.filter(run_id__startswith="r-fast")
    assert {(run.queue.slug, run.step_limit) for run in runs} == {("fast", 4)}
    items = ReviewItem.objects.filter(queue__slug="fast", cutoff_reason="step_limit", attempt_count=4)
    assert items.count() == 2

    for item in items:
        claimed = services.claim(reviewer=reviewer)
        assert claimed is not None and claimed.queue_id == item.queue_id
        services.decide(item_id=claimed.pk, reviewer=reviewer, approve=True)
    fast = Queue.objects.get(slug="fast")
    assert fast.step_limit == 5  # two approvals in a window of two raise it
    assert StepLimitChange.objects.filter(queue=fast, verdict__isnull=False).count() == 1
    assert Queue.default().step_limit == 7
    assert not StepLimitChange.objects.filter(queue=Queue.default(), verdict__isnull=False).exists()


@pytest.mark.django_db
def test_filter_rules_and_label_counts_belong_to_one_queue(reviewer: Any) -> None:
    _queue("strict", label_threshold=1)
    for n in range(2):
        item = _push("strict", f"s{n}").item
        claimed = services.claim(reviewer=reviewer)
        assert claimed is not None and claimed.pk == item.pk
        services.decide(item_id=item.pk, reviewer=reviewer, approve=False, reason_label="code_error")
    strict = Queue.objects.get(slug="strict")
    assert list(strict.label_counts.values_list("label", "count")) == [("code_error", 2)]
    assert strict.filter_rules.filter(label="code_error").exists()
    assert not Queue.default().label_counts.exists() and not Queue.default().filter_rules.exists()


@pytest.mark.django_db
def test_an_archived_queue_accepts_nothing_new_and_keeps_its_items() -> None:
    _queue("old")
    kept = _push("old", "o1").item
    services.archive_queue(queue=Queue.objects.get(slug="old"), user=None)
    with pytest.raises(services.InvalidInput, match="'old' is archived"):
        _push("old", "o2")
    with pytest.raises(services.InvalidInput, match="'old' is archived"):
        submit_loop(task=SUITE["is_even"].to_dict(), run_id="late", queue="old")
    assert list(ReviewItem.objects.filter(queue__slug="old").values_list("pk", flat=True)) == [kept.pk]
    assert Queue.objects.get(slug="old").depth == 1
    services.archive_queue(queue=Queue.objects.get(slug="old"), user=None, archived=False)
    assert _push("old", "o2").outcome == "enqueued"


@pytest.mark.django_db
def test_the_default_queue_cannot_be_archived() -> None:
    with pytest.raises(services.InvalidInput, match="cannot be archived"):
        services.archive_queue(queue=Queue.default(), user=None)
    assert not Queue.default().archived


@pytest.mark.django_db
def test_a_queue_slug_must_be_a_slug_and_unique() -> None:
    from django.core.exceptions import ValidationError

    for bad in ("", "Team A", "9lives", "a" * 51, "x_y", "<b>"):
        with pytest.raises(ValidationError) as caught:
            services.create_queue(user=None, slug=bad)
        assert "slug" in caught.value.message_dict
    _queue("team")
    with pytest.raises(ValidationError, match="already exists"):
        services.create_queue(user=None, slug="team")
