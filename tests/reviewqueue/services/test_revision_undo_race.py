"""A producer's revision of a sent-back item and the reviewer's undo of that
send-back, at the same moment: each locks the sent-back item's row first,
then checks, so exactly one of them wins, never both (both would leave the
original and its version 2 waiting for review). The moment is the end of the
undo window, where the two processes' clocks may disagree: the undo's says
the send-back is not final yet, the revision's says it is."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from reviewqueue import services
from reviewqueue.models import ReviewItem

WINDOW = 60


def _sent_back(admit_item: Callable[..., Any], reviewer: Any, settings: Any) -> tuple[ReviewItem, Any, Any, Any]:
    """A sent-back item of producer p; the instants just before (undo) and at
    (revision) the end of its undo window."""
    settings.REVIEWQUEUE_UNDO_SECONDS = WINDOW
    item = admit_item(producer="p").item
    at = timezone.now()
    services.claim(reviewer=reviewer, now=at)
    services.send_back(item_id=item.pk, reviewer=reviewer, note="cite the log line", now=at)
    item.refresh_from_db()
    return item, at, at + timedelta(seconds=WINDOW - 1), at + timedelta(seconds=WINDOW)


def _revise(admit_item: Callable[..., Any], item: ReviewItem, at: Any, **fields: Any) -> Any:
    return admit_item(producer="p", idempotency_key="rev", final_output="v2", previous_version=item, now=at, **fields)


def _only_one_won(item: ReviewItem) -> None:
    item.refresh_from_db()
    revisions = ReviewItem.objects.filter(previous_version=item)
    if item.status == ReviewItem.Status.SENT_BACK:
        assert revisions.count() == 1  # the revision won: the send-back stands
    else:
        assert item.status == ReviewItem.Status.CLAIMED and not revisions.exists()  # the undo won


@pytest.mark.django_db
def test_a_revision_checked_before_an_undo_committed_is_refused_after_it(
    admit_item: Callable[..., Any], reviewer: Any, settings: Any
) -> None:
    """The API's own check of previous_item saw the send-back; the undo then
    committed before the revision was admitted: admission checks again."""
    item, _, before_final, final = _sent_back(admit_item, reviewer, settings)
    services.undo(reviewer=reviewer, now=before_final)
    with pytest.raises(services.InvalidInput) as refused:
        _revise(admit_item, item, final)
    assert refused.value.fields == {"previous_item": f"item {item.pk} was not sent back (it is claimed)"}
    _only_one_won(item)


def _lock_waiter_appears(timeout: float = 5.0) -> bool:
    """Whether another connection comes to wait for a lock (polled on a connection of its own)."""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock'"
                )
                if cursor.fetchone()[0]:
                    return True
            time.sleep(0.02)
        return False
    finally:
        connections.close_all()


def _in_open_transaction(work: Callable[[], Any], done: threading.Event, out: dict[str, Any]) -> None:
    """``work`` in a transaction of another connection, kept open until someone
    waits for one of its locks (or a few seconds pass), then committed."""
    try:
        with transaction.atomic():
            try:
                out["result"] = work()
            except Exception as exc:  # noqa: BLE001 - the test reads what happened
                out["error"] = exc
            done.set()
            waiter = threading.Thread(target=lambda: out.update(waited=_lock_waiter_appears()))
            waiter.start()
            waiter.join()
    finally:
        done.set()
        connections.close_all()


postgresql_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks across two connections")


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_a_revision_waits_for_an_undo_in_progress_and_is_refused(
    admit_item: Callable[..., Any], reviewer: Any, settings: Any
) -> None:
    item, _at, before_final, final = _sent_back(admit_item, reviewer, settings)
    done, out = threading.Event(), {}
    undo = threading.Thread(
        target=_in_open_transaction, args=(lambda: services.undo(reviewer=reviewer, now=before_final), done, out)
    )
    undo.start()
    done.wait(10)
    try:
        with pytest.raises(services.InvalidInput) as refused:
            _revise(admit_item, item, final)
    finally:
        undo.join(20)
    assert "error" not in out and out["waited"]  # the undo won, and the revision waited for it
    assert "was not sent back" in refused.value.fields["previous_item"]
    _only_one_won(item)


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_an_undo_waits_for_a_revision_in_progress_and_is_refused(
    admit_item: Callable[..., Any], reviewer: Any, settings: Any
) -> None:
    """The revision goes to another queue, so no queue's row orders the two:
    only the sent-back item's."""
    item, _at, before_final, final = _sent_back(admit_item, reviewer, settings)
    services.create_queue(user=None, slug="docs")
    done, out = threading.Event(), {}
    revision = threading.Thread(
        target=_in_open_transaction, args=(lambda: _revise(admit_item, item, final, queue="docs"), done, out)
    )
    revision.start()
    done.wait(10)
    try:
        with pytest.raises(services.UndoRefused) as refused:
            services.undo(reviewer=reviewer, now=before_final)
    finally:
        revision.join(20)
    assert "error" not in out and out["waited"]  # the revision won, and the undo waited for it
    assert "its revision" in refused.value.message and "the send-back stands" in refused.value.message
    _only_one_won(item)
