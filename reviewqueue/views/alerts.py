"""The operators' alerts pages: what fired, when, where it was delivered and
who acknowledged it; and the channels alerts go to, with their secrets
masked, a form to add one and a "send a test" button."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from ..access import operator_required
from ..forms import AlertChannelForm
from ..models import Alert, AlertChannel
from ..services import InvalidInput, alerts
from .http import HtmxHttpRequest

PAGE_SIZE = 50


@require_GET
@operator_required
def alert_list(request: HtmxHttpRequest) -> HttpResponse:
    """Newest first, 50 to a page."""
    rows = Alert.objects.select_related("queue", "acknowledged_by").order_by("-created_at", "-pk")
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "ops/alerts.html", {"page": page})


@require_POST
@operator_required
def acknowledge(request: HtmxHttpRequest, alert_id: int) -> HttpResponse:
    """Record who acknowledged the alert (the first one stays); htmx gets the row back."""
    try:
        alert = alerts.acknowledge(alert_id=alert_id, user=request.user)
    except InvalidInput as exc:
        return HttpResponse(str(exc), status=404, content_type="text/plain")
    if request.htmx:
        return render(request, "ops/alerts.html#row", {"row": alert})
    messages.success(request, f"Alert {alert.pk} acknowledged.")
    return redirect("ops:alerts")


def channel_rows() -> list[tuple[AlertChannel, str]]:
    return [
        (channel, alerts.describe(channel))
        for channel in AlertChannel.objects.select_related("queue").order_by("queue__slug", "name", "pk")
    ]


@require_http_methods(["GET", "POST"])
@operator_required
def channels(request: HtmxHttpRequest) -> HttpResponse:
    """The channels (URLs masked) and a form to add one; every change is audited."""
    status = 200
    form = AlertChannelForm(request.POST or None)
    if request.method == "POST":
        if form.is_valid():
            try:
                channel = alerts.channel_create(user=request.user, **form.cleaned_data)
            except InvalidInput as exc:
                form.add_error(exc.field if exc.field in form.fields else None, str(exc).split(": ", 1)[-1])
            else:
                messages.success(request, f"Channel {channel.name} added.")
                return redirect("ops:alert_channels")
        status = 400
    return render(request, "ops/alert_channels.html", {"form": form, "rows": channel_rows()}, status=status)


@require_POST
@operator_required
def channel_delete(request: HtmxHttpRequest, channel_id: int) -> HttpResponse:
    alerts.channel_delete(user=request.user, channel_id=channel_id)
    messages.success(request, "Channel removed.")
    return redirect("ops:alert_channels")


@require_POST
@operator_required
def channel_test(request: HtmxHttpRequest, channel_id: int) -> HttpResponse:
    """Send a test message to one channel now and say how it went."""
    try:
        alert = alerts.channel_test(user=request.user, channel_id=channel_id)
    except InvalidInput as exc:
        return HttpResponse(str(exc), status=404, content_type="text/plain")
    outcome = alert.deliveries[0]
    if outcome["ok"]:
        messages.success(request, f"Test sent to {outcome['channel']}.")
    else:
        messages.error(request, f"Test to {outcome['channel']} failed: {outcome['detail']}.")
    return redirect("ops:alert_channels")
