"""The reviewer's page: claim an item, read it, approve or reject, next.

Every view parses, calls a service, renders. With ``HX-Request`` a view
answers with the card fragment (plus the context panel out of band); without
it, a POST redirects back to the page, so the whole flow works as plain forms.
The reviewer is the scarcest resource (ARCHITECTURE.md rule 9): no awkward case ends
on an error page, each one says what happened and shows what to do next.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import reswap, retarget

from .. import services
from ..access import reviewer_required
from ..middleware import when_database_lost
from ..models import QueuePolicy, ReasonLabel, ReviewItem, Verdict
from ..templatetags.time_tags import ago
from .http import HtmxHttpRequest

CARD = "review/queue.html#card"
LEASE = "review/queue.html#lease"
RECENT_VERDICTS = 8
PACE_SAMPLE = 20
SKIPPED_KEY = "review_skipped"

V = TypeVar("V", bound=Callable[..., HttpResponse])


@dataclass
class Notice:
    """One line telling the reviewer what just happened; ``level`` picks the colour."""

    text: str
    level: str = "info"


@dataclass
class CardState:
    """What the card shows: the item held (if any), what just happened, and
    the form's error and typed-in values when the same item comes back."""

    item: ReviewItem | None
    notices: list[Notice] = field(default_factory=list)
    error: str = ""
    note: str = ""
    reason_label: str = ""


def _context_panel(user: User) -> dict[str, object]:
    """What a reviewer needs beside the item: waiting count, mode, their own
    recent verdicts and pace.

    The waiting count is the depth kept on the policy row (exact under the
    queue's lock, recounted by the depth-sampler beat task), read with the mode
    and instructions in one query. Verdicts load only the columns shown."""
    now = timezone.now()
    hour_ago = now - timedelta(hours=1)
    recent = list(
        Verdict.objects.filter(reviewer=user)
        .select_related("item")
        .only("decision", "reason_label", "created_at", "item_id", "item__claimed_at")
        .order_by("-created_at", "-pk")[:PACE_SAMPLE]
    )
    spans = [
        (v.created_at - v.item.claimed_at).total_seconds()
        for v in recent
        if v.item.claimed_at is not None and v.created_at >= v.item.claimed_at
    ]
    median = statistics.median(spans) if spans else None
    queue, _ = QueuePolicy.objects.only("mode", "instructions", "depth").get_or_create(pk=1)
    return {
        "waiting": queue.depth,
        "mode": queue.mode,
        "instructions": queue.instructions,
        "recent": recent[:RECENT_VERDICTS],
        "last_hour": _last_hour(user, recent, hour_ago),
        "median_seconds": median,
        # Sub-second spans come from scripts, not people; no pace claimed from them.
        "pace_per_hour": round(3600 / median) if median and median >= 1 else None,
        "undo_seconds": settings.REVIEWQUEUE_UNDO_SECONDS,
    }


def _last_hour(user: User, recent: list[Verdict], since: datetime) -> int:
    """The reviewer's verdicts since ``since``: counted from ``recent`` (the
    newest first) when it reaches back past ``since``, else by a query."""
    if len(recent) < PACE_SAMPLE or recent[-1].created_at < since:
        return sum(1 for v in recent if v.created_at >= since)
    return Verdict.objects.filter(reviewer=user, created_at__gte=since).count()


def _render_card(request: HtmxHttpRequest, state: CardState, *, status: int = 200) -> HttpResponse:
    """The card: the fragment (context panel out of band) for htmx, else the page."""
    item = state.item
    context: dict[str, object] = {
        "item": item,
        "notices": state.notices,
        "error": state.error,
        "note": state.note,
        "reason_label": state.reason_label,
        "reason_labels": list(enumerate(ReasonLabel.choices, start=1)),
        "lease_left": item.lease_seconds_left() if item is not None else 0,
        "oob": bool(request.htmx),
        **_context_panel(request.user),
    }
    template = CARD if request.htmx else "review/queue.html"
    return render(request, template, context, status=status)


def _after_post(request: HtmxHttpRequest, state: CardState) -> HttpResponse:
    """After a POST: the fragment for htmx, else Post/Redirect/Get with the
    notices carried as messages so a reload never repeats the action."""
    if request.htmx:
        return _render_card(request, state)
    for notice in state.notices:
        messages.add_message(request, messages.ERROR if notice.level == "error" else messages.INFO, notice.text)
    return redirect("review:queue")


def _skipped(request: HtmxHttpRequest) -> set[int]:
    """Items this reviewer skipped in this session, not offered again first."""
    return set(request.session.get(SKIPPED_KEY, []))


def _claim_next(request: HtmxHttpRequest, notices: list[Notice], *, just_skipped: int | None = None) -> CardState:
    """The next item under a lease, skipped ones last, with ``notices`` kept."""
    skipped = _skipped(request)
    item = services.claim(reviewer=request.user, exclude=skipped)
    if item is None and skipped:
        # Only skipped items are left: offer them again rather than an empty
        # queue, but never hand back at once the item the reviewer just skipped.
        never = () if just_skipped is None else (just_skipped,)
        item = services.claim(reviewer=request.user, exclude=never)
        if item is not None:
            notices.append(Notice(f"Only items you skipped are left; here is #{item.pk} again."))
    return CardState(item=item, notices=notices)


def _verdict_words(verdict: Verdict) -> str:
    """'approved' or 'rejected (reason)'."""
    if verdict.approved:
        return "approved"
    return f"rejected ({verdict.get_reason_label_display()})"


def _already_decided(item_id: int, reviewer: User, approve: bool, reason_label: str) -> Notice:
    """What was recorded on the item, by whom and when, and what became of
    this (second) verdict: two tabs, a double submit or another reviewer."""
    tried = "approval" if approve else "rejection"
    verdict = Verdict.objects.filter(item_id=item_id).select_related("reviewer").first()
    if verdict is None:  # a filter rule, not a person, decided it
        item = ReviewItem.objects.filter(pk=item_id).first()
        status = item.get_status_display() if item is not None else "removed"
        return Notice(f"Item #{item_id} was already decided ({status}); your {tried} was not recorded.", "error")
    recorded = f"{_verdict_words(verdict)} {ago(verdict.created_at)}"
    if verdict.reviewer_id != reviewer.pk:
        who = verdict.reviewer.get_username() if verdict.reviewer is not None else "a reviewer since removed"
        return Notice(
            f"Item #{item_id} was already {_verdict_words(verdict)} by {who}, {ago(verdict.created_at)}; "
            f"your {tried} was not recorded.",
            "error",
        )
    same = verdict.approved == approve and (approve or verdict.reason_label == reason_label)
    if same:
        return Notice(f"Your verdict on item #{item_id} was already recorded ({recorded}); nothing changed.")
    undo_seconds = settings.REVIEWQUEUE_UNDO_SECONDS
    undo = (
        f" Undo (u) within {undo_seconds} s of that verdict takes it back."
        if timezone.now() - verdict.created_at < timedelta(seconds=undo_seconds)
        else ""
    )
    return Notice(
        f"Item #{item_id} was already {recorded} by you, in another tab or window; this {tried} was "
        f"not recorded.{undo}",
        "error",
    )


def _lease_ran_out(item_id: int, state: CardState) -> Notice:
    """Say what really became of an item whose lease ran out before the
    verdict: claimed again by this reviewer, taken or decided by someone
    else, or waiting in the queue."""
    said = f"Your lease on item #{item_id} ran out before your verdict arrived, so the verdict was not recorded."
    if state.item is not None and state.item.pk == item_id:
        return Notice(
            f"{said} Nobody else had taken it, so it is yours again under a new lease: decide it again.", "error"
        )
    item = ReviewItem.objects.filter(pk=item_id).select_related("verdict__reviewer").first()
    if item is None or item.status == ReviewItem.Status.SHED:
        fate = " It has since left the queue."
    elif item.status in ReviewItem.DECIDED:
        verdict = getattr(item, "verdict", None)
        who = verdict.reviewer.get_username() if verdict is not None and verdict.reviewer is not None else None
        fate = f" {who} has decided it since." if who else " It has been decided since."
    elif item.status == ReviewItem.Status.CLAIMED:
        fate = " Another reviewer has it now."
    else:
        fate = " It went back to the queue."
    after = f" Here is item #{state.item.pk}." if state.item is not None else " Nothing else waits right now."
    return Notice(said + fate + after, "error")


def _item_id(raw: str | None) -> int | None:
    """A positive item id from form text, else None."""
    try:
        value = int(raw or "")
    except ValueError:
        return None
    return value if value > 0 else None


# What only decide can say when the database goes; the middleware says the
# rest (status, Retry-After, "try again").
VERDICT_NOT_SAVED = (
    "The connection to the database dropped, so nothing was saved: your verdict was not recorded "
    "and the item is still yours."
)


def reviewer_post(view: V) -> V:
    """A reviewer's action, done by a POST. A GET on an action URL happens
    when a session timed out mid-review: the login page sends the reviewer
    back to the URL they posted to. It only redirects to the queue."""

    @functools.wraps(view)
    def action(request: HtmxHttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method == "GET":
            return redirect("review:queue")
        return view(request, *args, **kwargs)

    return cast(V, require_http_methods(["GET", "POST"])(reviewer_required(action)))


@require_GET
@reviewer_required
def queue(request: HtmxHttpRequest) -> HttpResponse:
    """The page: the item this reviewer holds, else a Start button. A GET
    never claims: claiming changes data and is a POST.

    Also the empty queue's poll target (``review:waiting``): the card, which
    keeps polling while the queue is empty and shows the Next button once
    items wait."""
    item = services.current_claim(reviewer=request.user)
    return _render_card(request, CardState(item=item))


@reviewer_post
def next_item(request: HtmxHttpRequest) -> HttpResponse:
    """Claim the next item under a lease (or get back the one already held)."""
    state = _claim_next(request, [])
    if state.item is None:
        state.notices.append(Notice("Nothing waits right now. This page will notice new items by itself."))
    return _after_post(request, state)


@when_database_lost(VERDICT_NOT_SAVED)
@reviewer_post
def decide(request: HtmxHttpRequest, item_id: int) -> HttpResponse:
    """Record approve/reject on a held item, then hand out the next one.

    A repeated POST (double submit, a retry after a dropped connection) meets
    AlreadyDecided and is answered with "already recorded" and the next item.
    """
    started = time.perf_counter()
    decision = request.POST.get("decision", "")
    reason_label = request.POST.get("reason_label", "")
    note = request.POST.get("note", "")
    if decision not in Verdict.Decision.values:
        return _invalid(request, item_id, "Choose Approve or Reject.", note, reason_label)
    approve = decision == Verdict.Decision.APPROVE
    try:
        said = _record_verdict(request, item_id, approve=approve, reason_label=reason_label, note=note)
    except services.InvalidInput:
        return _invalid(request, item_id, "A rejection needs a reason: pick one of the five labels.", note, "")
    decided = time.perf_counter()
    state = _claim_next(request, [] if said is None else [said])
    if said is None:  # the lease ran out: what to say depends on the item handed out now
        state.notices.insert(0, _lease_ran_out(item_id, state))
        if state.item is not None and state.item.pk == item_id:
            # The same item again: keep what the reviewer typed and picked.
            state.note, state.reason_label = note, "" if approve else reason_label
    response = _after_post(request, state)
    _add_server_timing(response, started, decided)
    return response


def _record_verdict(
    request: HtmxHttpRequest, item_id: int, *, approve: bool, reason_label: str, note: str
) -> Notice | None:
    """Record the verdict through services.decide and say what became of it;
    None when the lease ran out first. A rejection without a reason raises
    services.InvalidInput, for decide to show beside the form."""
    try:
        services.decide(
            item_id=item_id,
            reviewer=request.user,
            approve=approve,
            reason_label="" if approve else reason_label,
            note=note,
        )
    except services.InvalidInput:
        raise
    except services.AlreadyDecided:
        return _already_decided(item_id, request.user, approve, reason_label)
    except services.LeaseExpired:
        return None
    except services.NotLeaseHolder:
        return Notice(f"Item #{item_id} is held by another reviewer; your verdict was not recorded.", "error")
    except services.QueueError as exc:
        return Notice(f"{exc.message}. Your verdict was not recorded.", "error")
    verb = "Approved" if approve else f"Rejected ({ReasonLabel(reason_label).label})"
    seconds = settings.REVIEWQUEUE_UNDO_SECONDS
    return Notice(f"{verb} item #{item_id}. Undo (u) within {seconds} s takes it back.")


def _add_server_timing(response: HttpResponse, started: float, decided: float) -> None:
    """Lets the browser (and the browser test) split a decision's time into
    the verdict, the next claim plus render, and the network/DOM remainder."""
    finished = time.perf_counter()
    response["Server-Timing"] = (
        f"decide;dur={(decided - started) * 1000:.1f}, next;dur={(finished - decided) * 1000:.1f}, "
        f"total;dur={(finished - started) * 1000:.1f}"
    )


def _invalid(request: HtmxHttpRequest, item_id: int, error: str, note: str, reason_label: str) -> HttpResponse:
    """The same item again with the error beside the form and what was typed kept."""
    item = services.current_claim(reviewer=request.user)
    if item is None or item.pk != item_id:
        return _after_post(request, CardState(item=item, notices=[Notice(error, "error")]))
    state = CardState(item=item, error=error, note=note, reason_label=reason_label)
    # htmx swaps only 2xx answers by default; a plain form gets the honest 400.
    return _render_card(request, state, status=200 if request.htmx else 400)


@reviewer_post
def skip(request: HtmxHttpRequest, item_id: int) -> HttpResponse:
    """Give the item back to the queue for someone else and hand out the next
    one (never the item just skipped)."""
    notices: list[Notice] = []
    try:
        services.release(item_id=item_id, reviewer=request.user)
    except services.QueueError as exc:
        notices.append(Notice(f"{exc.message}.", "error"))
        return _after_post(request, CardState(item=None, notices=notices))
    skipped = list(_skipped(request) | {item_id})[-50:]
    request.session[SKIPPED_KEY] = skipped
    notices.append(Notice(f"Skipped item #{item_id}; it went back to the queue."))
    # Straight on to the next item: a skip is "not this one", not "stop".
    state = _claim_next(request, notices, just_skipped=item_id)
    if state.item is None:
        notices.append(Notice("No other item waits right now."))
    return _after_post(request, state)


@require_POST
@reviewer_required
def renew(request: HtmxHttpRequest, item_id: int) -> HttpResponse:
    """Extend the lease while the reviewer is active; the page calls this."""
    try:
        item = services.renew(item_id=item_id, reviewer=request.user)
    except services.QueueError as exc:
        response = _render_card(
            request,
            CardState(
                item=None, notices=[Notice(f"{exc.message}. Nothing was lost: press n for the next item.", "error")]
            ),
        )
        if request.htmx:
            # The lease element asked, but the whole card must change.
            return retarget(reswap(response, "outerHTML"), "#card")
        return response
    if not request.htmx:
        return redirect("review:queue")
    return render(request, LEASE, {"item": item, "lease_left": item.lease_seconds_left()})


@reviewer_post
def undo(request: HtmxHttpRequest) -> HttpResponse:
    """Take back the last verdict within the undo window; the item returns
    under a fresh lease and the item shown meanwhile goes back to the queue."""
    try:
        item = services.undo(reviewer=request.user)
    except services.NothingToUndo:
        current = services.current_claim(reviewer=request.user)
        seconds = settings.REVIEWQUEUE_UNDO_SECONDS
        return _after_post(
            request,
            CardState(
                item=current,
                notices=[Notice(f"Nothing to undo: no verdict of yours in the last {seconds} s.", "error")],
            ),
        )
    showing = _item_id(request.POST.get("current"))
    if showing is not None and showing != item.pk:
        try:
            services.release(item_id=showing, reviewer=request.user)
        except services.QueueError:
            pass  # already gone back or decided: nothing held to give back
    notices = [Notice(f"Verdict on item #{item.pk} taken back; decide it again.")]
    return _after_post(request, CardState(item=item, notices=notices))
