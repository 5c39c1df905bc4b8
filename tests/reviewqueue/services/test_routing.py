"""Which queue work goes to (services.routing over policy.route): a named
queue first, else the first enabled rule by position whose every condition
matches, else the queue ``default``; an unknown or archived queue is refused
by name. Each condition is tested at its edges."""

from __future__ import annotations

from typing import Any

import pytest

from reviewqueue import services
from reviewqueue.models import Queue, RoutingRule
from reviewqueue.services import routing

pytestmark = pytest.mark.django_db


def where(slug: str | None = None, **work: Any) -> str:
    fields = {"producer": "ci", "task_kind": "verifiable", "priority": 1, "task_id": "t-1", **work}
    return routing.resolve(slug, **fields).slug


def rule(queue: str, position: int = 0, **conditions: Any) -> RoutingRule:
    target = Queue.objects.filter(slug=queue).first() or services.create_queue(user=None, slug=queue)
    return RoutingRule.objects.create(queue=target, position=position, **conditions)


def test_without_rules_everything_goes_to_default() -> None:
    assert where() == "default"
    assert Queue.objects.filter(slug="default").exists()


def test_a_named_queue_wins_over_every_rule() -> None:
    rule("catch-all")
    services.create_queue(user=None, slug="named")
    assert where("named") == "named"
    assert where() == "catch-all"
    assert where("default") == "default"


@pytest.mark.parametrize("slug", ["nope", "Default", "x" * 500, "<script>"])
def test_an_unknown_queue_is_refused_by_name(slug: str) -> None:
    with pytest.raises(services.InvalidInput) as caught:
        where(slug)
    assert caught.value.field == "queue"
    assert "unknown queue" in caught.value.message and slug[:60] in caught.value.message


def test_a_queue_that_is_not_text_is_refused() -> None:
    with pytest.raises(services.InvalidInput, match="slug"):
        where(7)  # type: ignore[arg-type]


def test_an_archived_queue_is_refused_and_its_rules_are_skipped() -> None:
    rule("old", position=0, producer="ci")
    rule("new", position=1, producer="ci")
    services.archive_queue(queue=Queue.objects.get(slug="old"), user=None)
    with pytest.raises(services.InvalidInput, match="'old' is archived"):
        where("old")
    assert where() == "new"


def test_the_first_matching_rule_by_position_wins_and_disabled_rules_are_skipped() -> None:
    rule("third", position=30)
    rule("first", position=10, producer="ci", enabled=False)
    rule("second", position=20, producer="ci")
    assert where() == "second"
    assert where(producer="other") == "third"


def test_equal_positions_keep_the_order_rules_were_made_in() -> None:
    rule("made-first", position=5)
    rule("made-second", position=5)
    assert where() == "made-first"


def test_producer_and_kind_match_exactly() -> None:
    rule("by-producer", position=1, producer="ci")
    rule("by-kind", position=2, task_kind="open")
    assert where(producer="ci") == "by-producer"
    assert where(producer="ci-nightly", task_kind="verifiable") == "default"  # not a prefix
    assert where(producer="CI") == "default"  # case matters
    assert where(producer="other", task_kind="open") == "by-kind"
    assert where(producer="other", task_kind="opened") == "default"


@pytest.mark.parametrize(
    ("low", "high", "inside", "outside"),
    [
        (5, 10, [5, 7, 10], [4, 11]),  # inclusive at both ends
        (5, None, [5, 1000], [4, -1000]),  # no upper bound
        (None, 0, [0, -1000], [1]),  # no lower bound
        (3, 3, [3], [2, 4]),  # one priority
    ],
)
def test_the_priority_range_is_inclusive_at_both_ends(
    low: int | None, high: int | None, inside: list[int], outside: list[int]
) -> None:
    rule("ranged", min_priority=low, max_priority=high)
    assert [where(priority=p) for p in inside] == ["ranged"] * len(inside)
    assert [where(priority=p) for p in outside] == ["default"] * len(outside)


def test_a_task_id_prefix_matches_ids_that_start_with_it() -> None:
    rule("billing", task_id_prefix="billing/")
    assert where(task_id="billing/") == "billing"  # an exact id is its own prefix
    assert where(task_id="billing/refund-42") == "billing"
    assert where(task_id="billing") == "default"
    assert where(task_id="x-billing/1") == "default"
    assert where(task_id="") == "default"


def test_every_condition_of_a_rule_must_match() -> None:
    rule("narrow", producer="ci", task_kind="open", min_priority=2, max_priority=4, task_id_prefix="web-")
    assert where(producer="ci", task_kind="open", priority=3, task_id="web-1") == "narrow"
    for miss in (
        {"producer": "cd"},
        {"task_kind": "verifiable"},
        {"priority": 1},
        {"priority": 5},
        {"task_id": "api-1"},
    ):
        work = {"producer": "ci", "task_kind": "open", "priority": 3, "task_id": "web-1", **miss}
        assert where(**work) == "default", miss


def test_a_rule_change_takes_effect_at_once_in_this_process() -> None:
    assert where() == "default"
    made = rule("moved")
    assert where() == "moved"
    made.enabled = False
    made.save()
    assert where() == "default"


def test_a_queue_made_by_another_process_is_found_before_a_slug_is_refused() -> None:
    assert where() == "default"  # the queues are now kept in this process
    Queue.objects.bulk_create([Queue(slug="elsewhere", name="Elsewhere")])  # no signal: as another process
    assert where("elsewhere") == "elsewhere"


def test_admission_and_runs_land_in_the_routed_queue(admit_item: Any) -> None:
    rule("urgent", min_priority=10)
    assert admit_item(priority=10).item.queue.slug == "urgent"
    assert admit_item(priority=9).item.queue.slug == "default"
    assert admit_item(priority=1, queue="urgent").queue == "urgent"
