"""Prometheus metrics at /metrics, read from the database on each scrape.

No in-process counters: with several web workers each would hold only its own
share. Access: a bearer token with the ``metrics`` scope, or a signed-in
operator (docs/API.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from .. import stats
from ..access import is_operator
from ..models import ApiToken, Queue, ReviewItem
from ..tokens import bearer_token
from .api import missing_scope_body


class QueueCollector(Collector):
    """Every metric comes from one pass of aggregate queries at scrape time."""

    def collect(self) -> Iterator[Metric]:
        queue = Queue.current()
        counts = stats.status_counts()
        depth = counts[ReviewItem.Status.PENDING] + counts[ReviewItem.Status.CLAIMED]

        yield GaugeMetricFamily("reviewqueue_depth", "Items waiting for review (pending + claimed).", value=depth)
        yield GaugeMetricFamily("reviewqueue_capacity", "Queue capacity from the policy.", value=queue.capacity)
        items = GaugeMetricFamily("reviewqueue_items", "Items by status.", labels=["status"])
        for status, n in counts.items():
            items.add_metric([status], n)
        yield items
        mode = GaugeMetricFamily(
            "reviewqueue_mode", "1 for the queue's current mode, 0 for the others.", labels=["mode"]
        )
        for name in ("normal", "draft", "shedding"):
            mode.add_metric([name], 1.0 if queue.mode == name else 0.0)
        yield mode
        yield CounterMetricFamily(
            "reviewqueue_arrivals",
            "Outputs that reached the queue (shed and filtered included).",
            value=sum(counts.values()),
        )
        decisions = CounterMetricFamily("reviewqueue_decisions", "Human verdicts by decision.", labels=["decision"])
        for decision, n in stats.decisions_total().items():
            decisions.add_metric([decision], n)
        yield decisions
        shed = CounterMetricFamily("reviewqueue_shed", "Items shed at capacity, by priority.", labels=["priority"])
        for priority, n in stats.shed_by_priority().items():
            shed.add_metric([str(priority)], n)
        yield shed
        yield GaugeMetricFamily("reviewqueue_step_limit", "Live step limit for new loops.", value=queue.step_limit)
        approve = stats.approve_rate(queue.tuner_window)
        yield GaugeMetricFamily(
            "reviewqueue_approve_rate",
            "Approve share of the verdicts in the tuner window (NaN before the first verdict).",
            value=math.nan if approve.rate is None else approve.rate,
        )
        yield CounterMetricFamily(
            "reviewqueue_lease_expiries", "Leases that ran out before a verdict.", value=stats.lease_expiries_total()
        )
        oldest = stats.oldest_waiting_age()
        yield GaugeMetricFamily(
            "reviewqueue_oldest_waiting_seconds", "Age of the oldest waiting item (0 when empty).", value=oldest or 0.0
        )
        loops = CounterMetricFamily("reviewqueue_loop_runs", "Agent loop runs by outcome.", labels=["outcome"])
        for outcome, n in stats.loop_outcomes().items():
            loops.add_metric([outcome], n)
        yield loops
        yield from webhook_metrics()


def webhook_metrics() -> Iterator[Metric]:
    """Webhook events by outcome (pending, delivered, failed: given up), the
    attempts made, and how long events took from the change to a 2xx."""
    deliveries = GaugeMetricFamily(
        "reviewqueue_webhook_deliveries", "Webhook events by delivery status.", labels=["status"]
    )
    for status, n in stats.delivery_counts().items():
        deliveries.add_metric([status], n)
    yield deliveries
    yield CounterMetricFamily(
        "reviewqueue_webhook_attempts", "Webhook delivery attempts made.", value=stats.delivery_attempts_total()
    )
    latency = stats.delivery_latency()
    histogram = HistogramMetricFamily(
        "reviewqueue_webhook_delivery_seconds", "Seconds from an event's creation to its receiver's 2xx."
    )
    buckets = [(f"{bound:g}", n) for bound, n in latency.buckets] + [("+Inf", latency.count)]
    histogram.add_metric([], buckets, sum_value=latency.sum_seconds)
    yield histogram


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector())
    return registry


@login_not_required
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text format; 401 without credentials, 403 without the right."""
    if "Authorization" in request.headers:
        token = bearer_token(request)
        if token is None:
            return HttpResponse("invalid or revoked token\n", status=401, content_type="text/plain")
        if not token.has_scope(ApiToken.Scope.METRICS):
            return JsonResponse(missing_scope_body(ApiToken.Scope.METRICS), status=403)
    elif not request.user.is_authenticated:
        response = HttpResponse("a bearer token or an operator session is required\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    elif not is_operator(request.user):
        return HttpResponse("operators only\n", status=403, content_type="text/plain")
    return HttpResponse(generate_latest(_registry()), content_type=CONTENT_TYPE_LATEST)
