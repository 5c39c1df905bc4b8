"""The Prometheus exporter behind /metrics (views/metrics.py): every queue's
numbers read from the database on each scrape, in labelled series.

No in-process counters: with several web workers each would hold only its own
share.

Every queue metric carries a ``queue`` label (the queue's slug), with a
bounded cardinality: at most ``METRICS_MAX_QUEUES`` (50) queues are labelled,
chosen by depth (largest first), then by slug. The numbers of every other
queue are summed under ``queue="_other"``: counts, depth and capacity add
up, ``reviewqueue_mode`` counts the queues in each mode, and the oldest
waiting age is the oldest among them; step limit and approve rate, which
are one queue's settings, are not given for it. Archived queues with
nothing waiting are left out. A queue may move between its own label and
``_other`` as depths change, so sum over ``queue`` for totals
(``sum without (queue) (...)``). Webhook metrics belong to no queue and
carry no ``queue`` label.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.utils import timezone
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from .. import stats
from ..finality import undo_window
from ..models import LoopRun, Mode, Queue, ReviewItem, Verdict

# At most this many queues get a label of their own on /metrics.
METRICS_MAX_QUEUES = 50
# The label under which every other queue's numbers are summed.
OTHER_QUEUES = "_other"


@dataclass
class QueueNumbers:
    """One labelled series set: a queue, or the sum of the queues past the limit."""

    label: str
    depth: int = 0
    capacity: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    modes: dict[str, int] = field(default_factory=dict)
    decisions: dict[str, int] = field(default_factory=dict)
    shed: dict[int, int] = field(default_factory=dict)
    loops: dict[str, int] = field(default_factory=dict)
    lease_expiries: int = 0
    oldest: float = 0.0
    step_limit: float | None = None
    approve_rate: float | None = None
    # Time to verdict over the last day: cumulative counts per bound, count, sum, within the SLA.
    verdict_buckets: list[tuple[float, int]] = field(default_factory=list)
    verdicts: int = 0
    verdict_seconds: float = 0.0
    within_sla: int = 0
    sla_seconds: float | None = None  # one queue's setting: not given for _other

    def add(self, other: QueueNumbers) -> None:
        """Sum ``other`` into this one (the ``_other`` series): counts add,
        the oldest waiting age is the oldest, per-queue settings are dropped."""
        self.depth += other.depth
        self.capacity += other.capacity
        for mine, theirs in (
            (self.statuses, other.statuses),
            (self.modes, other.modes),
            (self.decisions, other.decisions),
            (self.shed, other.shed),
            (self.loops, other.loops),
        ):
            for key, n in theirs.items():
                mine[key] = mine.get(key, 0) + n  # type: ignore[index]
        self.lease_expiries += other.lease_expiries
        self.oldest = max(self.oldest, other.oldest)
        if not self.verdict_buckets:
            self.verdict_buckets = [(bound, 0) for bound, _ in other.verdict_buckets]
        self.verdict_buckets = [(b, n + m) for (b, n), (_, m) in zip(self.verdict_buckets, other.verdict_buckets)]
        self.verdicts += other.verdicts
        self.verdict_seconds += other.verdict_seconds
        self.within_sla += other.within_sla


def labelled_queues(queues: list[Queue], depth: dict[int, int]) -> tuple[list[Queue], list[Queue]]:
    """(queues labelled, queues summed under ``_other``). Archived queues with
    nothing waiting are left out; of the rest, the deepest METRICS_MAX_QUEUES
    (then by slug) are labelled."""
    shown = [q for q in queues if not q.archived or depth.get(q.pk, 0) > 0]
    shown.sort(key=lambda q: (-depth.get(q.pk, 0), q.slug))
    return shown[:METRICS_MAX_QUEUES], shown[METRICS_MAX_QUEUES:]


def queue_numbers() -> list[QueueNumbers]:
    """Every labelled queue's numbers, then ``_other`` if any queue is past
    the limit: one grouped query per kind of number, whatever the number of queues."""
    queues = list(Queue.objects.all())
    # Only final verdicts (``finality``; an undoable one's item counts as
    # claimed): an undo never takes a count back, and counters only grow.
    final_by = timezone.now() - undo_window()
    statuses = stats.status_counts_by_queue(given_by=final_by)
    depth = {
        pk: counts[ReviewItem.Status.PENDING] + counts[ReviewItem.Status.CLAIMED] for pk, counts in statuses.items()
    }
    labelled, rest = labelled_queues(queues, depth)
    decisions = stats.decisions_by_queue(given_by=final_by)
    shed = stats.shed_by_queue()
    loops = stats.loop_outcomes_by_queue()
    expiries = stats.lease_expiries_by_queue()
    oldest = stats.oldest_waiting_by_queue()
    approve = stats.approve_rates_by_queue(labelled, given_by=final_by)
    verdicts = stats.verdict_histograms_by_queue(labelled + rest)
    no_verdicts = stats.VerdictHistogram([(b, 0) for b in stats.TIME_TO_VERDICT_BUCKETS], 0, 0.0, 0)
    empty_statuses = dict.fromkeys(ReviewItem.Status.values, 0)

    def numbers(q: Queue, label: str) -> QueueNumbers:
        return QueueNumbers(
            label=label,
            depth=depth.get(q.pk, 0),
            capacity=q.capacity,
            statuses=dict(statuses.get(q.pk, empty_statuses)),
            modes={mode: int(q.mode == mode) for mode in Mode.values},
            decisions=dict(decisions.get(q.pk, dict.fromkeys(Verdict.Decision.values, 0))),
            shed=dict(shed.get(q.pk, {})),
            loops=dict(loops.get(q.pk, dict.fromkeys(LoopRun.Outcome.values, 0))),
            lease_expiries=expiries.get(q.pk, 0),
            oldest=oldest.get(q.pk, 0.0),
            verdict_buckets=list(verdicts.get(q.pk, no_verdicts).buckets),
            verdicts=verdicts.get(q.pk, no_verdicts).count,
            verdict_seconds=verdicts.get(q.pk, no_verdicts).sum_seconds,
            within_sla=verdicts.get(q.pk, no_verdicts).within_sla,
        )

    out = []
    for q in labelled:
        row = numbers(q, q.slug)
        row.step_limit = q.step_limit
        row.sla_seconds = q.sla_minutes * 60.0
        rate = approve[q.pk].rate
        row.approve_rate = math.nan if rate is None else rate
        out.append(row)
    if rest:
        other = QueueNumbers(
            label=OTHER_QUEUES,
            statuses=dict(empty_statuses),
            modes=dict.fromkeys(Mode.values, 0),
            decisions=dict.fromkeys(Verdict.Decision.values, 0),
            loops=dict.fromkeys(LoopRun.Outcome.values, 0),
        )
        for q in rest:
            other.add(numbers(q, OTHER_QUEUES))
        out.append(other)
    return out


class QueueCollector(Collector):
    """Every metric comes from one pass of aggregate queries at scrape time."""

    def collect(self) -> Iterator[Metric]:
        rows = queue_numbers()
        q = ["queue"]
        depth = GaugeMetricFamily("reviewqueue_depth", "Items waiting for review (pending + claimed).", labels=q)
        capacity = GaugeMetricFamily("reviewqueue_capacity", "Queue capacity from the policy.", labels=q)
        items = GaugeMetricFamily("reviewqueue_items", "Items by status.", labels=[*q, "status"])
        mode = GaugeMetricFamily(
            "reviewqueue_mode",
            "1 for the queue's current mode, 0 for the others (for _other: how many queues are in it).",
            labels=[*q, "mode"],
        )
        arrivals = CounterMetricFamily(
            "reviewqueue_arrivals", "Outputs that reached the queue (shed and filtered included).", labels=q
        )
        decisions = CounterMetricFamily("reviewqueue_decisions", "Human verdicts by decision.", labels=[*q, "decision"])
        shed = CounterMetricFamily("reviewqueue_shed", "Items shed at capacity, by priority.", labels=[*q, "priority"])
        step_limit = GaugeMetricFamily("reviewqueue_step_limit", "Live step limit for new loops.", labels=q)
        approve = GaugeMetricFamily(
            "reviewqueue_approve_rate",
            "Approve share of the verdicts in the tuner window (NaN before the first verdict).",
            labels=q,
        )
        expiries = CounterMetricFamily("reviewqueue_lease_expiries", "Leases that ran out before a verdict.", labels=q)
        oldest = GaugeMetricFamily(
            "reviewqueue_oldest_waiting_seconds", "Age of the oldest waiting item (0 when empty).", labels=q
        )
        loops = CounterMetricFamily("reviewqueue_loop_runs", "Agent loop runs by outcome.", labels=[*q, "outcome"])
        for row in rows:
            label = [row.label]
            depth.add_metric(label, row.depth)
            capacity.add_metric(label, row.capacity)
            for status, n in row.statuses.items():
                items.add_metric([*label, status], n)
            for name in ("normal", "draft", "shedding"):
                mode.add_metric([*label, name], float(row.modes.get(name, 0)))
            arrivals.add_metric(label, sum(row.statuses.values()))
            for decision, n in row.decisions.items():
                decisions.add_metric([*label, decision], n)
            for priority, n in sorted(row.shed.items()):
                shed.add_metric([*label, str(priority)], n)
            if row.step_limit is not None:
                step_limit.add_metric(label, row.step_limit)
            if row.approve_rate is not None:
                approve.add_metric(label, row.approve_rate)
            expiries.add_metric(label, row.lease_expiries)
            oldest.add_metric(label, row.oldest)
            for outcome, n in row.loops.items():
                loops.add_metric([*label, outcome], n)
        yield from (depth, capacity, items, mode, arrivals, decisions, shed, step_limit, approve, expiries, oldest)
        yield loops
        yield from sla_metrics(rows)
        yield from webhook_metrics()


def sla_metrics(rows: list[QueueNumbers]) -> Iterator[Metric]:
    """The SLA series: the oldest item waiting for a verdict, time to verdict
    and the share within the SLA, by queue."""
    q = ["queue"]
    oldest_pending = GaugeMetricFamily(
        "reviewqueue_oldest_pending_age_seconds",
        "Age of the oldest item still waiting for a verdict (pending or claimed; 0 when empty).",
        labels=q,
    )
    to_verdict = HistogramMetricFamily(
        "reviewqueue_time_to_verdict_seconds",
        "Admission to human verdict, over the verdicts of the last 24 h (a sliding window, not a running total).",
        labels=q,
    )
    attainment = GaugeMetricFamily(
        "reviewqueue_sla_attainment_ratio",
        "Share of the last 24 h's human verdicts given within the queue's SLA (NaN without verdicts).",
        labels=q,
    )
    target = GaugeMetricFamily(
        "reviewqueue_sla_seconds", "The queue's SLA: target seconds from admission to verdict.", labels=q
    )
    for row in rows:
        label = [row.label]
        if row.sla_seconds is not None:
            target.add_metric(label, row.sla_seconds)
        oldest_pending.add_metric(label, row.oldest)
        buckets = [(f"{bound:g}", n) for bound, n in row.verdict_buckets] + [("+Inf", row.verdicts)]
        to_verdict.add_metric(label, buckets, sum_value=row.verdict_seconds)
        attainment.add_metric(label, row.within_sla / row.verdicts if row.verdicts else math.nan)
    yield from (target, oldest_pending, to_verdict, attainment)


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


def registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector())
    return registry
