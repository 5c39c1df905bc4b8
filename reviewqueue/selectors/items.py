"""The item list: every item an operator may find (``/ops/items/``), the
items a reviewer answered (``/review/history/``) and a producer's own items
(``GET /api/items``), filtered and paged by keyset.

Paging never counts or skips rows: a page is the first ``size`` rows after a
cursor on (created_at, id), newest first, read from an index in that order,
so page 1,000 of a million items costs what page 1 of ten thousand costs.
Ties on created_at are broken by id, so no row is shown twice or skipped.
The reviewer's history pages the same way on their own answers (answer
time, item id), so its cost follows the page, not the table.

Full-text search (``q``) runs PostgreSQL's full text over the task and the
output (the expression index of migration 0016 serves it); other databases
fall back to a case-insensitive substring of either. Every function here
only reads.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import connection
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone
from django.utils.text import Truncator

from ..finality import final_at, undo_window
from ..models import CircuitBreakerEntry, Judgement, LoopRun, Queue, ReviewItem, UndoneAnswer, Verdict

PAGE_SIZE = 50
# Full text in one language-agnostic configuration: the tasks and outputs
# are code and prose in any language; stemming for one would miss the rest.
SEARCH_CONFIG = "simple"
SEARCH_FIELDS = ("task_description", "final_output")


class BadCursor(ValueError):
    """The ``after`` cursor is not one this list gave out."""


@dataclass(frozen=True)
class ItemFilter:
    """What to list; every field optional. ``queue`` is a Queue row, already
    checked to be one the reader may see; dates are inclusive days."""

    queue: Queue | None = None
    status: str = ""
    decision: str = ""
    label: str = ""
    producer: str = ""
    run: str = ""
    version: int | None = None
    since: date | None = None
    until: date | None = None
    q: str = ""

    def described(self) -> dict[str, str]:
        """The filter as its query-string values (blank ones left out): what
        the audit records and what links carry."""
        values = {
            "queue": self.queue.slug if self.queue else "",
            "status": self.status,
            "decision": self.decision,
            "label": self.label,
            "producer": self.producer,
            "run": self.run,
            "version": str(self.version) if self.version is not None else "",
            "since": self.since.isoformat() if self.since else "",
            "until": self.until.isoformat() if self.until else "",
            "q": self.q,
        }
        return {key: value for key, value in values.items() if value}


@dataclass
class Page:
    items: list[ReviewItem]
    next_cursor: str | None
    filters: ItemFilter = field(default_factory=ItemFilter)


def encode_cursor(item: ReviewItem) -> str:
    return _cursor(item.created_at, item.pk)


def _cursor(at: datetime, pk: int) -> str:
    raw = f"{at.isoformat()}|{pk}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    """(created_at, id) from a cursor; BadCursor for anything else."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        stamp, pk = raw.split("|")
        at = datetime.fromisoformat(stamp)
        number = int(pk)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadCursor("not a cursor this list gave out; start from the first page") from None
    if at.tzinfo is None or number < 1:
        raise BadCursor("not a cursor this list gave out; start from the first page")
    return at, number


def searching_in_full_text() -> bool:
    return connection.vendor == "postgresql"


def matching(rows: QuerySet[ReviewItem], filters: ItemFilter) -> QuerySet[ReviewItem]:
    """``rows`` narrowed by the filter (the item's own status, its settled
    verdict's decision and label)."""
    if filters.queue is not None:
        rows = rows.filter(queue=filters.queue)
    if filters.status:
        rows = rows.filter(status=filters.status)
    if filters.decision:
        rows = rows.filter(verdict__decision=filters.decision)
    if filters.label:
        rows = rows.filter(verdict__reason_label=filters.label)
    if filters.producer:
        rows = rows.filter(producer=filters.producer)
    if filters.run:
        rows = rows.filter(source_run_id=filters.run)
    if filters.version is not None:
        rows = rows.filter(version=filters.version)
    rows = _in_dates(rows, filters.since, filters.until)
    return searched(rows, filters.q)


def _in_dates(rows: QuerySet[Any], since: date | None, until: date | None) -> QuerySet[Any]:
    """Rows (items, or a reviewer's answers) created on the days from ``since`` to ``until``."""
    zone = timezone.get_current_timezone()
    if since is not None:
        rows = rows.filter(created_at__gte=datetime.combine(since, time.min, tzinfo=zone))
    if until is not None:
        rows = rows.filter(created_at__lt=datetime.combine(until + timedelta(days=1), time.min, tzinfo=zone))
    return rows


def searched(rows: QuerySet[ReviewItem], q: str) -> QuerySet[ReviewItem]:
    """Items whose task or output matches ``q``: every word, as a web search
    reads it ("quoted phrase", -excluded, or), on PostgreSQL; elsewhere the
    whole text as a substring of either."""
    q = q.strip()
    if not q:
        return rows
    if searching_in_full_text():
        vector = SearchVector(*SEARCH_FIELDS, config=SEARCH_CONFIG)
        return rows.alias(search=vector).filter(search=SearchQuery(q, config=SEARCH_CONFIG, search_type="websearch"))
    return rows.filter(Q(task_description__icontains=q) | Q(final_output__icontains=q))


# A search that matches at most this many items is paged from its matches,
# found through the full-text index; one that matches more is paged by
# walking the keyset index and testing each row (see ``found_first``).
SEARCH_PROBE = 2_000


def found_first(rows: QuerySet[ReviewItem], q: str) -> QuerySet[ReviewItem]:
    """``rows`` (already narrowed by the search ``q``) as the page should
    read them. A newest-first page reads well by walking the keyset index
    and testing each row for the words while matches are many; when they are
    few, that walk crosses most of the table (a word in no item cost seconds
    at a million items), and PostgreSQL cannot tell the two apart (an unknown
    word is estimated at 0.5 % of the rows). So first ask the full-text index
    for up to SEARCH_PROBE + 1 matches of the words alone: unordered, it is
    read from the index for a rare word and stops early for a common one. At
    most SEARCH_PROBE found: the page is taken from those ids. One statement
    more, and only on PostgreSQL with ``q``."""
    ids = _few_matches(q)
    return rows if ids is None else rows.filter(pk__in=ids)


def _few_matches(q: str) -> list[int] | None:
    """The ids of every item the search ``q`` matches when there are at
    most SEARCH_PROBE of them (read through the full-text index); None when
    there are more, or there is no search, or no full-text index."""
    if not q.strip() or not searching_in_full_text():
        return None
    probe = searched(ReviewItem.all_objects.order_by(), q).values_list("pk", flat=True)[: SEARCH_PROBE + 1]
    ids = list(probe)
    return None if len(ids) > SEARCH_PROBE else ids


def page_of(
    rows: QuerySet[ReviewItem], after: str = "", size: int | None = None
) -> tuple[list[ReviewItem], str | None]:
    """The ``size`` newest rows older than the cursor ``after`` and the
    cursor of the next page (None on the last). One statement: it reads
    ``size + 1`` rows to know whether another page follows."""
    size = size or PAGE_SIZE
    if after:
        at, pk = decode_cursor(after)
        # (created_at, id) < (at, pk), spelt so the first term is an index
        # condition: the scan starts at the cursor, not at the newest row.
        rows = rows.filter(created_at__lte=at).filter(Q(created_at__lt=at) | Q(pk__lt=pk))
    found = list(rows.order_by("-created_at", "-pk")[: size + 1])
    more = len(found) > size
    found = found[:size]
    return found, encode_cursor(found[-1]) if more and found else None


def operator_items(filters: ItemFilter, *, after: str = "", size: int | None = None) -> Page:
    """Every queue's items (gold copies aside), for operators."""
    rows = matching(ReviewItem.objects.all(), filters).select_related("queue", "verdict")
    items, cursor = page_of(found_first(rows, filters.q), after, size)
    return Page(items, cursor, filters)


# The statuses a verdict gives, told a producer only once final (``finality``).
VERDICT_STATUSES = (ReviewItem.Status.APPROVED, ReviewItem.Status.REJECTED, ReviewItem.Status.SENT_BACK)


def producer_items(
    producer: str, filters: ItemFilter, *, after: str = "", size: int | None = None, now: datetime | None = None
) -> Page:
    """A producer's own items, nobody else's (``GET /api/items``). A verdict
    still inside its undo window is not told: such an item matches what the
    producer is shown of it (``claimed``, no decision), never its verdict's
    status, decision or label, so a filter cannot tell it either."""
    now = now or timezone.now()
    unfinal = Q(status__in=VERDICT_STATUSES, decided_at__gt=now - undo_window())
    told = replace(filters, status="", decision="", label="")
    rows = matching(ReviewItem.objects.filter(producer=producer), told)
    if filters.status == ReviewItem.Status.CLAIMED:
        rows = rows.filter(Q(status=ReviewItem.Status.CLAIMED) | unfinal)
    elif filters.status:
        rows = rows.filter(status=filters.status).exclude(unfinal)
    if filters.decision or filters.label:
        rows = matching(rows, replace(ItemFilter(), decision=filters.decision, label=filters.label)).exclude(unfinal)
    items, cursor = page_of(found_first(rows.select_related("queue", "verdict"), filters.q), after, size)
    return Page(items, cursor, filters)


def reviewer_history(
    reviewer: AbstractBaseUser, filters: ItemFilter, *, after: str = "", size: int | None = None
) -> Page:
    """The items this reviewer answered (a verdict, a round of a double
    review, or a gold copy: listed as any item, which it must look like), in
    the queues they review now, newest answer first, each with the
    reviewer's own answer as ``mine`` and its time as ``answered_at``, and
    nothing else of the item's outcome. ``decision``, ``label`` and the
    dates are read from the reviewer's own answer, never from anyone else's.

    Paged by keyset on (answer time, item id), read from the reviewer's own
    answers in their index order (``verdict_by_reviewer``,
    ``judgement_by_reviewer_time``): a page costs a page's worth of the
    reviewer's answers whatever the number of items, so a reviewer with ten
    answers among ten million items waits no longer than one with a
    million. Three statements: each kind of answer, then the items (a
    fourth with a search, ``found_first``'s)."""
    size = size or PAGE_SIZE
    items = ReviewItem.all_objects.filter(pk=OuterRef("item_id"), queue__in=Queue.objects.reviewable_by(reviewer))
    if filters.queue is not None:
        items = items.filter(queue=filters.queue)
    if filters.version is not None:
        items = items.filter(version=filters.version)
    items = searched(items, filters.q)
    # A double review's settling answer is both the reviewer's round and the
    # item's verdict: listed once, as their round.
    own_round = Judgement.objects.filter(item=OuterRef("item_id"), reviewer=reviewer)
    arms = [
        Judgement.objects.filter(reviewer=reviewer),
        Verdict.objects.filter(reviewer=reviewer).exclude(Exists(own_round)),
    ]
    few = _few_matches(filters.q)  # a rare word: only its items' answers are read
    found: list[Verdict | Judgement] = []
    for rows in arms:
        if few is not None:
            rows = rows.filter(item_id__in=few)
        rows = _answers_in(rows.filter(Exists(items)), filters, after)
        found.extend(rows.order_by("-created_at", "-item_id")[: size + 1])
    found.sort(key=lambda answer: (answer.created_at, answer.item_id), reverse=True)
    more = len(found) > size
    found = found[:size]
    by_pk = ReviewItem.all_objects.select_related("queue").in_bulk([answer.item_id for answer in found])
    listed = []
    for answer in found:
        item = by_pk[answer.item_id]
        item.mine = answer  # type: ignore[attr-defined]
        item.answered_at = answer.created_at  # type: ignore[attr-defined]
        listed.append(item)
    cursor = _cursor(found[-1].created_at, found[-1].item_id) if more and found else None
    return Page(listed, cursor, filters)


def _answers_in(rows: QuerySet[Any], filters: ItemFilter, after: str) -> QuerySet[Any]:
    """A reviewer's answers (verdicts or rounds) narrowed by what the filter
    says of the answer itself (decision, label, the day it was given) and
    older than the cursor."""
    if filters.decision:
        rows = rows.filter(decision=filters.decision)
    if filters.label:
        rows = rows.filter(reason_label=filters.label)
    rows = _in_dates(rows, filters.since, filters.until)
    if after:
        at, pk = decode_cursor(after)
        rows = rows.filter(created_at__lte=at).filter(Q(created_at__lt=at) | Q(item_id__lt=pk))
    return rows


# --- one item's timeline -------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One line of an item's timeline."""

    at: datetime | None
    kind: str  # admitted, claimed, lease, renewal, skip, answer, undone, verdict, final, webhook, shed, version
    text: str
    item_link: int | None = None  # another item this line points to (a version)


def timeline(item: ReviewItem) -> list[Event]:
    """What happened to the item, oldest first, read from the rows that
    record it: its admission and run, the current lease, each lease's
    renewals and skip and how many leases ran out, every answer (double review
    rounds), each answer taken back, the settled verdict and the instant it
    became final, each webhook event with its attempts, a shed entry, and
    the versions before and after it."""
    events = [*_admission(item), *_lease(item), *_leases(item), *_undone(item)]
    for judgement in item.judgements.select_related("reviewer").order_by("created_at", "pk"):
        events.append(
            Event(
                judgement.created_at,
                "answer",
                f"Round {judgement.round}: {_who(judgement.reviewer)} answered {_decided(judgement)}",
            )
        )
    verdict = Verdict.objects.select_related("reviewer").filter(item=item).first()
    if verdict is not None:
        how = verdict.get_settled_by_display()
        text = f"Settled: {_decided(verdict)} by {_who(verdict.reviewer)}, {how}"
        events.append(Event(verdict.created_at, "verdict", text))
        events.append(Event(final_at(verdict.created_at), "final", "Final: the undo window closed"))
    events.extend(_deliveries(item))
    for later in item.next_versions.order_by("pk"):
        events.append(Event(later.created_at, "version", f"Version {later.version} admitted as #{later.pk}", later.pk))
    return sorted(events, key=_when)


def _when(event: Event) -> tuple[int, datetime]:
    """Oldest first; an undated line about an earlier version leads, other
    undated lines (counts) close the list."""
    if event.at is not None:
        return 1, event.at
    return (0 if event.kind == "version" else 2), datetime.min.replace(tzinfo=UTC)


def _admission(item: ReviewItem) -> list[Event]:
    source = f" from {item.producer}" if item.producer else ""
    run = LoopRun.objects.filter(item=item).only("run_id", "agent", "attempts").first()
    made = f", run {run.run_id} ({run.agent}, {run.attempts} attempts)" if run else ""
    events = [Event(item.created_at, "admitted", f"Admitted to {item.queue.name}{source}{made}")]
    if item.previous_version_id:
        events.insert(
            0,
            Event(
                None, "version", f"Version {item.version}, after #{item.previous_version_id}", item.previous_version_id
            ),
        )
    for entry in CircuitBreakerEntry.objects.filter(item=item):
        events.append(Event(entry.created_at, "shed", f"Shed at depth {entry.depth} of {entry.capacity}"))
    if item.shed_at and not any(e.kind == "shed" for e in events):
        events.append(Event(item.shed_at, "shed", "Shed (expired by an operator, or at capacity)"))
    return events


def _lease(item: ReviewItem) -> list[Event]:
    events = []
    if item.claimed_at:
        holder = item.lease_holder.get_username() if item.lease_holder else "a reviewer"
        events.append(Event(item.claimed_at, "claimed", f"Last claimed by {holder}"))
    if item.lease_expiries:
        times = "once" if item.lease_expiries == 1 else f"{item.lease_expiries} times"
        events.append(Event(None, "lease", f"A lease ran out before a verdict {times}"))
    if item.status == ReviewItem.Status.CLAIMED and item.lease_expires_at:
        events.append(Event(item.lease_expires_at, "lease", "The current lease runs out (renewals move this)"))
    return events


def _who(user: AbstractBaseUser | None) -> str:
    return user.get_username() if user is not None else "a removed user"


def _decided(answer: Verdict | Judgement | UndoneAnswer) -> str:
    """An answer in words: its decision, a rejection's label."""
    label = f" ({answer.get_reason_label_display()})" if answer.reason_label else ""
    return f"{answer.get_decision_display().lower()}{label}"


def _clock(at: datetime, line: datetime | None = None) -> str:
    """A time inside a line's text: the time of day when it falls on the
    line's own day (which the line's date shows), else the date too."""
    local = timezone.localtime(at)
    if line is not None and local.date() == timezone.localtime(line).date():
        return local.strftime("%H:%M:%S")
    return local.strftime("%Y-%m-%d %H:%M:%S")


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


SETTLED_BY = dict(Verdict._meta.get_field("settled_by").choices or [])


def _leases(item: ReviewItem) -> list[Event]:
    """One line per lease that was renewed, at its latest renewal, and one
    per lease its holder gave back (a skip), at that moment."""
    events = []
    for lease in item.lease_records.select_related("holder").order_by("claimed_at", "pk"):
        who = _who(lease.holder)
        if lease.renewals and lease.last_at is not None and lease.first_at is not None:
            at = lease.last_at
            first = "" if lease.renewals == 1 else f", first renewal {_clock(lease.first_at, at)}"
            text = (
                f"{who} renewed the lease {_times(lease.renewals)} (claimed {_clock(lease.claimed_at, at)}"
                f"{first}); it then ran to {_clock(lease.expires_at, at)}"
            )
            events.append(Event(at, "renewal", text))
        if lease.released_at is not None:
            held = max(0, round((lease.released_at - lease.claimed_at).total_seconds()))
            text = f"{who} skipped it, back to the queue (claimed {_clock(lease.claimed_at, lease.released_at)}, held {held} s)"
            events.append(Event(lease.released_at, "skip", text))
    return events


def _undone(item: ReviewItem) -> list[Event]:
    """One line per answer taken back, at the moment it was undone."""
    events = []
    for undone in item.undone_answers.select_related("reviewer").order_by("undone_at", "pk"):
        if undone.kind == UndoneAnswer.Kind.VERDICT:
            settled = SETTLED_BY.get(undone.settled_by, "")
            what = f"verdict, {_decided(undone)}" + (f" ({settled})" if settled and undone.round > 1 else "")
        elif undone.kind == UndoneAnswer.Kind.REVIEW:
            what = f"round {undone.round} answer, {_decided(undone)}"
        else:
            what = f"gold answer, {_decided(undone)}"
        note = f' ("{Truncator(undone.note).chars(80)}")' if undone.note else ""
        seconds = max(0, round((undone.undone_at - undone.decided_at).total_seconds()))
        text = (
            f"Undone: {_who(undone.reviewer)} took back their {what}{note}, "
            f"given at {_clock(undone.decided_at, undone.undone_at)}, undone {seconds} s later"
        )
        events.append(Event(undone.undone_at, "undone", text))
    return events


def _deliveries(item: ReviewItem) -> list[Event]:
    events = []
    for row in item.webhook_deliveries.order_by("created_at", "pk"):
        answer = f", last answer HTTP {row.last_status_code}" if row.last_status_code else ""
        error = f", {row.last_error[:80]}" if row.last_error else ""
        tries = "1 attempt" if row.attempts == 1 else f"{row.attempts} attempts"
        events.append(
            Event(
                row.delivered_at or row.created_at,
                "webhook",
                f"Webhook {row.event_type}: {row.get_status_display()} after {tries}{answer}{error}",
            )
        )
    return events
