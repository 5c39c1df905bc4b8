"""Bulk actions by filter while reviewers decide items inside the same
filter, on PostgreSQL with real connections (one per thread): the item a
reviewer is deciding at that moment is skipped (``SKIP LOCKED``), never
waited on or taken; no item is both decided by a reviewer and rejected,
expired or moved by the operator; the count the operator confirmed, the
result and the audit row agree with what was done; each producer hears
exactly one final word per item (its outbox rows); the kept depth matches
the items waiting; and no reviewer's verdict is refused or lost.

The item a reviewer holds at that moment is tested at the two moments that
differ: while they decide it (the row reads as claimed, so the re-check
under the lock passes it over) and while their claim has not committed (the
row still reads as waiting and is locked: ``SKIP LOCKED`` passes it over
rather than wait). Then two reviewers work through the batch as fast as
they can while the bulk action runs.

The operator's count is taken first, as the page takes it. The reviewers
start once ``bulk_apply`` has re-read the ids it will act on: a reviewer
who acts before that changes the count, and the confirmation is refused
(``test_bulk.py``). Two bugs these found are fixed: a move counted its items
in the new queue's depth only at its end, so an item decided there meanwhile
left the depth one too high; and undoing a double review's first answer
locked the queue's row before the item, so it deadlocked with a bulk action
(or an answer) holding the item.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from reviewqueue import services
from reviewqueue.models import PolicyAudit, Queue, ReviewItem, Verdict, WebhookDelivery
from reviewqueue.selectors.items import ItemFilter
from reviewqueue.services import bulk, verdicts

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="SKIP LOCKED against a second connection"),
]

HOOK = "http://127.0.0.1:9/hook"
BATCH = ItemFilter(q="nightly")
ACTIONS = ("reject", "expire", "move", "requeue")
FINAL_EVENTS = ("item.decided", "item.sent_back", "item.shed")
WAIT_S = 20  # nothing here waits this long unless it hangs; then the test fails rather than hangs


@dataclass
class Watch:
    """``bulk_apply`` seen from inside: the items it acted on and skipped,
    and a hold before its first item (after it re-read its ids) that lets
    the test start the reviewers exactly there."""

    acted: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    ids_read: threading.Event = field(default_factory=threading.Event)
    go: threading.Event = field(default_factory=threading.Event)
    hold_before: int = 0  # the hold comes before this many items are done (0: before the first)


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch) -> Watch:
    seen = Watch()
    real = bulk._apply_one

    def apply_one(pk: int, *args: Any) -> bool:
        if len(seen.acted) + len(seen.skipped) == seen.hold_before and not seen.ids_read.is_set():
            seen.ids_read.set()
            assert seen.go.wait(WAIT_S), "the test never let the bulk action go on"
        done = real(pk, *args)
        (seen.acted if done else seen.skipped).append(pk)
        return done

    monkeypatch.setattr(bulk, "_apply_one", apply_one)
    return seen


@pytest.fixture
def later() -> Queue:
    """The queue a move sends items to; every reviewer reviews it."""
    queue = services.create_queue(user=None, slug="later", name="Later")
    Queue.objects.filter(pk=queue.pk).update(open_to_all=True)
    return queue


def seed(admit_item: Callable[..., Any], make_user: Callable[..., Any], action: str, n: int) -> list[int]:
    """``n`` items the filter matches, each with a callback (so each event is
    an outbox row). For requeue, every one is held by a reviewer whose lease
    ran out a minute ago: what requeue takes back, and what claim takes too."""
    services.policy_update(user=None, changes={"capacity": 1000, "double_review_rate": 0, "gold_rate": 0})
    pks = [admit_item(task_description=f"nightly batch {i}", callback_url=HOOK).item.pk for i in range(n)]
    if action == "requeue":
        now = timezone.now()
        ReviewItem.objects.filter(pk__in=pks).update(
            status=ReviewItem.Status.CLAIMED,
            lease_holder=make_user("gone", "reviewer"),
            claimed_at=now - timedelta(minutes=10),
            lease_expires_at=now - timedelta(minutes=1),
        )
    return pks


def options(action: str, later: Queue) -> dict[str, Any]:
    return {"reject": {"reason_label": "format_issue"}, "move": {"target": later}}.get(action, {})


class Operator(threading.Thread):
    """``bulk_apply`` on its own connection, as the confirm button sends it."""

    def __init__(self, operator: Any, action: str, seen: int, later: Queue) -> None:
        super().__init__()
        self.args_ = {"operator": operator, "filters": BATCH, "action": action, "seen": seen, **options(action, later)}
        self.result: bulk.BulkResult | None = None
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            self.result = bulk.bulk_apply(**self.args_)
        except Exception as exc:  # noqa: BLE001 (the test reports it; a thread would swallow it)
            self.error = exc
        finally:
            connections.close_all()

    def finished(self) -> bulk.BulkResult:
        self.join(WAIT_S)
        assert not self.is_alive(), "the bulk action hung"
        assert self.error is None, repr(self.error)
        assert self.result is not None
        return self.result


class Reviewer(threading.Thread):
    """A reviewer on their own connection: claim, decide, repeat, until
    nothing is left for them once the bulk action is over. Every verdict
    they are refused is recorded: none should be."""

    def __init__(self, user: Any, bulk_thread: threading.Thread, approve: bool) -> None:
        super().__init__()
        self.user, self.bulk_thread, self.approve = user, bulk_thread, approve
        self.decided: list[int] = []
        self.refused: list[str] = []
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                over = not self.bulk_thread.is_alive()  # read before the claim, so one claim follows the end
                item = services.claim(reviewer=self.user)
                if item is None:
                    if over:
                        break
                    time.sleep(0.005)
                    continue
                try:
                    services.decide(item_id=item.pk, reviewer=self.user, approve=self.approve, reason_label="unclear")
                except services.QueueError as exc:  # a verdict the bulk action made them lose
                    self.refused.append(f"#{item.pk}: {exc.message}")
                else:
                    self.decided.append(item.pk)
        except Exception as exc:  # noqa: BLE001 (reported by finished(); a thread would swallow it)
            self.error = exc
        finally:
            connections.close_all()

    def finished(self) -> list[int]:
        self.join(WAIT_S * 2)
        assert not self.is_alive(), f"{self.user} hung"
        assert self.error is None, repr(self.error)
        assert self.refused == [], f"{self.user}'s verdicts were refused: {self.refused}"
        return self.decided


def check_the_books(
    action: str, pks: list[int], seen: int, result: bulk.BulkResult, watch: Watch, by_reviewers: list[int]
) -> None:
    """What the operator was told, the audit, the items, the verdicts, the
    outbox and the depth all say the same thing."""
    acted = set(watch.acted)
    assert len(watch.acted) == len(acted), "an item was acted on twice"
    assert acted <= set(pks)
    assert (result.matched, result.applied, result.skipped) == (seen, len(acted), seen - len(acted))
    assert len(watch.acted) + len(watch.skipped) == seen
    (audit,) = PolicyAudit.objects.filter(changes__has_key=f"bulk {action}")
    _, what = audit.changes[f"bulk {action}"]
    assert (what["matched"], what["applied"]) == (seen, result.applied)

    assert len(by_reviewers) == len(set(by_reviewers)), "a reviewer decided an item twice"
    items = {item.pk: item for item in ReviewItem.objects.filter(pk__in=pks)}
    assert len(items) == len(pks), "an item was lost"
    verdicts_of = {v.item_id: v for v in Verdict.objects.filter(item__in=pks)}
    # Every verdict a reviewer was given stands, and no other reviewer verdict exists.
    assert {pk for pk, v in verdicts_of.items() if v.settled_by == "reviewer"} == set(by_reviewers)
    for pk, verdict in verdicts_of.items():
        assert verdict.queue_id == items[pk].queue_id, f"#{pk}'s verdict is booked to a queue it left"

    if action == "reject":
        assert {pk for pk, v in verdicts_of.items() if v.settled_by == "operator"} == acted
        assert not acted & set(by_reviewers), "decided by a reviewer and rejected in bulk"
    elif action == "expire":
        assert {pk for pk, item in items.items() if item.status == ReviewItem.Status.SHED} == acted
        assert not acted & set(by_reviewers), "decided by a reviewer and expired in bulk"
    elif action == "move":
        assert {pk for pk, item in items.items() if item.queue.slug == "later"} == acted
        # Decided where it was, before the move reached it, or in the new queue after.
        assert all(verdicts_of[pk].queue.slug == "later" for pk in acted if pk in verdicts_of)
    else:  # requeue: each lapse counted once, by the requeue or by the claim that took the item
        assert {item.lease_expiries for item in items.values()} == {1}

    events = Counter(
        (row.item_id, row.event_type)
        for row in WebhookDelivery.objects.filter(item__in=pks, event_type__in=FINAL_EVENTS)
    )
    for pk, item in items.items():
        finals = {kind: events[(pk, kind)] for kind in FINAL_EVENTS if events[(pk, kind)]}
        if item.status == ReviewItem.Status.SHED:
            assert finals == {"item.shed": 1}, (pk, finals)
        elif pk in verdicts_of:
            assert finals == {"item.decided": 1}, (pk, finals)
        else:
            assert finals == {}, (pk, finals)
            assert item.status in ReviewItem.WAITING

    for queue in Queue.objects.all():
        waiting = ReviewItem.objects.filter(queue=queue, status__in=ReviewItem.WAITING).count()
        assert queue.depth == waiting, f"{queue.slug}: depth {queue.depth}, {waiting} waiting"


# Where the reviewer is when the bulk action reaches their item: deciding it
# (their verdict's transaction holds the row, which reads as claimed), or
# claiming it (the claim has not committed: the row is locked and still
# reads as waiting to everyone else, which is what SKIP LOCKED is for).
MOMENTS = ("deciding", "claiming")


@pytest.mark.parametrize("moment", MOMENTS)
@pytest.mark.parametrize("action", ACTIONS)
def test_the_item_a_reviewer_holds_at_that_moment_is_skipped_never_waited_on_or_taken(
    action: str,
    moment: str,
    admit_item: Callable[..., Any],
    make_user: Callable[..., Any],
    operator: Any,
    reviewer: Any,
    later: Queue,
    watch: Watch,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pks = seed(admit_item, make_user, action, 8)
    seen = bulk.bulk_count(filters=BATCH, action=action, target=later if action == "move" else None)
    assert seen == 8
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        holding.set()
        assert release.wait(WAIT_S), "the bulk action never finished"

    real_answer = verdicts._answer

    def answer_held(*args: Any) -> Any:
        hold()  # inside decide's transaction, the item's row locked
        return real_answer(*args)

    if moment == "deciding":
        monkeypatch.setattr(verdicts, "_answer", answer_held)
    claimed: list[int] = []
    failed: list[Exception] = []

    def review_one() -> None:
        try:
            with transaction.atomic():
                item = services.claim(reviewer=reviewer)
                assert item is not None
                claimed.append(item.pk)
                if moment == "claiming":
                    hold()
            services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
        except Exception as exc:  # noqa: BLE001 (reported below; a thread would swallow it)
            failed.append(exc)
        finally:
            connections.close_all()

    bulk_thread = Operator(operator, action, seen, later)
    bulk_thread.start()
    assert watch.ids_read.wait(WAIT_S)
    reviewing = threading.Thread(target=review_one)
    reviewing.start()
    assert holding.wait(WAIT_S), f"the reviewer never got to {moment} their item"
    watch.go.set()
    result = bulk_thread.finished()  # while the reviewer still holds the row: it never waited
    release.set()
    reviewing.join(WAIT_S)
    assert not reviewing.is_alive() and failed == []

    assert watch.skipped == claimed
    assert (result.applied, result.skipped) == (7, 1)
    check_the_books(action, pks, seen, result, watch, claimed)


@pytest.mark.parametrize("action", ACTIONS)
def test_reviewers_deciding_while_a_bulk_action_runs_lose_nothing(
    action: str,
    admit_item: Callable[..., Any],
    make_user: Callable[..., Any],
    operator: Any,
    reviewer: Any,
    later: Queue,
    watch: Watch,
) -> None:
    pks = seed(admit_item, make_user, action, 60)
    seen = bulk.bulk_count(filters=BATCH, action=action, target=later if action == "move" else None)
    bulk_thread = Operator(operator, action, seen, later)
    team = [
        Reviewer(reviewer, bulk_thread, approve=True),
        Reviewer(make_user("olga", "reviewer"), bulk_thread, approve=False),
    ]
    bulk_thread.start()
    assert watch.ids_read.wait(WAIT_S)
    for member in team:
        member.start()
    watch.go.set()
    result = bulk_thread.finished()
    by_reviewers = [pk for member in team for pk in member.finished()]

    print(f"\n{action}: {result.applied} by the operator, {result.skipped} skipped, {len(by_reviewers)} by reviewers")
    check_the_books(action, pks, seen, result, watch, by_reviewers)
    # Nothing is left waiting: each item was the operator's or a reviewer's (or, moved or
    # requeued, a reviewer's after that).
    assert not ReviewItem.objects.filter(pk__in=pks, status__in=ReviewItem.WAITING).exists()
    if action in ("reject", "expire"):
        assert len(by_reviewers) + result.applied == len(pks)
    else:
        assert len(by_reviewers) == len(pks)


def test_an_item_decided_in_its_new_queue_while_the_move_goes_on_leaves_that_queues_depth_true(
    admit_item: Callable[..., Any],
    make_user: Callable[..., Any],
    operator: Any,
    reviewer: Any,
    later: Queue,
    watch: Watch,
) -> None:
    """A reviewer decides a moved item in its new queue before the move has
    finished: the new queue's kept depth must count the moved items that
    still wait, no more."""
    pks = seed(admit_item, make_user, "move", 3)
    seen = bulk.bulk_count(filters=BATCH, action="move", target=later)
    watch.hold_before = 1  # the first item is moved; the rest wait
    bulk_thread = Operator(operator, "move", seen, later)
    bulk_thread.start()
    assert watch.ids_read.wait(WAIT_S)
    moved = services.claim(reviewer=reviewer, queue="later")
    assert moved is not None and moved.pk == watch.acted[0]
    services.decide(item_id=moved.pk, reviewer=reviewer, approve=True)
    watch.go.set()
    result = bulk_thread.finished()
    assert result.applied == 3
    check_the_books("move", pks, seen, result, watch, [moved.pk])
    assert Queue.objects.get(pk=later.pk).depth == 2


def _waiting_on_a_lock() -> int:
    """Backends of this database waiting for a lock (read on a connection of its own)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


@pytest.mark.double_review
def test_undoing_a_double_review_answer_while_the_bulk_action_holds_the_item_does_not_deadlock(
    admit_item: Callable[..., Any],
    make_user: Callable[..., Any],
    operator: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reviewer takes back their first answer on an item waiting for its
    second review, at the moment the bulk action has locked that item and
    is about to take it off the queue's depth. Undo must not hold the
    queue's row while it waits for the item (the bulk action, holding the
    item, waits for the queue's row): that is a deadlock, which PostgreSQL
    ends by failing one of them."""
    services.policy_update(user=None, changes={"capacity": 1000, "double_review_rate": 1.0, "gold_rate": 0})
    ann, _ben = make_user("ann", "reviewer"), make_user("ben", "reviewer")
    item = admit_item(task_description="nightly batch", callback_url=HOOK).item
    assert services.claim(reviewer=ann).pk == item.pk
    services.decide(item_id=item.pk, reviewer=ann, approve=True)  # round 1; the item waits for round 2
    seen = bulk.bulk_count(filters=BATCH, action="expire")
    assert seen == 1

    holds_item, go = threading.Event(), threading.Event()
    real_take = bulk.take_one_off_depth

    def take_after_the_undo(*args: Any) -> Any:
        holds_item.set()  # the item is locked (and expired, uncommitted); the queue's row is next
        assert go.wait(WAIT_S)
        return real_take(*args)

    monkeypatch.setattr(bulk, "take_one_off_depth", take_after_the_undo)
    bulk_thread = Operator(operator, "expire", seen, None)  # type: ignore[arg-type]
    bulk_thread.start()
    assert holds_item.wait(WAIT_S)
    undone: dict[str, Any] = {}

    def undo() -> None:
        try:
            undone["item"] = services.undo(reviewer=ann)
        except services.UndoRefused as exc:
            undone["refused"] = exc.message
        except Exception as exc:  # noqa: BLE001 (reported below; a thread would swallow it)
            undone["error"] = exc
        finally:
            connections.close_all()

    undoing = threading.Thread(target=undo)
    undoing.start()
    deadline = time.monotonic() + WAIT_S
    while _waiting_on_a_lock() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)  # until the undo waits for a lock the bulk action holds
    go.set()
    result = bulk_thread.finished()
    undoing.join(WAIT_S)
    assert not undoing.is_alive() and "error" not in undone, undone
    assert result.applied == 1
    assert "stands" in undone["refused"]  # the item left the queue first; the answer stands
    assert ReviewItem.objects.get(pk=item.pk).status == ReviewItem.Status.SHED
    assert Queue.default().depth == 0
