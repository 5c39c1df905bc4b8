"""The item list: operators find any item (``/ops/items/``), read its
timeline (``/ops/items/<id>/``) and act on every item a filter matches
(``/ops/items/bulk/``); a reviewer lists the items they answered
(``/review/history/``). Filters live in the query string (the bulk form
carries them in its POST), paging is by keyset (``after``)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST

from ..access import operator_required, reviewer_required
from ..item_filters import BulkActionForm, ItemFilterForm
from ..models import Queue, ReasonLabel, ReviewItem
from ..selectors import items as selectors
from ..services import bulk
from ..services.errors import QueueError
from .http import HtmxHttpRequest

FILTER_NAMES = ("q", "queue", "status", "decision", "label", "producer", "run", "version", "since", "until")


def _query(data: QueryDict, **extra: str) -> str:
    """The filter's query string (blank values left out), plus ``extra``."""
    values = {name: data.get(name, "") for name in FILTER_NAMES}
    values.update(extra)
    return urlencode({key: value for key, value in values.items() if value})


def _listing(
    request: HtmxHttpRequest, form: ItemFilterForm, page: selectors.Page | None, **context: Any
) -> HttpResponse:
    data = form.data if form.is_bound else QueryDict()
    context |= {
        "form": form,
        "page": page,
        "filter_query": _query(data),
        "next_query": _query(data, after=page.next_cursor) if page and page.next_cursor else "",
        "first_page": bool(data.get("after")),
        "full_text": selectors.searching_in_full_text(),
    }
    status = context.pop("status", 400 if form.errors else 200)
    return render(request, context.pop("template"), context, status=status)


@require_GET
@operator_required
def item_list(request: HtmxHttpRequest) -> HttpResponse:
    """Every item, newest first, 50 to a page; a bad filter is a 400 that
    says which one, with the form to fix it."""
    form = ItemFilterForm(request.GET, queues=Queue.objects.all())
    page = selectors.operator_items(form.item_filter(), after=form.cleaned_data["after"]) if form.is_valid() else None
    bulk_form = BulkActionForm(queues=Queue.objects.all())
    return _listing(request, form, page, template="ops/items.html", bulk_form=bulk_form)


@require_GET
@operator_required
def item_detail(request: HtmxHttpRequest, item_id: int) -> HttpResponse:
    """One item with its timeline."""
    item = get_object_or_404(
        ReviewItem.objects.select_related("queue", "verdict__reviewer", "lease_holder", "previous_version"),
        pk=item_id,
    )
    context = {"item": item, "events": selectors.timeline(item), "versions": item.next_versions.order_by("pk")}
    return render(request, "ops/items_detail.html", context)


@require_GET
@reviewer_required
def history(request: HtmxHttpRequest) -> HttpResponse:
    """The items this reviewer answered, in the queues they review, with
    their own answer and nothing of anyone else's."""
    form = ItemFilterForm(request.GET, queues=Queue.objects.reviewable_by(request.user), reviewer=True)
    page = (
        selectors.reviewer_history(request.user, form.item_filter(), after=form.cleaned_data["after"])
        if form.is_valid()
        else None
    )
    return _listing(request, form, page, template="review/history.html")


@require_POST
@operator_required
def bulk_action(request: HtmxHttpRequest) -> HttpResponse:
    """Count, then act. Without ``seen`` (or with a count that changed) the
    page shows how many items the action would change and asks to confirm;
    with the count confirmed, the service applies it."""
    filter_form = ItemFilterForm(request.POST, queues=Queue.objects.all())
    form = BulkActionForm(request.POST, queues=Queue.objects.all())
    if filter_form.is_valid() and not form.is_valid():
        # The action's own refusal (no label, no queue) stays beside its form, on the list it came from.
        page = selectors.operator_items(filter_form.item_filter())
        return _listing(request, filter_form, page, template="ops/items.html", bulk_form=form, status=400)
    if not filter_form.is_valid() or not form.is_valid():
        return render(request, "ops/items_bulk.html", _bulk_context(request, filter_form, form, None), status=400)
    filters = filter_form.item_filter()
    action, seen = form.cleaned_data["action"], form.cleaned_data["seen"]
    target = form.target_queue()
    if seen is not None:
        try:
            result = bulk.bulk_apply(
                operator=request.user,
                filters=filters,
                action=action,
                seen=seen,
                reason_label=form.cleaned_data["reason_label"],
                target=target,
            )
        except bulk.CountChanged as exc:
            form.add_error(None, exc.message)
        except QueueError as exc:
            form.add_error(None, exc.message)
        else:
            skipped = f"; {result.skipped} skipped (changed meanwhile or being decided)" if result.skipped else ""
            messages.success(
                request, f"{_verb(action)} {result.applied} item{'s' if result.applied != 1 else ''}{skipped}."
            )
            return redirect(f"{reverse('ops:items')}?{_query(request.POST)}")
    count = bulk.bulk_count(filters=filters, action=action, target=target)
    return render(request, "ops/items_bulk.html", _bulk_context(request, filter_form, form, count))


def _verb(action: str) -> str:
    return {"requeue": "Requeued", "reject": "Rejected", "move": "Moved", "expire": "Expired"}[action]


def _bulk_context(
    request: HtmxHttpRequest, filter_form: ItemFilterForm, form: BulkActionForm, count: int | None
) -> dict[str, Any]:
    action = form.cleaned_data.get("action", "") if form.is_bound and hasattr(form, "cleaned_data") else ""
    return {
        "filter_form": filter_form,
        "form": form,
        "count": count,
        "action": action,
        "action_words": BulkActionForm.DONE.get(action, ""),
        "filters": [(name, request.POST.get(name, "")) for name in FILTER_NAMES if request.POST.get(name)],
        "filter_words": filter_form.described(),
        "reason_words": dict(ReasonLabel.choices).get(form.cleaned_data.get("reason_label", ""), "") if action else "",
        "target_queue": form.target_queue() if action else None,
        "filter_query": _query(request.POST),
        "limit": bulk.BULK_LIMIT,
    }
