"""Operator views of the queues: which queue an operator page is about, the
overview of every queue, creating, archiving and restoring a queue, its
reviewers, and the routing rules. All need the operator role.

Every operator page that shows one queue's numbers takes the queue from the
query parameter ``queue=<slug>`` (a POST form carries it as a hidden field);
without it, the page is about the default queue. An unknown slug is a 404
whose page names it. Archived queues keep their pages: their history stays
readable.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from .. import services, stats
from ..access import operator_required
from ..formatting import fmt_duration, fmt_ratio
from ..forms import QueueCreateForm, QueueMembersForm, RoutePreviewForm, RoutingRuleForm, add_service_errors
from ..models import Queue, RoutingRule
from ..selectors import routing as routing_selectors
from ..selectors.scope import scope_context, scoped_url
from ..services import identity, routing
from .http import unknown_queue_page

# The overview's flow ratio is measured over this window.
OVERVIEW_RATE_WINDOW = "1h"


# --- the overview ---------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueRow:
    queue: Queue
    depth: int
    fill_pct: int
    ratio: float | None
    oldest_seconds: float | None
    approve: stats.ApproveRate


def overview_rows(*, now: datetime | None = None) -> list[QueueRow]:
    """Every queue with its numbers, active ones first, then by slug. One
    query per kind of number whatever the number of queues; the depth is the
    kept depth on the queue's row (what admission decides on, recounted every
    few seconds)."""
    now = now or timezone.now()
    queues = list(Queue.objects.order_by("archived_at", "slug"))
    queues.sort(key=lambda q: (q.archived, q.slug))
    flow = stats.rates_by_queue(stats.RATE_WINDOWS[OVERVIEW_RATE_WINDOW], now=now)
    oldest = stats.oldest_waiting_by_queue(now=now)
    approve = stats.approve_rates_by_queue(queues)
    rows = []
    for q in queues:
        rate = flow.get(q.pk)
        rows.append(
            QueueRow(
                queue=q,
                depth=q.depth,
                fill_pct=min(100, round(100 * q.depth / q.capacity)) if q.capacity else 0,
                ratio=rate.ratio if rate else None,
                oldest_seconds=oldest.get(q.pk),
                approve=approve[q.pk],
            )
        )
    return rows


def overview_context(form: QueueCreateForm) -> dict[str, Any]:
    rows = overview_rows()
    shown = [
        {
            "row": row,
            "ratio_text": fmt_ratio(row.ratio),
            "oldest_text": fmt_duration(row.oldest_seconds),
            "dashboard_url": scoped_url("ops:dashboard", row.queue),
        }
        for row in rows
    ]
    return {
        "active": [r for r in shown if not r["row"].queue.archived],
        "archived": [r for r in shown if r["row"].queue.archived],
        "form": form,
        "rate_window": OVERVIEW_RATE_WINDOW,
    }


@require_http_methods(["GET", "POST"])
@operator_required
def queues(request: HttpRequest) -> HttpResponse:
    """Every queue at a glance, and the form that creates one."""
    if request.method == "POST":
        form = QueueCreateForm(request.POST)
        if form.is_valid():
            try:
                queue = services.create_queue(
                    user=request.user,
                    slug=form.cleaned_data["slug"],
                    name=form.cleaned_data["name"],
                    settings=form.settings(),
                )
            except (ValidationError, services.InvalidInput) as exc:
                add_service_errors(form, exc)
            else:
                messages.success(request, f"Queue {queue.slug} created. Choose its reviewers below.")
                return redirect("ops:queue", slug=queue.slug)
        return render(request, "ops/queues.html", overview_context(form), status=400)
    return render(request, "ops/queues.html", overview_context(QueueCreateForm()))


# --- one queue: its reviewers, archive and restore ---------------------------------------------


@require_http_methods(["GET", "POST"])
@operator_required
def queue_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """A queue's reviewers (users and groups), with links to its scoped pages."""
    queue = Queue.objects.filter(slug=slug).first()
    if queue is None:
        return unknown_queue_page(request, slug)
    status = 200
    if request.method == "POST":
        form = QueueMembersForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            diff = services.set_reviewers(
                queue=queue,
                user=request.user,
                open_to_all=data["open_to_all"],
                members=data["members"],
                groups=[*data["member_groups"], *identity.provider_groups(data.get("provider_groups", []))],
            )
            messages.success(request, f"Reviewers of {queue.slug} saved ({', '.join(diff) or 'nothing'} changed).")
            return redirect("ops:queue", slug=queue.slug)
        status = 400
    else:
        form = QueueMembersForm(initial=QueueMembersForm.initial_for(queue))
    return render(
        request,
        "ops/queue.html",
        {"queue": queue, "form": form, **scope_context(queue), "depth": queue.depth},
        status=status,
    )


ARCHIVE_ACTIONS = {"archive": True, "restore": False}


@require_http_methods(["GET", "POST"])
@operator_required
def queue_archive(request: HttpRequest, slug: str, action: str) -> HttpResponse:
    """GET asks to confirm; POST archives (or restores) the queue."""
    if action not in ARCHIVE_ACTIONS:
        return HttpResponse("unknown action", status=400)
    queue = Queue.objects.filter(slug=slug).first()
    if queue is None:
        return unknown_queue_page(request, slug)
    archived = ARCHIVE_ACTIONS[action]
    error = ""
    if request.method == "POST":
        try:
            services.archive_queue(queue=queue, user=request.user, archived=archived)
        except services.InvalidInput as exc:
            error = exc.message
        else:
            messages.success(request, f"Queue {queue.slug} {'archived' if archived else 'restored'}.")
            return redirect("ops:queues")
    context = {"queue": queue, "action": action, "archived": archived, "error": error}
    return render(request, "ops/queue_archive.html", context, status=400 if error else 200)


# --- routing rules ------------------------------------------------------------------------------


def routing_context(form: RoutingRuleForm, preview: RoutePreviewForm) -> dict[str, Any]:
    target = None
    if preview.is_bound and preview.is_valid():
        data = preview.cleaned_data
        target = routing_selectors.route_preview(
            producer=data["producer"], task_kind=data["task_kind"], priority=data["priority"], task_id=data["task_id"]
        )
    rules = list(RoutingRule.objects.select_related("queue").order_by("position", "pk"))
    return {"rules": rules, "form": form, "preview": preview, "target": target}


@require_http_methods(["GET", "POST"])
@operator_required
def routing_rules(request: HttpRequest) -> HttpResponse:
    """The routing rules in the order they are tried; a new rule goes last."""
    preview = RoutePreviewForm(request.GET if "priority" in request.GET else None)
    if request.method == "POST":
        form = RoutingRuleForm(request.POST)
        if form.is_valid():
            rule = routing.rule_add(rule=form.save(commit=False), user=request.user)
            messages.success(request, f"Routing rule added: #{rule.position + 1} sends work to {rule.queue.slug}.")
            return redirect("ops:routing")
        return render(request, "ops/routing.html", routing_context(form, preview), status=400)
    return render(request, "ops/routing.html", routing_context(RoutingRuleForm(), preview))


@require_http_methods(["GET", "POST"])
@operator_required
def routing_rule_edit(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = get_object_or_404(RoutingRule.objects.select_related("queue"), pk=rule_id)
    if request.method == "POST":
        form = RoutingRuleForm(request.POST, instance=rule)
        if form.is_valid():
            routing.rule_save(rule=form.save(commit=False), user=request.user)
            messages.success(request, "Routing rule saved.")
            return redirect("ops:routing")
        return render(request, "ops/routing_rule.html", {"form": form, "rule": rule}, status=400)
    return render(request, "ops/routing_rule.html", {"form": RoutingRuleForm(instance=rule), "rule": rule})


@require_POST
@operator_required
def routing_rule_delete(request: HttpRequest, rule_id: int) -> HttpResponse:
    get_object_or_404(RoutingRule, pk=rule_id)
    routing.rule_delete(rule_id=rule_id, user=request.user)
    messages.success(request, "Routing rule deleted.")
    return redirect("ops:routing")


MOVES = {"up": -1, "down": 1}


@require_POST
@operator_required
def routing_rule_move(request: HttpRequest, rule_id: int, direction: str) -> HttpResponse:
    """Swap a rule with its neighbour above or below; the first and last stay put."""
    step = MOVES.get(direction)
    if step is None:
        return HttpResponse("unknown direction", status=400)
    get_object_or_404(RoutingRule, pk=rule_id)
    routing.rule_move(rule_id=rule_id, step=step, user=request.user)
    return redirect("ops:routing")
