"""Operator views: the live dashboard, its filter rules and the policy
settings. All need the operator role, and each is about one queue:
``?queue=<slug>`` (or a POST form's hidden ``queue``), the default queue
without it (views/queues.py)."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from .. import services, stats
from ..access import operator_required
from ..chart_series import depth_chart, step_limit_chart
from ..formatting import audit_value, fmt_duration, fmt_ratio
from ..forms import (
    PolicyForm,
    add_service_errors,
)
from ..models import FilterRule, PolicyAudit, Queue, ReasonLabel
from ..policy import FILTER_GATES
from ..selectors.scope import scope_context, scoped_url
from ..services.runs import sandbox_status
from .http import HtmxHttpRequest, queue_scoped
from .quality import dashboard_summary

POLL_SECONDS = 5


# --- dashboard --------------------------------------------------------------------------


def ratio_rule(ratio: float | None) -> tuple[str, str]:
    """ARCHITECTURE.md rule 9 in words, with a css class for its tone."""
    if ratio is None:
        return "no flow measured", "muted"
    if math.isinf(ratio):
        return "items arrive and none are decided: review is not keeping up", "bad"
    if ratio <= 1:
        return "≤ 1: review keeps up, the queue is stable", "ok"
    if ratio < 2:
        return "between 1 and 2: the queue grows; backpressure and shedding absorb it only for a while", "warn"
    return "≥ 2: unsustainable, the queue overflows whatever its design", "bad"


MODE_NEWS = {
    "normal": "Mode: normal. Depth is back below the low watermark; loops run their full fix loop.",
    "draft": "Mode: draft. Depth is above the high watermark; new loops run once and tag their output draft.",
    "shedding": "Mode: shedding. The queue is at capacity; each arrival sheds the lowest-priority item.",
}


def announcement(queue: Queue, ratio_warning: bool) -> str:
    """What the screen-reader live region says: only the state an operator
    must hear about. The page announces it when it differs from the last one."""
    news = MODE_NEWS.get(queue.mode, f"Mode: {queue.mode}.")
    if ratio_warning:
        news += " Production has outrun review for 15 minutes."
    return news


def dashboard_context(queue: Queue) -> dict[str, Any]:
    """One queue's dashboard; ``queue`` is read in this request (queue_for_operator)."""
    now = timezone.now()
    counts = stats.waiting_counts(queue=queue)
    flow = stats.rates(stats.RATE_WINDOWS[stats.DEFAULT_RATE_WINDOW], now=now, queue=queue)
    rule_text, rule_css = ratio_rule(flow.ratio)
    hour = stats.mode_durations(timedelta(hours=1), now=now, queue=queue)
    day = stats.mode_durations(timedelta(hours=24), now=now, queue=queue)
    approve = stats.approve_rate(queue.tuner_window, queue=queue)
    audit = stats.audit_reject_share(queue=queue)
    ratio_warning = stats.ratio_stays_above_one(now=now, queue=queue)
    sla = stats.sla_figures(queue, now=now, flow=flow)
    return {
        "announcement": announcement(queue, ratio_warning),
        "queue": queue,
        "now": now,
        "poll_seconds": POLL_SECONDS,
        "depth": counts["pending"] + counts["claimed"],
        "counts": counts,
        "flow": flow,
        "ratio_text": fmt_ratio(flow.ratio),
        "ratio_rule": rule_text,
        "ratio_css": rule_css,
        "ratio_warning": ratio_warning,
        "oldest_age": fmt_duration(sla["oldest_waiting_seconds"]),
        "sla": sla,
        "sla_rows": sla_rows(sla),
        "mode_rows": [(mode, fmt_duration(hour.get(mode, 0)), fmt_duration(day.get(mode, 0))) for mode in hour],
        "approve": approve,
        "audit": audit,
        "depth_chart": depth_chart(queue, now),
        "step_chart": step_limit_chart(queue, now),
        "step_history": list(reversed(stats.step_limit_history(limit=10, queue=queue))),
        "shed_by_priority": stats.shed_by_priority(queue=queue),
        "breaker": stats.breaker_log(queue=queue)[:20],
        "failing_endpoints": stats.failing_endpoints(now=now),
        # Probed once per process: whether red lines run in bubblewrap here.
        "redline": sandbox_status(),
        "quality": dashboard_summary(),
        **rules_context(queue),
    }


def sla_rows(sla: dict[str, Any]) -> list[tuple[str, str, str, str, int]]:
    """(window, p50, p95, share within the SLA, verdicts) for the SLA table."""
    rows = []
    for name, label in (("hour", "Last hour"), ("day", "Last 24 h")):
        t = sla["time_to_verdict"][name]
        within = "—" if t["within_sla"] is None else f"{t['within_sla']:.0%}"
        rows.append((label, fmt_duration(t["p50_seconds"]), fmt_duration(t["p95_seconds"]), within, t["n"]))
    return rows


def rules_context(queue: Queue) -> dict[str, Any]:
    # Labels counted at least once, in words (a count of 0 is left after an undo).
    counts = {label: n for label, n in stats.label_counts(queue=queue).items() if n}
    words = dict(ReasonLabel.choices)
    return {
        **scope_context(queue),
        "label_counts": {words.get(label, label.replace("_", " ")): n for label, n in counts.items()},
        # Counted labels that no cheap mechanical gate can catch: said, not silently skipped.
        "labels_without_gate": [words.get(label, label) for label in counts if label not in FILTER_GATES],
        "rules": FilterRule.objects.filter(queue=queue).select_related("decided_by").order_by("status", "-proposed_at"),
    }


@require_GET
@operator_required
@queue_scoped
def dashboard(request: HtmxHttpRequest, queue: Queue) -> HttpResponse:
    """One queue's live dashboard; an htmx poll gets only the region it asked for."""
    if request.htmx and request.htmx.target == "rules":
        return render(request, "ops/dashboard.html#rules", rules_context(queue))
    template = "ops/dashboard.html#live" if request.htmx else "ops/dashboard.html"
    return render(request, template, dashboard_context(queue))


RULE_ACTIONS = {"enable": FilterRule.Status.ENABLED, "dismiss": FilterRule.Status.DISMISSED}


@require_GET
@operator_required
def rule_preview(request: HttpRequest, rule_id: int) -> HttpResponse:
    """Before a rule is enabled: what its gate would have filtered from the newest items."""
    rule = get_object_or_404(FilterRule.objects.select_related("queue"), pk=rule_id)
    known = stats.known_gate(rule.gate)
    preview = (
        stats.gate_preview(rule.gate, queue=rule.queue) if known and rule.status != FilterRule.Status.ENABLED else None
    )
    context = {"rule": rule, "preview": preview, "known_gate": known, **scope_context(rule.queue, switch_here=False)}
    return render(request, "ops/rule_preview.html", context)


@require_POST
@operator_required
def rule_decide(request: HttpRequest, rule_id: int, action: str) -> HttpResponse:
    """Enable or dismiss a proposed filter rule (or change one's mind later).
    Enabling needs the confirmation sent from the preview page: a gate drops
    output before any human sees it, so nobody turns one on unseen."""
    status = RULE_ACTIONS.get(action)
    if status is None:
        return HttpResponse("unknown action", status=400)
    rule = get_object_or_404(FilterRule.objects.select_related("queue"), pk=rule_id)
    if status == FilterRule.Status.ENABLED and request.POST.get("confirm") != "1":
        return redirect("ops:rule_preview", rule_id=rule.pk)
    try:
        services.decide_rule(rule_id=rule.pk, status=status, user=request.user)
    except services.UnknownGate as exc:
        return HttpResponse(exc.message, status=400)
    if request.htmx:
        return render(request, "ops/dashboard.html#rules", rules_context(rule.queue))
    messages.success(request, f"Filter rule {rule.gate} {status} in {rule.queue.slug}.")
    return redirect(scoped_url("ops:dashboard", rule.queue))


# --- policy settings --------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@operator_required
@queue_scoped
def policy_settings(request: HtmxHttpRequest, queue: Queue) -> HttpResponse:
    """Edit one queue's policy; every change is audited and listed below the form."""
    status = 200
    if request.method == "POST":
        form = PolicyForm(request.POST, instance=queue)
        if form.is_valid():
            try:
                services.policy_update(user=request.user, changes=form.changes(), queue=queue)
            except (ValidationError, services.InvalidInput) as exc:
                add_service_errors(form, exc)
            else:
                changed = ", ".join(PolicyForm.label_of(name) for name in form.changes())
                said = f"changed: {changed}" if changed else "nothing changed"
                messages.success(request, f"Policy of {queue.name} saved; {said}.")
                return redirect(scoped_url("ops:policy", queue))
        status = 400
    else:
        form = PolicyForm(instance=queue)
    audits = list(PolicyAudit.objects.filter(queue=queue).select_related("user").order_by("-created_at", "-pk")[:50])
    for audit in audits:
        audit.named_changes = [  # type: ignore[attr-defined]
            (name, PolicyForm.label_of(name), [audit_value(value, dict(ReasonLabel.choices)) for value in pair])
            for name, pair in audit.changes.items()
        ]
    context = {"form": form, "audits": audits, **scope_context(queue)}
    return render(request, "ops/policy.html", context, status=status)
