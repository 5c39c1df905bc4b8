"""The item list's selectors: every filter, full-text search (or its
substring fallback), keyset paging that neither repeats nor skips a row when
items share a timestamp, the reviewer's history and the item's timeline."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from reviewqueue import services
from reviewqueue.models import Judgement, Queue, ReviewItem, Verdict, WebhookDelivery
from reviewqueue.selectors import items as selectors
from reviewqueue.selectors.items import BadCursor, ItemFilter

pytestmark = pytest.mark.django_db


def _pks(page: selectors.Page) -> list[int]:
    return [item.pk for item in page.items]


def _all_pages(filters: ItemFilter, size: int) -> list[int]:
    seen, after = [], ""
    while True:
        page = selectors.operator_items(filters, after=after, size=size)
        seen += _pks(page)
        if page.next_cursor is None:
            return seen
        after = page.next_cursor


def test_keyset_pages_cover_every_item_once_even_when_timestamps_tie(admit_item: Any) -> None:
    items = [admit_item().item for _ in range(7)]
    same = timezone.now() - timedelta(minutes=1)
    ReviewItem.objects.filter(pk__in=[i.pk for i in items[1:5]]).update(created_at=same)
    expected = list(ReviewItem.objects.order_by("-created_at", "-pk").values_list("pk", flat=True))
    assert _all_pages(ItemFilter(), size=2) == expected
    assert _all_pages(ItemFilter(), size=3) == expected


def test_a_forged_cursor_is_refused() -> None:
    with pytest.raises(BadCursor):
        selectors.decode_cursor("not-a-cursor")
    with pytest.raises(BadCursor):
        selectors.decode_cursor("")


def test_each_filter_narrows_the_list(admit_item: Any, reviewer: Any) -> None:
    docs = services.create_queue(user=None, slug="docs", name="Docs")
    a = admit_item(producer="alpha", source_run_id="run-1").item
    b = admit_item(producer="beta", queue="docs").item
    services.claim(reviewer=reviewer, queue=Queue.default())
    services.decide(item_id=a.pk, reviewer=reviewer, approve=False, reason_label="logic_error")
    assert _pks(selectors.operator_items(ItemFilter(queue=docs))) == [b.pk]
    assert _pks(selectors.operator_items(ItemFilter(status="rejected"))) == [a.pk]
    assert _pks(selectors.operator_items(ItemFilter(decision="reject"))) == [a.pk]
    assert _pks(selectors.operator_items(ItemFilter(label="logic_error"))) == [a.pk]
    assert _pks(selectors.operator_items(ItemFilter(label="code_error"))) == []
    assert _pks(selectors.operator_items(ItemFilter(producer="beta"))) == [b.pk]
    assert _pks(selectors.operator_items(ItemFilter(run="run-1"))) == [a.pk]
    assert _pks(selectors.operator_items(ItemFilter(version=2))) == []
    today = timezone.localdate()
    assert len(_pks(selectors.operator_items(ItemFilter(since=today, until=today)))) == 2
    assert _pks(selectors.operator_items(ItemFilter(until=today - timedelta(days=1)))) == []
    assert _pks(selectors.operator_items(ItemFilter(since=date(2999, 1, 1)))) == []


def test_search_finds_words_in_the_task_or_the_output(admit_item: Any) -> None:
    task = admit_item(task_description="Parse the invoice dates", final_output="print(1)").item
    output = admit_item(task_description="Something else", final_output="def reconcile_ledger(): pass").item
    admit_item(task_description="Unrelated", final_output="nothing here")
    assert _pks(selectors.operator_items(ItemFilter(q="invoice"))) == [task.pk]
    found = _pks(selectors.operator_items(ItemFilter(q="reconcile_ledger")))
    assert found == [output.pk]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the full-text index is PostgreSQL's")
@pytest.mark.parametrize("matches", [3, 6])  # at most SEARCH_PROBE, then more
def test_a_search_pages_alike_from_its_few_matches_or_by_walking_the_list(
    admit_item: Any, reviewer: Any, matches: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(selectors, "SEARCH_PROBE", 4)
    items = [
        admit_item(task_description=f"Fix the zebra parser {n}" if n % 2 else f"Fix it {n}").item
        for n in range(2 * matches)
    ]
    for item in items:
        assert services.claim(reviewer=reviewer).pk == item.pk
        services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    few = selectors._few_matches("zebra")
    assert (few is not None) == (matches <= 4)
    expected = [item.pk for item in reversed(items) if "zebra" in item.task_description]
    assert _all_pages(ItemFilter(q="zebra"), size=2) == expected
    assert _history_pages(reviewer, ItemFilter(q="zebra"), size=2) == expected
    assert _all_pages(ItemFilter(q="zebra -parser"), size=2) == []


def test_the_history_shows_only_what_the_reviewer_answered_in_queues_they_review(
    admit_item: Any, reviewer: Any, make_user: Any
) -> None:
    other = make_user("olga", "reviewer")
    mine = admit_item().item
    theirs = admit_item().item
    assert services.claim(reviewer=reviewer).pk == mine.pk
    services.decide(item_id=mine.pk, reviewer=reviewer, approve=True)
    assert services.claim(reviewer=other).pk == theirs.pk
    services.decide(item_id=theirs.pk, reviewer=other, approve=False, reason_label="unclear")
    page = selectors.reviewer_history(reviewer, ItemFilter())
    assert _pks(page) == [mine.pk]
    assert page.items[0].mine.decision == "approve"
    assert _pks(selectors.reviewer_history(reviewer, ItemFilter(decision="reject"))) == []
    Queue.objects.filter(pk=Queue.default().pk).update(open_to_all=False)
    assert _pks(selectors.reviewer_history(reviewer, ItemFilter())) == []


def test_the_history_shows_the_reviewers_own_round_not_the_settled_verdict(admit_item: Any, reviewer: Any) -> None:
    item = admit_item().item
    Judgement.objects.create(item=item, reviewer=reviewer, kind="review", round=1, decision="approve")
    page = selectors.reviewer_history(reviewer, ItemFilter())
    assert _pks(page) == [item.pk] and page.items[0].mine.decision == "approve"


def _history_pages(reviewer: Any, filters: ItemFilter, size: int) -> list[int]:
    seen, after = [], ""
    while True:
        page = selectors.reviewer_history(reviewer, filters, after=after, size=size)
        seen += _pks(page)
        if page.next_cursor is None:
            return seen
        after = page.next_cursor


def test_the_history_lists_answers_newest_first_and_pages_through_each_once(admit_item: Any, reviewer: Any) -> None:
    # Answered in the reverse of their admission, two at the same instant,
    # rounds of a double review among the verdicts.
    items = [admit_item().item for _ in range(7)]
    start = timezone.now()
    answered_at = {}
    for n, item in enumerate(items):
        at = start + timedelta(seconds=10 - min(n, 5))  # items 5 and 6 share their time with item 4
        answered_at[item.pk] = at
        if n % 3 == 1:
            Judgement.objects.create(
                item=item, reviewer=reviewer, kind="review", round=1, decision="approve", created_at=at
            )
        else:
            rounds_only = [other.pk for m, other in enumerate(items) if m % 3 == 1]
            assert services.claim(reviewer=reviewer, exclude=rounds_only, now=start).pk == item.pk
            services.decide(item_id=item.pk, reviewer=reviewer, approve=n % 2 == 0, reason_label="unclear", now=at)
    newest_first = sorted(answered_at, key=lambda pk: (answered_at[pk], pk), reverse=True)
    assert _pks(selectors.reviewer_history(reviewer, ItemFilter())) == newest_first
    for size in (1, 2, 3):
        assert _history_pages(reviewer, ItemFilter(), size) == newest_first
    page = selectors.reviewer_history(reviewer, ItemFilter())
    assert [item.answered_at for item in page.items] == [answered_at[pk] for pk in newest_first]


def test_a_settling_answer_is_listed_once_and_the_days_are_the_answers(admit_item: Any, reviewer: Any) -> None:
    item = admit_item().item
    yesterday = timezone.now() - timedelta(days=1)
    # The answer that settled a double review is the reviewer's round and the item's verdict.
    assert services.claim(reviewer=reviewer, now=yesterday).pk == item.pk
    services.decide(item_id=item.pk, reviewer=reviewer, approve=True, now=yesterday)
    Judgement.objects.create(
        item=item, reviewer=reviewer, kind="review", round=2, decision="approve", created_at=yesterday
    )
    assert _pks(selectors.reviewer_history(reviewer, ItemFilter())) == [item.pk]
    day = timezone.localtime(yesterday).date()
    assert _pks(selectors.reviewer_history(reviewer, ItemFilter(since=day, until=day))) == [item.pk]
    today = timezone.localdate()
    assert _pks(selectors.reviewer_history(reviewer, ItemFilter(since=today))) == []


def test_the_timeline_tells_the_items_story_in_order(admit_item: Any, reviewer: Any) -> None:
    item = admit_item(callback_url="http://127.0.0.1:9/hook").item
    services.claim(reviewer=reviewer)
    services.decide(item_id=item.pk, reviewer=reviewer, approve=False, reason_label="code_error")
    item.refresh_from_db()
    events = selectors.timeline(item)
    kinds = [event.kind for event in events]
    assert kinds[:4] == ["admitted", "claimed", "verdict", "webhook"] or kinds[:3] == ["admitted", "claimed", "verdict"]
    assert {"admitted", "claimed", "verdict", "final", "webhook"} <= set(kinds)
    assert any("rita" in event.text and "reject" in event.text for event in events)
    assert WebhookDelivery.objects.filter(item=item).exists()
    assert Verdict.objects.filter(item=item).exists()


def test_the_timeline_links_the_versions(admit_item: Any) -> None:
    first = admit_item().item
    second = admit_item().item
    ReviewItem.objects.filter(pk=second.pk).update(previous_version=first, version=2)
    second.refresh_from_db()
    assert any(event.item_link == second.pk for event in selectors.timeline(first))
    assert any(event.item_link == first.pk for event in selectors.timeline(second))


def test_the_timeline_shows_each_leases_renewals_on_one_line(admit_item: Any, reviewer: Any) -> None:
    item = admit_item().item
    held = services.claim(reviewer=reviewer)
    start = timezone.now()
    for minute in (1, 2, 3):
        services.renew(item_id=item.pk, reviewer=reviewer, now=start + timedelta(minutes=minute))
    renewals = [event for event in selectors.timeline(ReviewItem.objects.get(pk=item.pk)) if event.kind == "renewal"]
    assert len(renewals) == 1
    (line,) = renewals
    assert line.at == start + timedelta(minutes=3)
    assert "rita renewed the lease 3 times" in line.text
    assert f"(claimed {selectors._clock(held.claimed_at, line.at)}" in line.text
    assert f"first renewal {selectors._clock(start + timedelta(minutes=1), line.at)})" in line.text


def test_the_timeline_shows_who_skipped_the_item_and_who_took_it_next(
    admit_item: Any, reviewer: Any, make_user: Any
) -> None:
    item = admit_item().item
    olga = make_user("olga", "reviewer")
    start = timezone.now()
    services.claim(reviewer=reviewer, now=start)
    services.release(item_id=item.pk, reviewer=reviewer, now=start + timedelta(seconds=12))
    services.claim(reviewer=olga, now=start + timedelta(seconds=20))
    services.release(item_id=item.pk, reviewer=olga, now=start + timedelta(seconds=25))
    services.claim(reviewer=reviewer, now=start + timedelta(seconds=30))
    services.decide(item_id=item.pk, reviewer=reviewer, approve=True, now=start + timedelta(seconds=40))
    events = selectors.timeline(ReviewItem.objects.get(pk=item.pk))
    skips = [event for event in events if event.kind == "skip"]
    assert [event.at for event in skips] == [start + timedelta(seconds=12), start + timedelta(seconds=25)]
    assert skips[0].text.startswith("rita skipped it") and "held 12 s" in skips[0].text
    assert skips[1].text.startswith("olga skipped it") and "held 5 s" in skips[1].text
    kinds = [event.kind for event in events]
    assert kinds.index("skip") < kinds.index("verdict")


def test_the_timeline_says_what_was_undone_by_whom_and_when(admit_item: Any, reviewer: Any) -> None:
    item = admit_item().item
    services.claim(reviewer=reviewer)
    given = timezone.now()
    services.send_back(item_id=item.pk, reviewer=reviewer, note="Cover the leap year", now=given)
    services.undo(reviewer=reviewer, now=given + timedelta(seconds=7))
    services.decide(item_id=item.pk, reviewer=reviewer, approve=True, now=given + timedelta(seconds=9))
    events = selectors.timeline(ReviewItem.objects.get(pk=item.pk))
    kinds = [event.kind for event in events]
    assert kinds.index("undone") < kinds.index("verdict")  # taken back before the verdict that stands
    (undone,) = [event for event in events if event.kind == "undone"]
    assert undone.at == given + timedelta(seconds=7)
    assert "rita took back their verdict, sent back with a note" in undone.text
    assert '("Cover the leap year")' in undone.text
    assert f"given at {selectors._clock(given, undone.at)}, undone 7 s later" in undone.text
    assert any(event.kind == "verdict" and "approve by rita" in event.text for event in events)


@pytest.mark.double_review
def test_the_timeline_names_the_round_of_an_undone_double_review_answer(
    admit_item: Any, reviewer: Any, make_user: Any
) -> None:
    services.policy_update(user=None, changes={"double_review_rate": 1.0, "gold_rate": 0})
    make_user("ben", "reviewer")  # a second reviewer exists, so the item is double-reviewed
    item = admit_item().item
    services.claim(reviewer=reviewer)
    services.decide(item_id=item.pk, reviewer=reviewer, approve=False, reason_label="unclear")
    services.undo(reviewer=reviewer)
    (undone,) = [e for e in selectors.timeline(ReviewItem.objects.get(pk=item.pk)) if e.kind == "undone"]
    assert "rita took back their round 1 answer, reject (unclear)" in undone.text


def test_a_time_in_a_line_shows_its_date_only_when_it_is_another_day() -> None:
    line = timezone.make_aware(datetime(2026, 3, 4, 10, 0, 5))
    assert selectors._clock(line - timedelta(seconds=5), line) == "10:00:00"
    assert selectors._clock(line - timedelta(days=1), line) == "2026-03-03 10:00:05"
