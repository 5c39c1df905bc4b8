"""Operator views: the live dashboard, filter rules, policy settings, the
what-if simulator and the verdict export. All need the operator role, and
each is about one queue: ``?queue=<slug>`` (or a POST form's hidden
``queue``), the default queue without it (views/queues.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from loops import sandbox as redline_sandbox
from loops.gates import GATES

from .. import services, stats
from ..access import operator_required
from ..charts import Chart, HLine, Line, PairChart, PairRow, build_chart, build_pair_chart, watermark_marks
from ..export import export_lines
from ..forms import (
    INLINE_SIMULATION_MINUTES,
    MAX_ADD_QUEUE_EVENTS,
    AddQueueWhatIfForm,
    ExportForm,
    LiveWindowForm,
    PolicyForm,
    WhatIfForm,
    add_service_errors,
    backlog_text,
    scenario_initial,
)
from ..models import FilterRule, PolicyAudit, Queue, ReasonLabel, SimulationRun, Verdict
from ..policy import FILTER_GATES
from ..selectors import whatif as whatif_selectors
from ..services.simulations import ADD_QUEUE_KIND, execute_simulation
from ..tasks.periodic import run_simulation
from .http import HtmxHttpRequest
from .quality import dashboard_summary
from .queues import fmt_duration, fmt_ratio, queue_scoped, scope_context, scoped_url

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


def depth_chart(queue: Queue, now: datetime) -> Chart:
    """Sampled depth over the last hour, with the live depth as the newest point so
    the chart moves between samples; capacity and both watermarks drawn."""
    samples = stats.depth_samples(now=now, queue=queue)
    xs = [(s.created_at - now).total_seconds() / 60 for s in samples] + [0.0]
    ys = [float(s.depth) for s in samples] + [float(services.queue_depth(queue))]
    chart = Chart(
        title="Queue depth, last hour",
        lines=[Line("depth", xs, ys, "series-a")],
        hlines=watermark_marks(queue.capacity, queue.high_watermark, queue.low_watermark),
        x_label="minutes ago",
        x_domain=(-stats.DEPTH_WINDOW.total_seconds() / 60, 0.0),
    )
    return build_chart(chart, x_tick_format=lambda v: f"{v:.0f}")


def step_limit_chart(queue: Queue, now: datetime) -> Chart:
    history = stats.step_limit_history(queue=queue)
    if not history:
        return Chart(title="Step limit", lines=[], empty=True)
    start = history[0].created_at
    xs = [0.0] + [(h.created_at - start).total_seconds() / 60 for h in history]
    ys = [float(history[0].previous)] + [float(h.step_limit) for h in history]
    xs.append(max((now - start).total_seconds() / 60, xs[-1]))
    ys.append(float(queue.step_limit))
    chart = Chart(
        title="Step limit over time",
        lines=[Line("step limit", xs, ys, "series-b", step=True)],
        hlines=[
            HLine(f"max {queue.max_step_limit}", queue.max_step_limit, "mark-capacity"),
            HLine(f"min {queue.min_step_limit}", queue.min_step_limit, "mark-low"),
        ],
        x_label="minutes since the first change",
    )
    # Changes minutes apart would all read "0" at whole minutes.
    digits = 1 if xs[-1] < 4 else 0
    return build_chart(chart, x_tick_format=lambda v: f"{v:.{digits}f}")


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
        "redline": redline_sandbox.status(),
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
    known = rule.gate in GATES
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
                changed = ", ".join(form.changes()) or "nothing"
                messages.success(request, f"Policy of {queue.slug} saved ({changed} changed).")
                return redirect(scoped_url("ops:policy", queue))
        status = 400
    else:
        form = PolicyForm(instance=queue)
    audits = PolicyAudit.objects.filter(queue=queue).select_related("user").order_by("-created_at", "-pk")[:50]
    context = {"form": form, "audits": audits, **scope_context(queue)}
    return render(request, "ops/policy.html", context, status=status)


# --- what-if ------------------------------------------------------------------------------


def live_initial(window_key: str, queue: Queue) -> tuple[dict[str, Any], stats.Rates]:
    """Form values from one real queue: its measured rates and its live policy."""
    from simulation import PRESETS

    flow = stats.rates(stats.RATE_WINDOWS[window_key], queue=queue)
    queue = Queue.current(queue)
    initial = scenario_initial(
        PRESETS["A"],
        name=f"live {queue.slug} {window_key}",
        production_per_min=round(flow.arrivals_per_min, 3),
        review_per_min=round(flow.decisions_per_min, 3),
        reviewers=max(1, flow.reviewers),
        capacity=queue.capacity,
        high_watermark=queue.high_watermark,
        low_watermark=queue.low_watermark,
        backpressure=True,
        sla_minutes=float(queue.sla_minutes),
        age_high_minutes=queue.age_high_minutes or 0.0,
        age_low_minutes=queue.age_low_minutes or 0.0,
        initial_ages_min=backlog_text(whatif_selectors.waiting_ages(queue)),
    )
    return initial, flow


def whatif_page_context(form: WhatIfForm, live_form: LiveWindowForm, queue: Queue) -> dict[str, Any]:
    """What the what-if page always shows: the forms, the presets, the queue's latest runs."""
    from simulation import PRESET_DESCRIPTIONS, PRESETS

    return {
        **scope_context(queue),
        "form": form,
        "live_form": live_form,
        "presets": sorted(PRESETS),
        "preset_descriptions": sorted(PRESET_DESCRIPTIONS.items()),
        # A single queue's runs; "add a queue" runs have their own page. (A run
        # without a kind has no "kind" key, which a plain exclude would drop too.)
        "runs": SimulationRun.objects.filter(queue=queue)
        .filter(Q(params__kind__isnull=True) | ~Q(params__kind=ADD_QUEUE_KIND))
        .order_by("-created_at", "-pk")[:20],
        "inline_minutes": INLINE_SIMULATION_MINUTES,
    }


@require_GET
@operator_required
@queue_scoped
def whatif(request: HttpRequest, queue: Queue) -> HttpResponse:
    """The scenario form; ?preset=X or ?window=1h&live=1 only prefill it."""
    from simulation import PRESETS

    live_form = LiveWindowForm(request.GET if "live" in request.GET else None)
    live_flow: stats.Rates | None = None
    preset = request.GET.get("preset", "A")
    if live_form.is_bound and live_form.is_valid():
        initial, live_flow = live_initial(live_form.cleaned_data["window"], queue)
    else:
        preset = preset if preset in PRESETS else "A"
        initial = scenario_initial(PRESETS[preset], name=f"preset {preset}")
    page = whatif_page_context(
        WhatIfForm(initial=initial), live_form if live_form.is_bound else LiveWindowForm(), queue
    )
    page.update(
        {
            "live_flow": live_flow,
            "live_ratio": fmt_ratio(live_flow.ratio) if live_flow else None,
            "preset": None if live_flow else preset,
            "done_runs": [run for run in page["runs"] if run.status == SimulationRun.Status.DONE],
        }
    )
    return render(request, "ops/whatif.html", page)


@require_POST
@operator_required
@queue_scoped
def whatif_run(request: HtmxHttpRequest, queue: Queue) -> HttpResponse:
    """Start a simulation of ``queue``: small ones run in the request, larger ones in a Celery task."""
    form = WhatIfForm(request.POST)
    if not form.is_valid():
        return render(request, "ops/whatif.html", whatif_page_context(form, LiveWindowForm(), queue), status=400)
    run = SimulationRun.objects.create(
        queue=queue,
        created_by=request.user,
        name=form.cleaned_data["name"] or "what-if",
        params=form.params(),
        progress_total=form.cleaned_data["replications"],
    )
    if form.runs_inline():
        execute_simulation(run.pk)
    else:
        transaction.on_commit(lambda: run_simulation.delay(run.pk))
    return redirect("ops:whatif_result", run_id=run.pk)


def preset_of(scenario: dict[str, Any]) -> str | None:
    """The preset a stored scenario is, if it is one unchanged."""
    from simulation import PRESETS

    return next((name for name, preset in PRESETS.items() if preset.to_dict() == scenario), None)


def result_context(run: SimulationRun) -> dict[str, Any]:
    """What a finished (or running) simulation shows: numbers, chart, ratio rule."""
    from simulation import PRESET_DESCRIPTIONS

    if run.params.get("kind") == ADD_QUEUE_KIND:
        return added_result_context(run)

    scenario = run.params.get("scenario", {})
    preset = preset_of(scenario)
    ctx: dict[str, Any] = {
        **scope_context(run.queue, switch_here=False),
        "run": run,
        "scenario": scenario,
        "preset_description": f"Preset {preset}. {PRESET_DESCRIPTIONS[preset]}" if preset else "",
    }
    if run.status != SimulationRun.Status.DONE or not run.result:
        return ctx
    r = run.result
    sc = r["scenario"]
    step = r.get("depth_series_step_min", 1)
    series = r["depth_series"]
    cap = sc["capacity"]
    chart = Chart(
        title=f"Simulated depth (mean of {r['replications']} runs)",
        lines=[Line("depth", [i * step for i in range(len(series))], series, "series-a")],
        hlines=watermark_marks(cap, sc["high_watermark"], sc["low_watermark"]),
        x_label="minute",
    )
    ratio = r.get("ratio")
    rule_text, rule_css = ratio_rule(math.inf if ratio is None else ratio)
    ctx.update(
        {
            "r": r,
            "chart": build_chart(chart, x_tick_format=lambda v: f"{v:.0f}"),
            "ratio_text": fmt_ratio(math.inf if ratio is None else ratio),
            "ratio_rule": rule_text,
            "ratio_css": rule_css,
        }
    )
    return ctx


@require_GET
@operator_required
def whatif_result(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """A run's result; while it runs, the progress region polls, and the answer
    for a finished run tells htmx to stop polling (286)."""
    run = get_object_or_404(SimulationRun.objects.select_related("queue"), pk=run_id)
    ctx = result_context(run)
    if not request.htmx:
        return render(request, "ops/whatif_result.html", ctx)
    region = "ops/whatif_result.html#result"
    if run.status in (SimulationRun.Status.DONE, SimulationRun.Status.FAILED):
        return HttpResponseStopPolling(render_to_string(region, ctx, request))
    return render(request, region, ctx)


@require_GET
@operator_required
def whatif_compare(request: HttpRequest) -> HttpResponse:
    """Two finished runs side by side."""
    try:
        ids = [int(request.GET["a"]), int(request.GET["b"])]
    except (KeyError, ValueError):
        return HttpResponse("pick two runs: ?a=<id>&b=<id>", status=400)
    runs = [get_object_or_404(SimulationRun.objects.select_related("queue"), pk=pk) for pk in ids]
    if any(run.params.get("kind") == ADD_QUEUE_KIND for run in runs):
        return HttpResponse("only single-queue what-ifs can be compared side by side", status=400)
    return render(request, "ops/whatif_compare.html", {"sides": [result_context(run) for run in runs]})


# --- what-if: add a queue -------------------------------------------------------------------

# The window the "add a queue" form's live figures are measured over.
ADD_QUEUE_RATE_WINDOW = "1h"


@dataclass(frozen=True)
class LiveFlow:
    """What the "add a queue" form starts from: each active queue's arrivals
    per minute, and the whole team's decisions per minute (every queue's)."""

    window_min: float
    arrivals_per_min: dict[str, float]
    decisions: int
    decisions_per_min: float
    reviewers: int


def live_flow(queues: list[Queue], *, now: datetime | None = None) -> LiveFlow:
    now = now or timezone.now()
    window = stats.RATE_WINDOWS[ADD_QUEUE_RATE_WINDOW]
    by_queue = stats.rates_by_queue(window, now=now)
    decisions = sum(r.decisions for r in by_queue.values())
    # One reviewer who decides in two queues is one person of the pool.
    reviewers = (
        Verdict.objects.filter(created_at__gt=now - window, created_at__lte=now)
        .exclude(reviewer=None)
        .values("reviewer")
        .distinct()
        .count()
    )
    minutes = window.total_seconds() / 60
    return LiveFlow(
        window_min=minutes,
        arrivals_per_min={q.slug: by_queue[q.pk].arrivals_per_min if q.pk in by_queue else 0.0 for q in queues},
        decisions=decisions,
        decisions_per_min=decisions / minutes,
        reviewers=reviewers,
    )


def added_initial(queues: list[Queue], flow: LiveFlow) -> dict[str, Any]:
    initial: dict[str, Any] = {
        "review_per_min": round(flow.decisions_per_min, 3),
        "reviewers": max(1, flow.reviewers),
    }
    for q in queues:
        initial[f"rate__{q.slug}"] = round(flow.arrivals_per_min[q.slug], 3)
        initial[f"capacity__{q.slug}"] = q.capacity
    return initial


def added_page_context(form: AddQueueWhatIfForm, flow: LiveFlow) -> dict[str, Any]:
    runs = SimulationRun.objects.filter(params__kind=ADD_QUEUE_KIND).order_by("-created_at", "-pk")[:20]
    return {
        "form": form,
        "flow": flow,
        "window": ADD_QUEUE_RATE_WINDOW,
        "runs": runs,
        "max_events": MAX_ADD_QUEUE_EVENTS,
    }


@require_GET
@operator_required
def queues_whatif(request: HttpRequest) -> HttpResponse:
    """'If we add a queue': the form, prefilled from every active queue's live data."""
    queues = list(Queue.objects.active().order_by("slug"))
    flow = live_flow(queues)
    form = AddQueueWhatIfForm(initial=added_initial(queues, flow), queues=queues)
    return render(request, "ops/queues_whatif.html", added_page_context(form, flow))


@require_POST
@operator_required
def queues_whatif_run(request: HttpRequest) -> HttpResponse:
    """Start an "add a queue" what-if: small ones run in the request, larger ones on a worker."""
    queues = list(Queue.objects.active().order_by("slug"))
    form = AddQueueWhatIfForm(request.POST, queues=queues)
    if not form.is_valid():
        return render(request, "ops/queues_whatif.html", added_page_context(form, live_flow(queues)), status=400)
    params = form.params()
    run = SimulationRun.objects.create(
        queue=Queue.default(),
        created_by=request.user,
        name=f"add {params['added']['slug']}",
        params=params,
        progress_total=2 * params["replications"],
    )
    if form.runs_inline():
        execute_simulation(run.pk)
    else:
        transaction.on_commit(lambda: run_simulation.delay(run.pk))
    return redirect("ops:whatif_result", run_id=run.pk)


@dataclass(frozen=True)
class Compared:
    """One figure of ``simulation.multi.COMPARED`` as the result page writes it."""

    key: str
    label: str
    unit: str
    digits: int
    note: str
    # Whether less is better. Less draft time is not: a queue spends less of
    # it when it loses more items instead, so its change is shown uncoloured.
    judged: bool = True

    @property
    def heading(self) -> str:
        return f"{self.label} ({self.unit})"


COMPARED_SHOWN = (
    Compared("overflow_pct", "Lost share", "%", 1, "the share of arrivals shed or refused at capacity"),
    Compared("lost", "Items lost", "per run", 1, "arrivals shed or refused, per simulated run"),
    Compared("mean_wait_min", "Mean wait", "min", 1, "from arrival to decision, of reviewed items"),
    Compared("p95_wait_min", "p95 wait", "min", 1, "95 % of reviewed items waited less"),
    Compared(
        "time_in_draft_min",
        "Draft mode",
        "min",
        0,
        "time above the high watermark: loops ran once; neither better nor worse by itself",
        judged=False,
    ),
)


def fmt_number(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def fmt_figure(value: float | None, unit: str, digits: int) -> str:
    if value is None:
        return "—"
    return f"{value:,.{digits}f} {unit}"


def fmt_change(before: float | None, after: float | None, digits: int) -> tuple[str, str]:
    """The change as a signed number and its tone: worse (up), better (down) or none."""
    if before is None or after is None:
        return "", "muted"
    delta = round(after - before, digits)
    if delta == 0:
        return "=", "muted"
    sign = "+" if delta > 0 else "−"
    return f"{sign}{abs(delta):,.{digits}f}", "worse" if delta > 0 else "better"


def _added_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Each existing queue's compared figures, without -> with the new queue."""
    rows = []
    for slug, changes in result["changes"].items():
        cells = []
        for c in COMPARED_SHOWN:
            before, after = changes[c.key]
            change, tone = fmt_change(before, after, c.digits)
            if not c.judged and tone != "muted":
                tone = "unjudged"
            cells.append(
                {
                    "label": c.heading,
                    "before": fmt_number(before, c.digits),
                    "after": fmt_number(after, c.digits),
                    "change": change,
                    "tone": tone,
                }
            )
        rows.append({"slug": slug, "rate": result["without"]["queues"][slug]["production_per_min"], "cells": cells})
    return rows


def _added_charts(result: dict[str, Any], slug: str) -> list[Any]:
    """p95 wait and lost share of each existing queue, without and with ``slug``."""
    return [
        build_pair_chart(
            PairChart(
                title=f"{title} by queue, without and with {slug}",
                rows=[PairRow(queue, *result["changes"][queue][key]) for queue in result["changes"]],
                unit=unit,
                legend=("without", f"with {slug}"),
            )
        )
        for title, key, unit in (("p95 wait", "p95_wait_min", "min"), ("Lost share", "overflow_pct", "%"))
    ]


def added_result_context(run: SimulationRun) -> dict[str, Any]:
    """An "add a queue" run: each existing queue's figures without and with the
    new queue, the pool's utilisation, the new queue's own figures, two charts."""
    params = run.params
    added = params["added"]
    ctx: dict[str, Any] = {
        "run": run,
        "added_kind": True,
        "added": added,
        "multi": params["multi"],
        "hours": params["multi"]["duration_min"] / 60,
    }
    if run.status != SimulationRun.Status.DONE or not run.result:
        return ctx
    r = run.result
    own = r["with"]["queues"][added["slug"]]
    before_u, after_u = r["utilisation"]
    ratios = [r["without"].get("ratio"), r["with"].get("ratio")]
    ctx.update(
        {
            "r": r,
            "columns": COMPARED_SHOWN,
            "rows": _added_rows(r),
            "own": [(c.label, fmt_figure(own.get(c.key), c.unit, c.digits), c.note) for c in COMPARED_SHOWN],
            "charts": _added_charts(r, added["slug"]),
            "utilisation": [fmt_figure(100 * before_u, "%", 1), fmt_figure(100 * after_u, "%", 1)],
            "ratios": [fmt_ratio(math.inf if x is None else x) for x in ratios],
            "ratio_rule": ratio_rule(math.inf if ratios[1] is None else ratios[1]),
        }
    )
    return ctx


# --- export -------------------------------------------------------------------------------


@require_GET
@operator_required
@queue_scoped
def export(request: HttpRequest, queue: Queue) -> HttpResponse:
    """The export form; the download itself is export_download."""
    return render(request, "ops/export.html", {"form": ExportForm(), **scope_context(queue)})


@require_GET
@operator_required
@queue_scoped
def export_download(request: HttpRequest, queue: Queue) -> HttpResponse:
    """One queue's verdicts as CSV or JSON Lines, streamed in chunks so any row count fits in memory."""
    form = ExportForm(request.GET)
    if not form.is_valid():
        return render(request, "ops/export.html", {"form": form, **scope_context(queue)}, status=400)
    fmt = form.cleaned_data["format"]
    content_type = "text/csv; charset=utf-8" if fmt == "csv" else "application/x-ndjson; charset=utf-8"
    dataset = form.cleaned_data["dataset"]
    response = StreamingHttpResponse(export_lines(form.queryset(queue), fmt, dataset), content_type=content_type)
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    name = f"{'dataset' if dataset else 'verdicts'}-{queue.slug}"
    response["Content-Disposition"] = f'attachment; filename="{name}-{stamp}.{fmt}"'
    return response


# --- API reference ----------------------------------------------------------------------


@require_GET
@operator_required
def api_docs(request: HttpRequest) -> HttpResponse:
    """The interactive API reference (vendored Swagger UI over /api/openapi.json)."""
    return render(request, "ops/api_docs.html")
