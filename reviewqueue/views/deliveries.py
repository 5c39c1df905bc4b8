"""The operators' webhook deliveries page: every event sent (or being retried,
or given up) with its attempts and last answer, filtered by status or URL,
and a redeliver button that sends an event again with the same id."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST

from .. import webhooks
from ..access import operator_required
from ..models import WebhookDelivery
from .http import HtmxHttpRequest

PAGE_SIZE = 50
STATUSES = WebhookDelivery.Status.values


def filtered(status: str, url: str) -> Any:
    rows = WebhookDelivery.objects.order_by("-created_at", "-pk")
    if status in STATUSES:
        rows = rows.filter(status=status)
    if url:
        rows = rows.filter(url=url)
    return rows.only(
        "event_id",
        "event_type",
        "url",
        "item_id",
        "status",
        "attempts",
        "next_attempt_at",
        "last_attempt_at",
        "last_status_code",
        "last_error",
        "created_at",
        "delivered_at",
    )


@require_GET
@operator_required
def deliveries(request: HtmxHttpRequest) -> HttpResponse:
    """Newest first, 50 to a page; ``status`` and ``url`` filter exactly."""
    status = request.GET.get("status", "")
    status = status if status in STATUSES else ""
    url = request.GET.get("url", "").strip()
    page = Paginator(filtered(status, url), PAGE_SIZE).get_page(request.GET.get("page"))
    query = {key: value for key, value in (("status", status), ("url", url)) if value}
    context = {
        "page": page,
        "status": status,
        "url": url,
        "statuses": WebhookDelivery.Status.choices,
        "query": urlencode(query),
    }
    return render(request, "ops/deliveries.html", context)


@require_POST
@operator_required
def redeliver(request: HtmxHttpRequest, delivery_id: int) -> HttpResponse:
    """Send a delivered or given-up event again: same id, same body (receivers
    dedupe on the id). htmx gets the row back; a plain form, the page."""
    row = get_object_or_404(WebhookDelivery, pk=delivery_id)
    again = webhooks.redeliver([row.pk])
    row.refresh_from_db()
    if request.htmx:
        return render(request, "ops/deliveries.html#row", {"row": row})
    if again:
        messages.success(request, f"Event {row.event_id} will be sent again.")
    else:
        messages.info(request, f"Event {row.event_id} is already waiting to be sent.")
    back = request.POST.get("next", "")
    return redirect(back if back.startswith(reverse("ops:deliveries")) else "ops:deliveries")
