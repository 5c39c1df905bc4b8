"""The reviewer's page: claim an item, read it, approve or reject, next.

Every view parses, calls a service, renders. With ``HX-Request`` a view
answers with the card fragment (plus the context panel out of band); without
it, a POST redirects back to the page, so the whole flow works as plain forms.
The reviewer is the scarcest resource (ARCHITECTURE.md rule 9): no awkward case ends
on an error page, each one says what happened and shows what to do next.

A reviewer serves the queues they review (``Queue.objects.reviewable_by``);
``?queue=<slug>`` focuses the page, and every claim made from it, on one of
them. The parameter rides on every form's URL and redirect, so a focus
survives next, skip, decide, send back and undo. A queue the reviewer does
not review answers 404, whether it exists or not.
"""

from __future__ import annotations

import difflib
import functools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar, cast

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import reswap, retarget

from .. import services
from ..access import is_operator, is_reviewer, reviewer_required
from ..forms import GoldForm
from ..middleware import when_database_lost
from ..models import Judgement, LoopRun, Queue, ReasonLabel, ReviewItem, Verdict
from ..selectors import review as review_reads
from ..templatetags.time_tags import ago
from .http import HtmxHttpRequest

CARD = "review/queue.html#card"
# What the decide form may ask for; a send-back has its own form and URL.
DECIDE_CHOICES = (Verdict.Decision.APPROVE, Verdict.Decision.REJECT, Verdict.Decision.EDIT)
LEASE = "review/queue.html#lease"
RECENT_VERDICTS = 8
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
    # Edit and approve, send back: which panel comes back open, with what the
    # reviewer typed in it and what was wrong with it.
    panel: str = ""
    edited_output: str | None = None
    send_back_note: str = ""
    panel_error: str = ""
    # Whether the reviewer is paused (claims serve them nothing); None: not
    # yet known, asked when the card has no item.
    paused: bool | None = None


def _focus(request: HtmxHttpRequest) -> Queue | None:
    """The queue named by ``?queue=`` (forms post to URLs that carry it), or
    None for all the reviewer's queues. 404 for a queue the user does not
    review, in the same words whether it exists or not."""
    slug = request.GET.get("queue", "")
    if not slug:
        return None
    found: Queue | None = getattr(request, "_review_focus", None)
    if found is None or found.slug != slug:  # read once a request
        found = Queue.objects.reviewable_by(request.user).filter(slug=slug).first()
    if found is None:
        raise Http404("no such queue among yours")
    request._review_focus = found  # type: ignore[attr-defined]
    return found


def _focus_query(focus: Queue | None) -> str:
    """What every URL of the page carries to keep the focus: ``?queue=slug`` or nothing."""
    return "?" + urlencode({"queue": focus.slug}) if focus is not None else ""


def _queue_url(focus: Queue | None) -> str:
    return reverse("review:queue") + _focus_query(focus)


def _context_panel(user: User, item: ReviewItem | None, focus: Queue | None) -> dict[str, object]:
    """What a reviewer needs beside the item: their queues (each one's
    waiting count and mode, for the switcher), the waiting count and mode of
    the queue in view, the instructions of the item's queue, their own
    recent verdicts and pace.

    Two statements (``selectors.review``): the queues, and the recent answers
    with the last hour's count. A waiting count is ``Queue.waiting``: the
    depth and the gold copies kept on a queue's row (exact under the queue's
    lock, recounted by the depth-sampler beat task), so a copy waits, and
    leaves the count when answered, as a real item does."""
    now = timezone.now()
    recent, last_hour = review_reads.recent_answers(user, now - timedelta(hours=1))
    spans = [
        (v.created_at - v.claimed_at).total_seconds()
        for v in recent
        if v.claimed_at is not None and v.created_at >= v.claimed_at
    ]
    median = statistics.median(spans) if spans else None
    queues = review_reads.reviewable_queues(user)
    if not queues and Queue.default().open_to_all:  # the default queue is made on first use
        queues = review_reads.reviewable_queues(user)
    # An archived queue shows while items still wait in it: they still need a verdict.
    shown = [q for q in queues if not q.archived or q.waiting or (focus is not None and q.pk == focus.pk)]
    by_pk = {q.pk: q for q in queues}
    if item is not None and item.queue_id not in by_pk:  # held from a queue since left
        by_pk[item.queue_id] = Queue.objects.only(*review_reads.QUEUE_FIELDS).get(pk=item.queue_id)
    in_view = by_pk.get(item.queue_id) if item is not None else None
    in_view = in_view or (by_pk.get(focus.pk) if focus is not None else None)
    if in_view is None and len(queues) == 1:
        in_view = queues[0]
    scope = [focus] if focus is not None else queues
    return {
        "queues": shown,
        "focus": focus,
        "focus_query": _focus_query(focus),
        "item_queue": by_pk.get(item.queue_id) if item is not None else None,
        "queue_in_view": in_view,
        "all_waiting": sum(q.waiting for q in queues),
        "waiting": sum(q.waiting for q in scope),
        "empty_queues": [q for q in scope if not q.waiting],
        "mode": in_view.mode if in_view is not None else "",
        "instructions": in_view.instructions if in_view is not None else None,
        "recent": recent[:RECENT_VERDICTS],
        "last_hour": last_hour,
        "median_seconds": median,
        # Sub-second spans come from scripts, not people; no pace claimed from them.
        "pace_per_hour": round(3600 / median) if median and median >= 1 else None,
        "undo_seconds": settings.REVIEWQUEUE_UNDO_SECONDS,
    }


def _render_card(request: HtmxHttpRequest, state: CardState, *, status: int = 200) -> HttpResponse:
    """The card: the fragment (context panel and switcher out of band) for htmx, else the page."""
    item = state.item
    paused = state.paused if state.paused is not None else item is None and services.is_paused(request.user)
    context: dict[str, object] = {
        "item": item,
        "paused": paused,
        "notices": state.notices,
        "error": state.error,
        "note": state.note,
        "reason_label": state.reason_label,
        "reason_labels": list(enumerate(ReasonLabel.choices, start=1)),
        "panel": state.panel,
        "edited_output": item.final_output if item is not None and state.edited_output is None else state.edited_output,
        "send_back_note": state.send_back_note,
        "panel_error": state.panel_error,
        "history": history(as_lineage(item)) if item is not None else [],
        "lease_left": item.lease_seconds_left() if item is not None else 0,
        "oob": bool(request.htmx),
        **_context_panel(request.user, item, _focus(request)),
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
    return redirect(_queue_url(_focus(request)))


def _skipped(request: HtmxHttpRequest) -> set[int]:
    """Items this reviewer skipped in this session, not offered again first."""
    return set(request.session.get(SKIPPED_KEY, []))


def _claim_next(request: HtmxHttpRequest, notices: list[Notice], *, just_skipped: int | None = None) -> CardState:
    """The next item under a lease, skipped ones last, with ``notices`` kept."""
    skipped = _skipped(request)
    focus = _focus(request)
    item = services.claim(reviewer=request.user, exclude=skipped, queue=focus)
    if item is None and skipped:
        # Only skipped items are left: offer them again rather than an empty
        # queue, but never hand back at once the item the reviewer just skipped.
        never = () if just_skipped is None else (just_skipped,)
        item = services.claim(reviewer=request.user, exclude=never, queue=focus)
        if item is not None:
            notices.append(Notice(f"Only items you skipped are left; here is #{item.pk} again."))
    # A paused reviewer's card says so itself, instead of offering work.
    paused = item is None and services.is_paused(request.user)
    return CardState(item=item, notices=notices, paused=paused)


def _as_seen(user: User, item_id: int, exc: services.QueueError) -> services.QueueError:
    """A refused action's error as this reviewer may hear it. About an item
    outside the queues they review, they hear what they would hear of an
    item that does not exist: nothing tells them it exists, who holds it or
    how it was decided. Read only when an action was refused."""
    if ReviewItem.all_objects.filter(pk=item_id, queue__in=Queue.objects.reviewable_by(user)).exists():
        return exc
    return services.QueueError(f"item {item_id} does not exist")


def _verdict_words(verdict: Verdict) -> str:
    """'approved', 'approved with edits', 'sent back' or 'rejected (reason)'."""
    if verdict.decision == Verdict.Decision.EDIT:
        return "approved with edits"
    if verdict.decision == Verdict.Decision.SEND_BACK:
        return "sent back"
    if verdict.approved:
        return "approved"
    return f"rejected ({verdict.get_reason_label_display()})"


def _already_decided(item_id: int, reviewer: User, approve: bool, reason_label: str, tried: str = "") -> Notice:
    """What was recorded on the item, by whom and when, and what became of
    this (second) verdict: two tabs, a double submit or another reviewer."""
    tried = tried or ("approval" if approve else "rejection")
    verdict = Verdict.objects.filter(item_id=item_id).select_related("reviewer").first()
    mine = Judgement.objects.filter(item_id=item_id, reviewer=reviewer).first()
    if mine is not None and (verdict is None or verdict.reviewer_id != reviewer.pk):
        # Their own answer in a double review, or on a gold copy: said as their
        # verdict, in the same words, and what the others said stays unseen.
        verdict = Verdict(
            item_id=item_id,
            queue_id=None,  # shown, never saved: no queue to read
            reviewer=reviewer,
            decision=mine.decision,
            reason_label=mine.reason_label,
            created_at=mine.created_at,
        )
    if verdict is None:
        verdict = _copy_answer(item_id, reviewer)
    if verdict is None:  # a filter rule decided it, or it has only answers (a double review)
        item = ReviewItem.all_objects.filter(pk=item_id).first()
        if item is None:
            return Notice(f"Item #{item_id} was already decided (removed); your {tried} was not recorded.", "error")
        # Said as for any item, so an answered gold copy reads like an ordinary decided one.
        status, _ = _as_reviewer_sees_it(reviewer, item, None)
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
    if tried == "send-back":
        same = verdict.decision == Verdict.Decision.SEND_BACK
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


def _copy_answer(item_id: int, reviewer: User) -> Verdict | None:
    """Another reviewer's answer on a gold copy, said as a verdict (never
    saved), so the notice names who decided it as it does for a real item."""
    answer = (
        Judgement.objects.filter(item_id=item_id, kind=Judgement.Kind.GOLD)
        .exclude(reviewer=reviewer)
        .select_related("reviewer")
        .first()
    )
    if answer is None:
        return None
    return Verdict(
        item_id=item_id,
        queue_id=None,
        reviewer=answer.reviewer,
        decision=answer.decision,
        reason_label=answer.reason_label,
        created_at=answer.created_at,
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
    if item is None:
        # A gold copy whose lease ran out is gone; said as for a real item that went back.
        fate = " It went back to the queue."
    elif item.status == ReviewItem.Status.SHED:
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
            return redirect(_queue_url(_focus(request)))
        return view(request, *args, **kwargs)

    return cast(V, require_http_methods(["GET", "POST"])(reviewer_required(action)))


@require_GET
@reviewer_required
def queue(request: HtmxHttpRequest) -> HttpResponse:
    """The page: the item this reviewer holds, else a Start button, under the
    queue switcher. A GET never claims: claiming changes data and is a POST.

    Also the empty queue's poll target (``review:waiting``): the card, which
    keeps polling while the queue is empty and shows the Next button once
    items wait."""
    item = services.current_claim(reviewer=request.user)
    return _render_card(request, CardState(item=item))


@reviewer_post
def next_item(request: HtmxHttpRequest) -> HttpResponse:
    """Claim the next item under a lease (or get back the one already held)."""
    state = _claim_next(request, [])
    if state.item is None and not state.paused:
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
    if decision not in DECIDE_CHOICES:
        return _invalid(request, item_id, "Choose Approve or Reject.", note, reason_label)
    approve = decision != Verdict.Decision.REJECT
    edited = request.POST.get("edited_output", "") if decision == Verdict.Decision.EDIT else ""
    if decision == Verdict.Decision.EDIT and not edited.strip():
        # An emptied editor is not a correction: approving would record the original.
        empty = services.InvalidInput("edited_output", EMPTY_EDIT)
        return _invalid_panel(request, item_id, CardState(item=None, panel="edit", edited_output=edited), empty)
    try:
        said = _record_verdict(
            request, item_id, approve=approve, reason_label=reason_label, note=note, edited_output=edited
        )
    except services.InvalidInput as exc:
        if exc.field == "edited_output":
            return _invalid_panel(request, item_id, CardState(item=None, panel="edit", edited_output=edited), exc)
        return _invalid(
            request,
            item_id,
            f"A rejection needs a reason: pick one of the {len(ReasonLabel.choices)} labels.",
            note,
            "",
        )
    decided = time.perf_counter()
    state = _claim_next(request, [] if said is None else [said])
    if said is None:  # the lease ran out: what to say depends on the item handed out now
        state.notices.insert(0, _lease_ran_out(item_id, state))
        if state.item is not None and state.item.pk == item_id:
            # The same item again: keep what the reviewer typed and picked.
            state.note, state.reason_label = note, "" if approve else reason_label
            if edited:
                state.panel, state.edited_output = "edit", edited
    response = _after_post(request, state)
    _add_server_timing(response, started, decided)
    return response


def _record_verdict(
    request: HtmxHttpRequest, item_id: int, *, approve: bool, reason_label: str, note: str, edited_output: str = ""
) -> Notice | None:
    """Record the verdict through services.decide and say what became of it;
    None when the lease ran out first. A rejection without a reason, or an
    edit over the size limit, raises services.InvalidInput, for decide to
    show beside the form."""
    try:
        verdict = services.decide(
            item_id=item_id,
            reviewer=request.user,
            approve=approve,
            reason_label="" if approve else reason_label,
            note=note,
            edited_output=edited_output,
        )
    except services.InvalidInput:
        raise
    except services.QueueError as caught:
        exc = _as_seen(request.user, item_id, caught)
        if isinstance(exc, services.AlreadyDecided):
            return _already_decided(item_id, request.user, approve, reason_label)
        if isinstance(exc, services.LeaseExpired):
            return None
        if isinstance(exc, services.NotLeaseHolder):
            return Notice(f"Item #{item_id} is held by another reviewer; your verdict was not recorded.", "error")
        return Notice(f"{exc.message}. Your verdict was not recorded.", "error")
    verb = "Approved" if approve else f"Rejected ({ReasonLabel(reason_label).label})"
    if verdict.decision == Verdict.Decision.EDIT:
        verb = "Approved with your edits:"
    elif edited_output:
        verb = "Approved (the output was not changed):"
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
        notices.append(Notice(f"{_as_seen(request.user, item_id, exc).message}.", "error"))
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
        said = _as_seen(request.user, item_id, exc).message
        response = _render_card(
            request,
            CardState(item=None, notices=[Notice(f"{said}. Nothing was lost: press n for the next item.", "error")]),
        )
        if request.htmx:
            # The lease element asked, but the whole card must change.
            return retarget(reswap(response, "outerHTML"), "#card")
        return response
    if not request.htmx:
        return redirect(_queue_url(_focus(request)))
    return render(request, LEASE, {"item": item, "lease_left": item.lease_seconds_left()})


@reviewer_post
def undo(request: HtmxHttpRequest) -> HttpResponse:
    """Take back the last verdict within the undo window; the item returns
    under a fresh lease and the item shown meanwhile goes back to the queue."""
    try:
        item = services.undo(reviewer=request.user)
    except services.UndoRefused as exc:
        current = services.current_claim(reviewer=request.user)
        return _after_post(request, CardState(item=current, notices=[Notice(f"Not undone: {exc.message}.", "error")]))
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


# --- edit and approve, send back -----------------------------------------------------------


EMPTY_EDIT = (
    "The corrected output is empty: type the output to approve, or close the editor (Esc) and press a "
    "to approve the original. Nothing was recorded."
)


def _invalid_panel(request: HtmxHttpRequest, item_id: int, state: CardState, exc: services.QueueError) -> HttpResponse:
    """The same item again with its editor or note field open, the error in
    it and what was typed kept; a notice instead if the item is gone."""
    item = services.current_claim(reviewer=request.user)
    if item is None or item.pk != item_id:
        return _after_post(request, CardState(item=item, notices=[Notice(f"{exc.message}.", "error")]))
    state.item, state.panel_error = item, _panel_error(exc)
    return _render_card(request, state, status=200 if request.htmx else 400)


def _panel_error(exc: services.QueueError) -> str:
    if isinstance(exc, services.InvalidInput) and exc.field == "note":
        return "Sending back needs a note: say what the next try should change."
    if isinstance(exc, services.InvalidInput) and exc.message.endswith(EMPTY_EDIT):
        return EMPTY_EDIT
    if isinstance(exc, services.InvalidInput) and exc.field == "edited_output":
        return f"The corrected output is too long ({exc.message.split(': ', 1)[-1]}); nothing was recorded."
    return exc.message


@when_database_lost(VERDICT_NOT_SAVED)
@reviewer_post
def send_back(request: HtmxHttpRequest, item_id: int) -> HttpResponse:
    """Send the held item back with a note, then hand out the next one. For
    a run our workers ran, a new run resumes from this output with the note;
    for a pushed output, its producer hears the note."""
    note = request.POST.get("note", "")
    said: Notice | None
    try:
        verdict = services.send_back(item_id=item_id, reviewer=request.user, note=note)
    except services.InvalidInput as exc:
        return _invalid_panel(request, item_id, CardState(item=None, panel="send_back", send_back_note=note), exc)
    except services.QueueError as caught:
        exc = _as_seen(request.user, item_id, caught)
        if isinstance(exc, services.AlreadyDecided):
            said = _already_decided(item_id, request.user, False, "", tried="send-back")
        elif isinstance(exc, services.LeaseExpired):
            said = None
        else:
            said = Notice(f"{exc.message}. Your send-back was not recorded.", "error")
    else:
        said = Notice(_sent_back_words(verdict))
    state = _claim_next(request, [] if said is None else [said])
    if said is None:
        state.notices.insert(0, _lease_ran_out(item_id, state))
        if state.item is not None and state.item.pk == item_id:
            state.panel, state.send_back_note = "send_back", note
    return _after_post(request, state)


def _sent_back_words(verdict: Verdict) -> str:
    """What became of a send-back, and how long undo can take it back."""
    seconds = settings.REVIEWQUEUE_UNDO_SECONDS
    if verdict.pk is None:  # an answer that settles nothing yet: nobody hears of it now
        return f"Sent back item #{verdict.item_id} with your note. Undo (u) within {seconds} s takes it back."
    if LoopRun.objects.filter(resumed_from__item_id=verdict.item_id).exists():
        return (
            f"Sent back item #{verdict.item_id}: its loop runs again from this output with your note. "
            f"Undo (u) within {seconds} s takes it back, until the new run starts."
        )
    return f"Sent back item #{verdict.item_id}: its producer gets your note. Undo (u) within {seconds} s takes it back."


# How many earlier versions an item's history shows; a longer chain says so.
HISTORY_DEPTH = 10


@dataclass
class Version:
    """One earlier version of an item: its output and the verdict that sent it back."""

    item: ReviewItem
    verdict: Verdict | None
    # What changed from this version to the next one (escaped in the template).
    diff: OutputDiff | None = None
    next_version: int = 0


def history(item: ReviewItem) -> list[Version]:
    """The item's earlier versions, newest first: each one's output, the
    reviewer's note that sent it back, and the diff to the version after it.
    No query for an item that is the first of its line, which nearly every
    item is."""
    versions: list[Version] = []
    previous_id = item.previous_version_id
    newer = item
    while previous_id is not None and len(versions) < HISTORY_DEPTH:
        earlier = ReviewItem.objects.select_related("verdict__reviewer").filter(pk=previous_id).first()
        if earlier is None:
            break
        diff = output_diff(
            earlier.final_output, newer.final_output, f"version {earlier.version}", f"version {newer.version}"
        )
        versions.append(
            Version(item=earlier, verdict=getattr(earlier, "verdict", None), diff=diff, next_version=newer.version)
        )
        previous_id, newer = earlier.previous_version_id, earlier
    return versions


# --- the item's page: task, output, verdict, the edit as a diff, history ---------------------

# A diff reads at most this many lines of each side, and shows at most this
# many characters: difflib is quadratic at worst, and a page of a megabyte
# helps nobody. What is left out is said on the page.
DIFF_MAX_LINES = 2000
DIFF_MAX_CHARS = 100_000


@dataclass
class OutputDiff:
    """An edit against the original, as unified-diff lines (kind, text); the
    kinds are add, del, hunk, head and same. ``cut`` says what was left out."""

    lines: list[tuple[str, str]]
    cut: str = ""


def output_diff(original: str, edited: str, old_name: str = "original", new_name: str = "edited") -> OutputDiff:
    """The edit (or a revision) as a unified diff, line endings made the same
    first; capped (DIFF_MAX_LINES, DIFF_MAX_CHARS) so a large output stays fast."""
    before = original.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    after = edited.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    cut = ""
    if max(len(before), len(after)) > DIFF_MAX_LINES:
        cut = f"Only the first {DIFF_MAX_LINES} lines of each version are compared."
        before, after = before[:DIFF_MAX_LINES], after[:DIFF_MAX_LINES]
    lines: list[tuple[str, str]] = []
    shown = 0
    for line in difflib.unified_diff(before, after, old_name, new_name, lineterm="", n=3):
        shown += len(line)
        if shown > DIFF_MAX_CHARS:
            cut = f"The diff is cut after {DIFF_MAX_CHARS:,} characters. " + cut
            break
        lines.append((_diff_kind(line), line))
    return OutputDiff(lines=lines, cut=cut.strip())


def _diff_kind(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "head"
    if line.startswith("@@"):
        return "hunk"
    return {"+": "add", "-": "del"}.get(line[:1], "same")


def _may_see(user: User, item: ReviewItem, verdict: Verdict | None) -> bool:
    """Operators see every item of every queue; a reviewer, the items of the
    queues they review that they decided, answered (a double review or a
    gold copy) or hold."""
    if is_operator(user):
        return True
    if not Queue.objects.reviewable_by(user).filter(pk=item.queue_id).exists():
        return False
    if verdict is not None and verdict.reviewer_id == user.pk:
        return True
    if item.status == ReviewItem.Status.CLAIMED and item.lease_holder_id == user.pk:
        return True
    return Judgement.objects.filter(item=item, reviewer=user).exists()


# The status an item shows a reviewer after their own answer, when the item
# has no settled verdict to show (a gold copy, or a double review still open).
STATUS_AFTER = {
    Verdict.Decision.APPROVE: ReviewItem.Status.APPROVED,
    Verdict.Decision.EDIT: ReviewItem.Status.APPROVED,
    Verdict.Decision.REJECT: ReviewItem.Status.REJECTED,
    Verdict.Decision.SEND_BACK: ReviewItem.Status.SENT_BACK,
}


def _as_reviewer_sees_it(
    user: User, item: ReviewItem, verdict: Verdict | None
) -> tuple[str, Verdict | Judgement | None]:
    """The status and verdict a reviewer is shown. A gold copy must look like
    any other item (its answer measures the reviewer, who must not tell it
    apart), so a reviewer who answered one sees their own answer as the
    verdict and the status it would have given an ordinary item; the same
    holds for their answer on a double review nobody has settled yet."""
    status = item.get_status_display()
    if is_operator(user) or (verdict is not None and item.gold_id is None):
        return status, verdict
    answers = list(Judgement.objects.filter(item=item).select_related("reviewer").order_by("pk"))
    own = next((answer for answer in answers if answer.reviewer_id == user.pk), None)
    if own is None and item.gold_id is not None and answers:
        # Someone else's answered copy: the status its answer would give, never "gold".
        return ReviewItem.Status(STATUS_AFTER[Verdict.Decision(answers[0].decision)]).label, None
    if own is None:
        # Held, not answered yet: a gold copy is "claimed" like any item.
        return status, None
    return ReviewItem.Status(STATUS_AFTER[Verdict.Decision(own.decision)]).label, own


def render_item(
    request: HtmxHttpRequest, item: ReviewItem, *, gold_form: GoldForm | None = None, status: int = 200
) -> HttpResponse:
    """An item's page for the signed-in user (item_page, and the Mark as gold
    form's errors). Operators also get the item's gold status and form."""
    user = request.user
    verdict = getattr(item, "verdict", None)
    status_text, shown = _as_reviewer_sees_it(user, item, verdict)
    edited = shown is not None and shown.decision == Verdict.Decision.EDIT
    operator = is_operator(user)
    gold = getattr(item, "gold_spec", None) if operator else None
    may_mark = operator and item.gold_id is None and item.status in GOLD_SOURCES
    lineage = item if operator else as_lineage(item)
    context = {
        "item": item,
        "status_text": status_text,
        "verdict": shown,
        "diff": output_diff(item.final_output, shown.edited_output) if edited and shown else None,
        "history": history(lineage),
        "history_open": True,
        "next_versions": list(lineage.next_versions.values_list("pk", "version")),
        "runs": list(LoopRun.objects.filter(item=lineage).values_list("run_id", "outcome")),
        "producer": lineage.producer,
        "is_reviewer": is_reviewer(user),
        # Operators only: nothing below reaches a reviewer's page.
        "gold": gold,
        "gold_copy_of": item.gold if operator and item.gold_id else None,
        "gold_form": (gold_form or GoldForm(initial=GoldForm.initial_for(item))) if may_mark else None,
    }
    return render(request, "review/item.html", context, status=status)


def as_lineage(item: ReviewItem) -> ReviewItem:
    """Whose run and versions a reviewer is shown beside ``item``: a gold
    copy's source item's, since a copy has none of its own and must show
    what a real item of its kind shows (a loop-fed queue's "Run" row, its
    earlier versions); any other item's own."""
    if item.gold_id is None:
        return item
    source = ReviewItem.objects.filter(gold_spec__pk=item.gold_id).first()
    return source or item


# Items an operator may mark as gold: decided by a person.
GOLD_SOURCES = (ReviewItem.Status.APPROVED, ReviewItem.Status.REJECTED, ReviewItem.Status.SENT_BACK)


@require_GET
@login_required
def item_page(request: HtmxHttpRequest, item_id: int) -> HttpResponse:
    """One item as it was decided: task, output, verdict, an edit as a diff
    against the original, and its earlier versions. A reviewer who may not
    see it gets 404, as if it did not exist; a user with no role, 403."""
    user = request.user
    if not (is_operator(user) or is_reviewer(user)):
        raise PermissionDenied
    # Every item, gold copies included: the reviewer who holds or answered a
    # copy gets its page as for any other item (a 404 would tell it apart).
    item = ReviewItem.all_objects.select_related("verdict__reviewer", "queue").filter(pk=item_id).first()
    verdict = getattr(item, "verdict", None) if item is not None else None
    if item is None or not _may_see(user, item, verdict):
        raise Http404("no such item")
    return render_item(request, item)
