"""admit()'s one-statement path on PostgreSQL (services.admission_pg):
it must store exactly what the general path stores, hand over to it whenever
the policy must decide, and never let a stale view of the queue through.

These tests run outside any transaction (django_db(transaction=True)), as
producers do; inside one, admit() always takes the general path."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from reviewqueue import policy, services
from reviewqueue.models import FilterRule, ModeChange, Queue, ReviewItem
from reviewqueue.services import admission_pg

from .threads import in_threads

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement path is PostgreSQL's"),
]


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Which path each admit() took: "one statement" or "general"."""
    taken: list[str] = []
    inner = admission_pg.admit_one_statement

    def spy(*args: Any, **kwargs: Any) -> Any:
        result = inner(*args, **kwargs)
        taken.append("one statement" if result is not None else "general")
        return result

    monkeypatch.setattr(admission_pg, "admit_one_statement", spy)
    yield taken


def output(key: str, **overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "idempotency_key": key,
        "task_description": "Write is_even(n)",
        "final_output": "def is_even(n):\n    return n % 2 == 0\n",
        "cutoff_reason": "step_limit",
        "last_error": "AssertionError: check_2",
        "attempt_count": 5,
        "reviewed_attempt": 3,
        "checks_passed": 1,
        "checks_total": 3,
        "failing_checks": [{"id": "check_2", "about": "handles n = 7"}, {"id": "check_3"}],
        "reviewed_score": 0.625,
        "task_id": "is_even",
        "task_kind": "code",
        "source_run_id": "run-1",
        "producer": "worker-1",
        "priority": 2,
        "draft": True,
        "label": "sampled",
    }
    return {**fields, **overrides}


def kept_equals_counted() -> bool:
    return Queue.current().depth == services.queue_depth()


def test_it_stores_what_the_general_path_stores(paths: list[str]) -> None:
    services.admit(**output("first"))  # a first admission reads the queue's state, then takes the statement
    fast = services.admit(**output("fast"))
    with transaction.atomic():  # inside a transaction admit() always takes the general path
        general = services.admit(**output("general"))
    assert paths == ["one statement", "one statement"]
    assert fast.outcome == general.outcome == "enqueued"
    assert (fast.depth, general.depth) == (2, 3) and kept_equals_counted()

    def stored(pk: int) -> dict[str, Any]:
        row = ReviewItem.objects.filter(pk=pk).values().get()
        return {k: v for k, v in row.items() if k not in {"id", "idempotency_key", "created_at", "updated_at"}}

    assert stored(fast.item.pk) == stored(general.item.pk)
    assert stored(fast.item.pk)["status"] == "pending" and stored(fast.item.pk)["draft"] is True
    # the returned item is the stored row, usable as a saved model instance
    assert fast.item.pk == ReviewItem.objects.get(idempotency_key="fast").pk and not fast.item._state.adding
    row = ReviewItem.objects.get(pk=fast.item.pk)
    assert row.created_at == row.updated_at == fast.item.created_at


def test_its_values_are_what_the_orm_would_send() -> None:
    # The statement sends the model's attributes as they are; Django's own
    # preparation must not change any of them for these field types.
    now = timezone.now()
    fields = output("prep")
    fields["failing_checks"] = json.dumps(fields["failing_checks"])  # the model stores it as JSON text
    item = ReviewItem(**{**fields, "created_at": now, "updated_at": now, "output_truncated": True})
    prepared = [f.get_db_prep_save(getattr(item, f.attname), connection) for f in admission_pg._INSERT_FIELDS]
    assert list(admission_pg._insert_values(item)) == prepared


def test_a_duplicate_key_changes_nothing_and_answers_with_the_first_item(paths: list[str]) -> None:
    services.admit(**output("warm"))
    first = services.admit(**output("same"))
    again = services.admit(**output("same", final_output="something else"))
    assert paths[1:] == ["one statement", "general"]  # the unique violation hands over
    assert again.outcome == "duplicate" and again.item.pk == first.item.pk
    # the statement's depth update was rolled back with the refused insert
    assert Queue.current().depth == 2 and kept_equals_counted()


def test_another_producers_equal_key_is_admitted_in_one_statement(paths: list[str]) -> None:
    services.admit(**output("warm"))
    mine = services.admit(**output("same", producer="a"))
    theirs = services.admit(**output("same", producer="b"))
    again = services.admit(**output("same", producer="b"))
    # keys are unique per producer: b's key is new, only b's repeat is a duplicate
    assert paths[1:] == ["one statement", "one statement", "general"]
    assert (mine.outcome, theirs.outcome, again.outcome) == ("enqueued", "enqueued", "duplicate")
    assert again.item.pk == theirs.item.pk != mine.item.pk
    assert Queue.current().depth == 3 and kept_equals_counted()


def test_crossing_a_watermark_is_decided_and_logged_by_the_general_path(paths: list[str]) -> None:
    services.policy_update(user=None, changes={"capacity": 10, "high_watermark": 0.5, "low_watermark": 0.2})
    results = [services.admit(**output(f"w{i}")) for i in range(11)]
    # normal up to depth 5, draft above it, shedding at capacity 10; then the
    # oldest waiting item of the same priority makes room for the newest
    assert [r.mode for r in results] == ["normal"] * 5 + ["draft"] * 4 + ["shedding"] * 2
    assert paths == ["one statement"] * 5 + ["general"] + ["one statement"] * 3 + ["general"] * 2
    assert list(ModeChange.objects.order_by("pk").values_list("previous", "mode", "depth")) == [
        ("normal", "draft", 6),
        ("draft", "shedding", 10),
    ]
    last = results[-1]
    assert last.outcome == "enqueued" and last.shed_item is not None and last.shed_item.idempotency_key == "w0"
    assert kept_equals_counted()


def test_a_stale_view_of_the_policy_is_caught_and_reread(paths: list[str]) -> None:
    services.admit(**output("a"))
    services.admit(**output("b"))
    # Another process changes the watermarks behind this one's back: the
    # remembered state is stale, the statement finds the row changed.
    Queue.objects.filter(slug="default").update(capacity=4, high_watermark=0.5)
    stale = admission_pg._seen[Queue.default().pk]
    assert stale.marks.capacity != 4
    third = services.admit(**output("c"))
    # depth 2 -> 3 of 4 crosses the high mark at 2: draft, which the general path decides
    assert paths == ["one statement", "one statement", "general"]
    assert third.mode == "draft" and third.depth == 3 and kept_equals_counted()


def test_a_verdict_moving_the_depth_does_not_make_it_miss(paths: list[str], reviewer: Any) -> None:
    for i in range(4):
        services.admit(**output(f"d{i}"))
    item = services.claim(reviewer=reviewer)
    assert item is not None
    services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    after = services.admit(**output("after"))
    assert paths == ["one statement"] * 5
    assert after.depth == 4 and kept_equals_counted()


def test_an_enabled_gate_hands_over_to_the_general_path(paths: list[str]) -> None:
    services.admit(**output("before"))
    gate, description = policy.FILTER_GATES["code_error"]
    FilterRule.objects.create(label="code_error", gate=gate, description=description, status=FilterRule.Status.ENABLED)
    filtered = services.admit(**output("prose", final_output="def broken(:\n    pass"))
    assert paths == ["one statement", "general"]
    assert filtered.outcome == "filtered" and kept_equals_counted()


def test_it_works_without_prepared_statements(paths: list[str]) -> None:
    # DB_PREPARED_STATEMENTS=0 (behind a pooler that cannot keep them)
    services.admit(**output("warm"))
    connection.ensure_connection()
    connection.connection.prepare_threshold = None
    try:
        result = services.admit(**output("unprepared"))
    finally:
        connection.connection.prepare_threshold = 5
    assert paths == ["one statement", "one statement"] and result.outcome == "enqueued" and kept_equals_counted()


def test_bad_input_is_cleaned_on_this_path_too(paths: list[str], settings: Any) -> None:
    settings.REVIEWQUEUE_MAX_OUTPUT_CHARS = 1000
    services.admit(**output("warm"))
    result = services.admit(
        **output(
            "hostile",
            final_output=b"\x00\xff<script>alert(1)</script>" + b"x" * 5000,
            task_description="caf\u00e9 \ud800 done",
            last_error="bad\x00byte",
        )
    )
    assert paths == ["one statement", "one statement"]
    row = ReviewItem.objects.get(pk=result.item.pk)
    assert row.output_truncated and "output truncated" in row.final_output
    assert row.final_output.startswith("\ufffd\ufffd<script>")  # stored as text; the page escapes it
    assert row.task_description == "caf\u00e9 \ufffd done" and row.last_error == "bad\ufffdbyte"


def test_concurrent_admissions_and_verdicts_keep_the_depth_exact(
    paths: list[str], make_user: Callable[..., Any]
) -> None:
    services.policy_update(user=None, changes={"capacity": 1000})
    reviewers = [make_user(f"c{i}", "reviewer") for i in range(2)]
    for i in range(10):
        services.admit(**output(f"seed{i}"))

    def work(i: int) -> None:
        if i < 4:
            for j in range(40):
                services.admit(**output(f"p{i}-{j}"))
        else:
            for _ in range(15):
                item = services.claim(reviewer=reviewers[i - 4])
                if item is not None:
                    services.decide(item_id=item.pk, reviewer=reviewers[i - 4], approve=True)

    in_threads(6, work)
    assert ReviewItem.objects.count() == 170
    assert kept_equals_counted()
    assert paths.count("one statement") >= 150  # verdicts moving the depth did not send them elsewhere


def test_each_queue_keeps_its_own_view_and_two_queues_both_take_the_statement(paths: list[str]) -> None:
    services.create_queue(user=None, slug="a", settings={"capacity": 4, "high_watermark": 0.5})
    services.create_queue(user=None, slug="b", settings={"capacity": 100})
    results = [services.admit(**output(f"{q}{i}", queue=q)) for i in range(3) for q in ("a", "b")]
    # a crosses its high mark (2 of 4) on its third item: only that one takes the general path
    assert paths == ["one statement"] * 4 + ["general", "one statement"]
    assert [(r.queue, r.mode, r.depth, r.capacity) for r in results[-2:]] == [
        ("a", "draft", 3, 4),
        ("b", "normal", 3, 100),
    ]
    a, b = Queue.objects.get(slug="a"), Queue.objects.get(slug="b")
    assert (admission_pg._seen[a.pk].marks.capacity, admission_pg._seen[b.pk].marks.capacity) == (4, 100)
    assert all(services.queue_depth(q) == q.depth for q in Queue.objects.all())


def test_an_archived_queue_is_refused_even_by_a_process_that_saw_it_open(paths: list[str]) -> None:
    services.create_queue(user=None, slug="closing")
    services.admit(**output("c0", queue="closing"))
    Queue.objects.filter(slug="closing").update(archived_at=timezone.now())  # another process archives it
    with pytest.raises(services.InvalidInput, match="'closing' is archived"):
        services.admit(**output("c1", queue="closing"))
    assert paths == ["one statement", "general"]
    assert ReviewItem.objects.filter(queue__slug="closing").count() == 1
