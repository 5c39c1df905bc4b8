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

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import reswap, retarget

from .. import services
from ..access import is_operator, is_reviewer, reviewer_required
from ..forms import GoldForm
from ..middleware import when_database_lost
from ..models import LoopRun, Queue, ReasonLabel, ReviewItem, Verdict
from ..notices import (
    EMPTY_EDIT,
    Notice,
    _already_decided,
    _as_seen,
    _lease_ran_out,
    _panel_error,
    _sent_back_words,
    verdict_recorded,
    verdict_refused,
)
from ..selectors.review import _context_panel
from ..selectors.review_item import (
    _as_reviewer_sees_it,
    _may_see,
    as_lineage,
    history,
    output_diff,
)
from .http import HtmxHttpRequest

CARD = "review/queue.html#card"
# What the decide form may ask for; a send-back has its own form and URL.
DECIDE_CHOICES = (Verdict.Decision.APPROVE, Verdict.Decision.REJECT, Verdict.Decision.EDIT)
LEASE = "review/queue.html#lease"
SKIPPED_KEY = "review_skipped"

V = TypeVar("V", bound=Callable[..., HttpResponse])


@dataclass
class CardState:
    """What the card shows: the item held (if any), what just happened, and
    the form's error and typed-in values when the same item comes back."""

    item: ReviewItem | None
    notices: list[Notice] = field(default_factory=list)
    error: str = ""
    note: str = ""
    reason_label: str = ""
    # Which panel (edit, send back) comes back open, with what was typed and what was wrong.
    panel: str = ""
    edited_output: str | None = None
    send_back_note: str = ""
    panel_error: str = ""
    # Whether the reviewer is paused (claims serve them nothing); None: not yet asked.
    paused: bool | None = None
    # A claim just found nothing for this reviewer: what still waits is for someone else.
    claimed_nothing: bool = False


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
        "focus_query": _focus_query(_focus(request)),
    }
    context.update(_none_for_you(request, state, item is None and not paused, cast(int, context["waiting"])))
    template = CARD if request.htmx else "review/queue.html"
    return render(request, template, context, status=status)


def _none_for_you(request: HtmxHttpRequest, state: CardState, empty: bool, waiting: int) -> dict[str, object]:
    """Items wait, but a claim just found none this reviewer may take (each
    waits for another reviewer's answer or an operator). The card says so
    and polls with the count it saw (``?seen=``), and keeps saying so while
    no more than that waits: only a new arrival may be theirs."""
    seen = _item_id(request.GET.get("seen"))
    none = empty and waiting > 0 and (state.claimed_nothing or (seen is not None and waiting <= seen))
    focus = _focus(request)
    query = {**({"queue": focus.slug} if focus is not None else {}), "seen": waiting}
    return {"none_for_you": none, "poll_query": "?" + urlencode(query) if none else _focus_query(focus)}


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
    return CardState(item=item, notices=notices, paused=paused, claimed_nothing=item is None)


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
    # Found nothing: the card itself says whether anything waits, and for whom.
    return _after_post(request, _claim_next(request, []))


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
        state.notices.insert(0, _lease_ran_out(item_id, state.item))
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
        return verdict_refused(request.user, item_id, caught, approve=approve, reason_label=reason_label)
    return verdict_recorded(verdict, approve=approve, reason_label=reason_label, edited_output=edited_output)


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
    # The 50 most recent skips, oldest first: a set would keep the 50 highest ids.
    earlier = [pk for pk in request.session.get(SKIPPED_KEY, []) if pk != item_id]
    request.session[SKIPPED_KEY] = [*earlier, item_id][-50:]
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


def _invalid_panel(request: HtmxHttpRequest, item_id: int, state: CardState, exc: services.QueueError) -> HttpResponse:
    """The same item again with its editor or note field open, the error in
    it and what was typed kept; a notice instead if the item is gone."""
    item = services.current_claim(reviewer=request.user)
    if item is None or item.pk != item_id:
        return _after_post(request, CardState(item=item, notices=[Notice(f"{exc.message}.", "error")]))
    state.item, state.panel_error = item, _panel_error(exc)
    return _render_card(request, state, status=200 if request.htmx else 400)


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
        state.notices.insert(0, _lease_ran_out(item_id, state.item))
        if state.item is not None and state.item.pk == item_id:
            state.panel, state.send_back_note = "send_back", note
    return _after_post(request, state)


# --- the item's page: task, output, verdict, the edit as a diff, history ---------------------


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
    # A copy's header reads as its source's (a copy of a version 2 is a version 2),
    # and no revision follows a copy, whatever followed its source.
    lineage = item if operator else as_lineage(item)
    context = {
        "item": item,
        "status_text": status_text,
        "verdict": shown,
        "diff": output_diff(item.final_output, shown.edited_output) if edited and shown else None,
        "version": lineage.version,
        "follows": lineage.previous_version_id,
        "history": history(lineage),
        "history_open": True,
        "next_versions": [] if lineage is not item else list(item.next_versions.values_list("pk", "version")),
        "runs": list(LoopRun.objects.filter(item=lineage).values_list("run_id", "outcome")),
        "producer": lineage.producer,
        "is_reviewer": is_reviewer(user),
        # Operators only: nothing below reaches a reviewer's page.
        "gold": gold,
        "gold_copy_of": item.gold if operator and item.gold_id else None,
        "gold_form": (gold_form or GoldForm(initial=GoldForm.initial_for(item))) if may_mark else None,
    }
    return render(request, "review/item.html", context, status=status)


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
    # Every item, gold copies included (a 404 for a copy would tell it apart).
    item = ReviewItem.all_objects.select_related("verdict__reviewer", "queue").filter(pk=item_id).first()
    verdict = getattr(item, "verdict", None) if item is not None else None
    if item is None or not _may_see(user, item, verdict):
        raise Http404("no such item")
    return render_item(request, item)
