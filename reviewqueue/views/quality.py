"""The operators' review-quality page: how far reviewers agree, how each one
does on gold items, the double-reviewed items that wait for an operator or a
third reviewer (with a form to settle them), and the gold items being served.
Also the "Mark as gold" form posted from an item's page. All need the
operator role."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib import messages
from django.core.cache import cache
from django.db.models import Count, Prefetch, Q, QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from .. import agreement, services
from ..access import operator_required
from ..forms import GoldForm, SettleForm
from ..models import GoldItem, Judgement, Queue, ReviewerStanding, ReviewItem
from .http import HtmxHttpRequest
from .review import render_item

log = logging.getLogger(__name__)

# Krippendorff's guidance for alpha: data are relied on at 0.8 and above, and
# used for tentative conclusions only from 0.667.
ALPHA_RELIABLE = 0.8
ALPHA_TENTATIVE = 0.667
# Landis and Koch's words for a kappa, by lower bound.
KAPPA_WORDS = ((0.8, "almost perfect"), (0.6, "substantial"), (0.4, "moderate"), (0.2, "fair"), (0.0, "slight"))
DISAGREEMENTS_SHOWN = 50


def alpha_reading(alpha: dict[str, Any] | None, min_items: int = 10) -> tuple[str, str]:
    """An alpha in words, with a css class for its tone. Below ``min_items``
    double-reviewed items no reading is given: the interval is too wide for one."""
    items = (alpha or {}).get("items", 0)
    if not alpha or alpha.get("value") is None or items < min_items:
        plural = "" if items == 1 else "s"
        text = f"Too little data: {items} double-reviewed item{plural} so far; a reading needs at least {min_items}."
        return text, ""
    value = alpha["value"]
    if value >= ALPHA_RELIABLE:
        return "Reliable: at or above 0.8, the verdicts can be relied on.", "ok"
    if value >= ALPHA_TENTATIVE:
        return "Tentative: between 0.667 and 0.8, good enough for tentative conclusions only.", "warn"
    return "Unreliable: below 0.667, reviewers disagree too often to rely on single verdicts.", "bad"


def kappa_words(kappa: float | None) -> str:
    if kappa is None:
        return "too few shared items"
    if kappa < 0:
        return "worse than chance"
    return next(words for bound, words in KAPPA_WORDS if kappa >= bound)


def interval_bar(value: float | None, ci95: list[float] | None, bar: float | None = None) -> dict[str, Any] | None:
    """Geometry for a small SVG bar on a 0-100 scale: the interval, the
    estimate, and the policy's bar. Attributes, not inline styles (the CSP)."""
    if value is None or not ci95:
        return None
    low, high = (round(100 * ci95[0], 1), round(100 * ci95[1], 1))
    return {
        "low": low,
        "width": max(round(high - low, 1), 0.5),
        "value": round(100 * value, 1),
        "bar": None if bar is None else round(100 * bar, 1),
    }


def disagreements() -> QuerySet[ReviewItem]:
    """Double-reviewed items that wait for a third reviewer or an operator,
    the operator's first, each with its reviewers' answers in order."""
    answers = Judgement.objects.filter(kind=Judgement.Kind.REVIEW).select_related("reviewer").order_by("round", "pk")
    return (
        ReviewItem.objects.filter(review_round__gte=3, status__in=ReviewItem.WAITING)
        .prefetch_related(Prefetch("judgements", queryset=answers))
        .order_by("-review_round", "created_at", "pk")
    )


def active_gold() -> QuerySet[GoldItem]:
    """Gold items still served, with how often their copies were answered and answered right."""
    return (
        GoldItem.objects.filter(retired_at=None)
        .select_related("item")
        .annotate(
            answers=Count("copies__judgements"),
            right=Count("copies__judgements", filter=Q(copies__judgements__correct=True)),
        )
        .order_by("-created_at", "-pk")
    )


def reviewer_rows(report: dict[str, Any], min_accuracy: float) -> list[dict[str, Any]]:
    rows = []
    for row in report.get("reviewers", []):
        rows.append({**row, "bar": interval_bar(row.get("accuracy"), row.get("ci95"), min_accuracy)})
    return rows


def dashboard_summary() -> dict[str, Any]:
    """What the dashboard's panel shows, from the same cached report as the
    quality page (one cache read while it is fresh): decision alpha,
    disagreements waiting for a third reviewer or an operator, and reviewers
    flagged or paused."""
    report = agreement.cached_quality_report()
    double = report.get("double_review", {})
    reading, tone = alpha_reading(report.get("decision_alpha"), agreement.MIN_PAIR_OVERLAP)
    return {
        "alpha": report.get("decision_alpha") or {},
        "alpha_reading": reading,
        "alpha_tone": tone,
        "waiting": double.get("awaiting_third", 0) + double.get("awaiting_operator", 0),
        "awaiting_operator": double.get("awaiting_operator", 0),
        "flagged": sum(1 for row in report.get("reviewers", []) if row.get("flagged") or row.get("paused")),
    }


def page_context(forms: dict[int, SettleForm] | None = None) -> dict[str, Any]:
    report = agreement.cached_quality_report()
    queue = Queue.current()
    items = list(disagreements()[:DISAGREEMENTS_SHOWN])
    forms = forms or {}
    least = agreement.MIN_PAIR_OVERLAP
    decision_text, decision_tone = alpha_reading(report.get("decision_alpha"), least)
    label_text, label_tone = alpha_reading(report.get("label_alpha"), least)
    return {
        "report": report,
        "min_pair_overlap": least,
        "queue": queue,
        "decision_reading": decision_text,
        "decision_tone": decision_tone,
        "label_reading": label_text,
        "label_tone": label_tone,
        "pairs": [{**pair, "words": kappa_words(pair.get("kappa"))} for pair in report.get("pairs", [])],
        "reviewers": reviewer_rows(report, queue.gold_min_accuracy),
        "double": report.get("double_review", {}),
        "disagreements": [(item, forms.get(item.pk) or SettleForm(prefix=f"settle-{item.pk}")) for item in items],
        "gold_items": list(active_gold()),
    }


def forget_report() -> None:
    """Drop the cached quality report after an operator changed what it
    counts, so the page they return to shows the change, not a minute-old
    copy. An unreachable cache only leaves the old copy to run out."""
    try:
        cache.delete(agreement.CACHE_KEY)
    except Exception:  # noqa: BLE001 - the change is recorded; the report catches up within its cache time
        log.warning("cache unreachable; the quality report may lag for a minute")


@require_GET
@operator_required
def quality_page(request: HtmxHttpRequest) -> HttpResponse:
    return render(request, "ops/quality.html", page_context())


def _disagreement_response(request: HtmxHttpRequest, item: ReviewItem, form: SettleForm, status: int) -> HttpResponse:
    item = disagreements().filter(pk=item.pk).first() or item
    return render(request, "ops/quality.html#disagreement", {"item": item, "form": form}, status=status)


@require_POST
@operator_required
def settle(request: HtmxHttpRequest, item_id: int) -> HttpResponse:
    """An operator settles a double-reviewed item. A refusal comes back
    beside the form with what was typed kept; a plain form gets the page."""
    item = get_object_or_404(ReviewItem, pk=item_id, gold=None)
    form = SettleForm(request.POST, prefix=f"settle-{item.pk}")
    verdict = None
    if form.is_valid():
        try:
            verdict = services.settle(item_id=item.pk, operator=request.user, **form.cleaned_data)
            forget_report()
        except services.InvalidInput as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        except services.QueueError as exc:  # AlreadyDecided among them
            form.add_error(None, exc.message)
    if verdict is None:
        if request.htmx:
            return _disagreement_response(request, item, form, status=400)
        return render(request, "ops/quality.html", page_context({item.pk: form}), status=400)
    if request.htmx:
        return render(request, "ops/quality.html#settled", {"item": item, "verdict": verdict})
    messages.success(request, f"Item #{item.pk} settled: {verdict.get_decision_display()}.")
    return redirect("ops:quality")


@require_POST
@operator_required
def reinstate(request: HtmxHttpRequest, reviewer_id: int) -> HttpResponse:
    """Clear a reviewer's flag and pause; htmx gets the reviewer's row back."""
    standing = get_object_or_404(ReviewerStanding.objects.select_related("reviewer"), reviewer_id=reviewer_id)
    services.reinstate(reviewer_id=standing.reviewer_id, operator=request.user)
    forget_report()
    name = standing.reviewer.get_username()
    if request.htmx:
        context = {"name": name, "reviewer_id": standing.reviewer_id}
        return render(request, "ops/quality.html#reinstated", context)
    messages.success(request, f"{name} is reinstated.")
    return redirect("ops:quality")


@require_POST
@operator_required
def retire_gold(request: HtmxHttpRequest, gold_id: int) -> HttpResponse:
    """Stop serving a gold item; its answers so far still count."""
    gold = get_object_or_404(GoldItem, pk=gold_id, retired_at=None)
    services.retire_gold(gold_id=gold.pk, operator=request.user)
    forget_report()
    if request.htmx:
        return render(request, "ops/quality.html#retired", {"gold": gold})
    messages.success(request, f"Gold item #{gold.item_id} retired.")
    return redirect("ops:quality")


@require_POST
@operator_required
def mark_gold(request: HtmxHttpRequest, item_id: int) -> HttpResponse:
    """From an item's page: mark a decided item as gold (or change what it
    expects). Errors come back on the item's page, with what was chosen."""
    item = get_object_or_404(ReviewItem, pk=item_id, gold=None)
    form = GoldForm(request.POST)
    if form.is_valid():
        try:
            services.mark_gold(item_id=item.pk, operator=request.user, **form.cleaned_data)
        except services.InvalidInput as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            forget_report()
            messages.success(request, f"Item #{item.pk} is gold: copies of it will be served to reviewers.")
            return redirect("review_item", item_id=item.pk)
    return render_item(request, item, gold_form=form, status=400)
