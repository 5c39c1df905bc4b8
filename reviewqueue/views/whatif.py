"""Operator views: the what-if simulator, for one queue and for adding a
queue, its result polling and the side-by-side comparison. All need the
operator role; the single-queue pages are about one queue like the
dashboard (views/queues.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseStopPolling

from .. import stats
from ..access import operator_required
from ..chart_series import _added_charts
from ..charts import Chart, Line, build_chart, watermark_marks
from ..formatting import fmt_change, fmt_figure, fmt_number, fmt_ratio
from ..forms import (
    AddQueueWhatIfForm,
    LiveWindowForm,
    WhatIfForm,
    backlog_text,
    scenario_initial,
)
from ..models import Queue, SimulationRun
from ..selectors import whatif as whatif_selectors
from ..selectors.flow import ADD_QUEUE_RATE_WINDOW, LiveFlow, live_flow
from ..selectors.scope import scope_context
from ..services import simulations
from ..services.simulations import ADD_QUEUE_KIND, INLINE_SIMULATION_MINUTES, MAX_ADD_QUEUE_EVENTS
from .dashboard import ratio_rule
from .http import HtmxHttpRequest, queue_scoped

# --- what-if ------------------------------------------------------------------------------


def live_initial(window_key: str, queue: Queue) -> tuple[dict[str, Any], stats.Rates]:
    """Form values from one real queue: its measured rates and its live policy."""
    flow = stats.rates(stats.RATE_WINDOWS[window_key], queue=queue)
    queue = Queue.current(queue)
    initial = scenario_initial(
        simulations.presets()["A"].scenario,
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
    catalogue = simulations.presets()
    return {
        **scope_context(queue),
        "form": form,
        "live_form": live_form,
        "presets": sorted(catalogue),
        "preset_descriptions": [(name, preset.description) for name, preset in sorted(catalogue.items())],
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
    catalogue = simulations.presets()
    live_form = LiveWindowForm(request.GET if "live" in request.GET else None)
    live_flow: stats.Rates | None = None
    preset = request.GET.get("preset", "A")
    if live_form.is_bound and live_form.is_valid():
        initial, live_flow = live_initial(live_form.cleaned_data["window"], queue)
    else:
        preset = preset if preset in catalogue else "A"
        initial = scenario_initial(catalogue[preset].scenario, name=f"preset {preset}")
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
    run = simulations.start(
        queue=queue, user=request.user, name=form.cleaned_data["name"] or "what-if", params=form.params()
    )
    return redirect("ops:whatif_result", run_id=run.pk)


def preset_of(scenario: dict[str, Any]) -> str | None:
    """The preset a stored scenario is, if it is one unchanged."""
    catalogue = simulations.presets()
    return next((name for name, preset in catalogue.items() if preset.scenario.to_dict() == scenario), None)


def result_context(run: SimulationRun) -> dict[str, Any]:
    """What a finished (or running) simulation shows: numbers, chart, ratio rule."""
    if run.params.get("kind") == ADD_QUEUE_KIND:
        return added_result_context(run)

    scenario = run.params.get("scenario", {})
    preset = preset_of(scenario)
    ctx: dict[str, Any] = {
        **scope_context(run.queue, switch_here=False),
        "run": run,
        "scenario": scenario,
        "preset_description": f"Preset {preset}. {simulations.presets()[preset].description}" if preset else "",
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


def added_initial(queues: list[Queue], flow: LiveFlow) -> dict[str, Any]:
    initial: dict[str, Any] = {
        "review_per_min": round(flow.decisions_per_min, 3),
        "reviewers": max(1, flow.reviewers),
    }
    for q in queues:
        initial[f"rate__{q.slug}"] = round(flow.arrivals_per_min[q.slug], 3)
        initial[f"capacity__{q.slug}"] = q.capacity
        initial[f"backlog__{q.slug}"] = backlog_text(whatif_selectors.waiting_ages(q))
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
    run = simulations.start(user=request.user, name=f"add {params['added']['slug']}", params=params)
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


def _started_from(multi: dict[str, Any], added: str) -> str:
    """What an "add a queue" run started from, in words (a run stored before
    queues had a backlog started empty)."""
    waiting = [(q["slug"], len(q.get("initial_ages_min", []))) for q in multi["queues"]]
    if not any(n for _, n in waiting):
        return "from empty queues"
    told = ", ".join(f"{n} waiting in {slug}" for slug, n in waiting if n)
    return f"from today's backlog ({told}; {added} empty)"


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
        "started_from": _started_from(params["multi"], added["slug"]),
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
