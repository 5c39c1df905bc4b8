"""Queue statistics read by the dashboard, the JSON API and /metrics.

Read-only: nothing here writes. Every query is bounded by a time window, a
row limit or an aggregate, so the cost does not grow with the item history.

Every queue statistic is one queue's: it takes ``queue`` (a row, a pk, or
None for the default queue) and filters on it first, so the indexes that
start with the queue serve it and 100 queues cost what one does. The
``*_by_queue`` functions answer every queue at once, one grouped query each,
for the overview and /metrics. Webhook statistics belong to no queue.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import (
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Window,
)
from django.db.models.functions import RowNumber
from django.utils import timezone

from loops.intervals import wilson_interval

from . import policy
from .finality import undo_window
from .models import (
    CircuitBreakerEntry,
    DepthSample,
    LabelCount,
    LoopRun,
    Mode,
    ModeChange,
    Queue,
    ReviewItem,
    StepLimitChange,
    Verdict,
    WebhookDelivery,
)

# Windows an operator can pick for measured rates ("from live data").
RATE_WINDOWS: dict[str, timedelta] = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "24h": timedelta(hours=24),
}
DEFAULT_RATE_WINDOW = "15m"
# The dashboard's depth chart: one hour of 10-second samples at most.
DEPTH_WINDOW = timedelta(hours=1)
MAX_DEPTH_POINTS = 360
# "Stays above 1": the ratio exceeded 1 in each of this many consecutive slices.
SUSTAINED_SLICES = 3
SLICE = timedelta(minutes=5)


QueueRef = Queue | int | None


def queue_pk(queue: QueueRef) -> int:
    """The pk of ``queue`` (a row or a pk); the default queue's for None."""
    if queue is None:
        return Queue.default().pk
    return queue.pk if isinstance(queue, Queue) else int(queue)


def queue_row(queue: QueueRef) -> Queue:
    """``queue`` as a row (read when given a pk); the default queue for None."""
    if isinstance(queue, Queue):
        return queue
    return Queue.current(queue)


@dataclass(frozen=True)
class Rates:
    """Flow through the queue over one window. ``ratio`` is production over
    review (ARCHITECTURE.md rule 9); None when nothing arrived and nothing was decided."""

    window_min: float
    arrivals: int
    decisions: int
    auto_passed: int
    reviewers: int
    arrivals_per_min: float
    decisions_per_min: float
    ratio: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: an infinite ratio (arrivals, no decisions) becomes None plus a flag."""
        out = asdict(self)
        out["ratio_infinite"] = self.ratio is not None and math.isinf(self.ratio)
        if out["ratio_infinite"]:
            out["ratio"] = None
        return out


def flow_ratio(arrivals: int, decisions: int) -> float | None:
    """Production over review; infinite when items arrive and none are decided."""
    if decisions:
        return arrivals / decisions
    return math.inf if arrivals else None


def rates(
    window: timedelta, *, now: datetime | None = None, queue: QueueRef = None, given_by: datetime | None = None
) -> Rates:
    """Arrivals (items reaching the queue, shed and filtered ones included:
    they were produced) and human decisions per minute over ``window``, in
    ``queue``; only decisions given by ``given_by`` when named (what a
    producer is told counts only verdicts past their undo window)."""
    now = now or timezone.now()
    since = now - window
    pk = queue_pk(queue)
    arrivals = ReviewItem.objects.filter(queue_id=pk, created_at__gt=since, created_at__lte=now).count()
    verdicts = Verdict.objects.filter(queue_id=pk, created_at__gt=since, created_at__lte=min(now, given_by or now))
    decisions = verdicts.count()
    reviewers = verdicts.exclude(reviewer=None).values("reviewer").distinct().count()
    auto_passed = LoopRun.objects.filter(
        queue_id=pk, outcome=LoopRun.Outcome.AUTO_PASSED, created_at__gt=since, created_at__lte=now
    ).count()
    minutes = window.total_seconds() / 60
    return Rates(
        window_min=minutes,
        arrivals=arrivals,
        decisions=decisions,
        auto_passed=auto_passed,
        reviewers=reviewers,
        arrivals_per_min=arrivals / minutes,
        decisions_per_min=decisions / minutes,
        ratio=flow_ratio(arrivals, decisions),
    )


def ratio_stays_above_one(*, now: datetime | None = None, queue: QueueRef = None) -> bool:
    """True when production outran review in every one of the last few
    slices: a single busy minute is noise, a run of them is a trend."""
    now = now or timezone.now()
    pk = queue_pk(queue)
    for i in range(SUSTAINED_SLICES):
        end = now - i * SLICE
        r = rates(SLICE, now=end, queue=pk)
        if r.ratio is None or r.ratio <= 1:
            return False
    return True


def oldest_waiting_age(*, now: datetime | None = None, queue: QueueRef = None) -> float | None:
    """Seconds the oldest waiting item has waited; None when the queue is empty."""
    now = now or timezone.now()
    waiting = ReviewItem.objects.filter(queue_id=queue_pk(queue), status__in=ReviewItem.WAITING)
    oldest = waiting.aggregate(t=Min("created_at"))["t"]
    return None if oldest is None else max(0.0, (now - oldest).total_seconds())


@dataclass(frozen=True)
class ApproveRate:
    rate: float | None
    approved: int
    n: int
    window: int


def approve_rate(window: int | None = None, *, queue: QueueRef = None, given_by: datetime | None = None) -> ApproveRate:
    """Approve share of the last ``window`` verdicts of ``queue`` that tune its
    step limit (the queue's own tuner window when none is given), the same
    verdicts its tuner reads; only those given by ``given_by`` when named
    (what a producer is told counts only verdicts past their undo window)."""
    pk = queue_pk(queue)
    window = window or queue_row(queue if queue is not None else pk).tuner_window
    verdicts = Verdict.objects.filter(queue_id=pk, counts_for_tuner=True)
    if given_by is not None:
        verdicts = verdicts.filter(created_at__lte=given_by)
    recent = list(verdicts.order_by("-created_at", "-pk").values_list("decision", flat=True)[:window])
    approved = sum(1 for d in recent if d == Verdict.Decision.APPROVE)
    return ApproveRate(rate=approved / len(recent) if recent else None, approved=approved, n=len(recent), window=window)


@dataclass(frozen=True)
class AuditShare:
    """Sampled auto-passes that humans rejected: what the red line's pass
    really means (observed) against what reviewers found (true)."""

    rejected: int
    n: int
    share: float | None
    low: float
    high: float


# The audit share reads at most this many of the newest audited auto-passes:
# enough for a tight interval, and the cost stays flat as history grows.
AUDIT_WINDOW = 2000


def audit_reject_share(
    window: int = AUDIT_WINDOW, *, queue: QueueRef = None, given_by: datetime | None = None
) -> AuditShare:
    """Reject share of the newest ``window`` verdicts on sampled auto-passes,
    with a Wilson 95 % interval; only verdicts given by ``given_by`` when named."""
    # An item is approved/rejected exactly while its verdict exists (decide and
    # undo change both in one transaction), so the item's status is the
    # verdict; reading it walks the small partial index "sampled_decided"
    # instead of joining every verdict in history.
    rows = ReviewItem.objects.filter(
        queue_id=queue_pk(queue),
        label=ReviewItem.Label.SAMPLED,
        status__in=(ReviewItem.Status.APPROVED, ReviewItem.Status.REJECTED),
    )
    if given_by is not None:
        rows = rows.filter(decided_at__lte=given_by)
    statuses = list(rows.order_by("-decided_at").values_list("status", flat=True)[:window])
    rejected = sum(1 for status in statuses if status == ReviewItem.Status.REJECTED)
    n = len(statuses)
    low, high = wilson_interval(rejected, n)
    return AuditShare(rejected=rejected, n=n, share=rejected / n if n else None, low=low, high=high)


def mode_durations(window: timedelta, *, now: datetime | None = None, queue: QueueRef = None) -> dict[str, float]:
    """Seconds ``queue`` spent in each mode over the last ``window``, from its mode-change log."""
    now = now or timezone.now()
    row = queue_row(queue)
    since = now - window
    if row.created_at > since:
        # Count only time the queue has existed: before its first item or
        # depth sample there was no queue to be in any mode. (The queue
        # ``default`` may hold items older than its row: it was made from the
        # single queue that came before.)
        # A young queue holds only young rows, so the earliest is read through
        # the queue's own rows (its foreign-key index), never by walking the
        # whole history's created_at index until this queue's first row.
        first_seen = [
            first
            for model in (ReviewItem, DepthSample)
            if (first := model.objects.filter(queue_id=row.pk).aggregate(t=Min("created_at"))["t"])
        ]
        since = max(since, min(first_seen, default=now))
    log = ModeChange.objects.filter(queue_id=row.pk)
    changes = list(
        log.filter(created_at__gt=since, created_at__lte=now)
        .order_by("created_at", "pk")
        .values_list("created_at", "previous", "mode")
    )
    before = log.filter(created_at__lte=since).order_by("-created_at", "-pk").first()
    if before is not None:
        mode = before.mode
    elif changes:
        mode = changes[0][1]
    else:
        mode = row.mode
    out = {m: 0.0 for m in Mode.values}
    cursor = since
    for at, _previous, new_mode in changes:
        out[mode] = out.get(mode, 0.0) + (at - cursor).total_seconds()
        mode, cursor = new_mode, at
    out[mode] = out.get(mode, 0.0) + (now - cursor).total_seconds()
    return out


def depth_samples(
    window: timedelta = DEPTH_WINDOW, *, now: datetime | None = None, queue: QueueRef = None
) -> list[DepthSample]:
    """``queue``'s newest samples in the window, oldest first, never more than MAX_DEPTH_POINTS."""
    now = now or timezone.now()
    rows = list(
        DepthSample.objects.filter(
            queue_id=queue_pk(queue), created_at__gte=now - window, created_at__lte=now
        ).order_by("-created_at")[:MAX_DEPTH_POINTS]
    )
    rows.reverse()
    return rows


def step_limit_history(limit: int = 50, *, queue: QueueRef = None) -> list[StepLimitChange]:
    """``queue``'s last ``limit`` step-limit changes, oldest first."""
    rows = list(StepLimitChange.objects.filter(queue_id=queue_pk(queue)).order_by("-created_at", "-pk")[:limit])
    rows.reverse()
    return rows


# How many of the newest items a filter rule is tried on before it is enabled.
GATE_PREVIEW_ITEMS = 200


@dataclass(frozen=True)
class GatePreview:
    """What a gate would have done to the newest items that reached the queue."""

    gate: str
    checked: int
    filtered: int
    # Of the filtered, how many a reviewer approved: the gate would have
    # thrown away output a human accepted.
    filtered_approved: int
    examples: list[tuple[int, str, str]]  # (item id, task id, the gate's reason)


def known_gate(gate: str) -> bool:
    """Whether the loops implement ``gate`` (a rule may name one since removed)."""
    from loops.gates import GATES

    return gate in GATES


def gate_preview(
    gate: str, limit: int = GATE_PREVIEW_ITEMS, examples: int = 5, *, queue: QueueRef = None
) -> GatePreview:
    """Run ``gate`` over the outputs of ``queue``'s newest ``limit`` items. Read-only."""
    from loops.gates import GATES

    check = GATES[gate]
    rows = (
        ReviewItem.objects.filter(queue_id=queue_pk(queue))
        .order_by("-created_at", "-pk")
        .values_list("pk", "task_id", "final_output", "status")[:limit]
        .iterator(chunk_size=50)
    )
    checked = filtered = approved = 0
    found: list[tuple[int, str, str]] = []
    for pk, task_id, output, status in rows:
        checked += 1
        reason = check(output or "")
        if reason is None:
            continue
        filtered += 1
        approved += status == ReviewItem.Status.APPROVED
        if len(found) < examples:
            found.append((pk, task_id, reason))
    return GatePreview(gate=gate, checked=checked, filtered=filtered, filtered_approved=approved, examples=found)


def label_counts(*, queue: QueueRef = None) -> dict[str, int]:
    return dict(LabelCount.objects.filter(queue_id=queue_pk(queue)).order_by("label").values_list("label", "count"))


def breaker_log(*, queue: QueueRef = None) -> QuerySet[CircuitBreakerEntry]:
    """``queue``'s circuit-breaker log, newest first (an entry belongs to its item's queue)."""
    return (
        CircuitBreakerEntry.objects.filter(item__queue_id=queue_pk(queue))
        .select_related("item")
        .order_by("-created_at", "-pk")
    )


def shed_by_priority(*, queue: QueueRef = None) -> dict[int, int]:
    """``queue``'s items shed at capacity, by priority, over all time (its circuit-breaker log)."""
    rows = (
        CircuitBreakerEntry.objects.filter(item__queue_id=queue_pk(queue))
        .values("priority")
        .annotate(n=Count("pk"))
        .order_by("priority")
    )
    return {row["priority"]: row["n"] for row in rows}


def _count_by(queryset: QuerySet[Any], field: str, values: Sequence[str]) -> dict[str, int]:
    """Rows per value of ``field``, with every listed value present (0 when absent)."""
    out = {value: 0 for value in values}
    out.update({row[field]: row["n"] for row in queryset.values(field).annotate(n=Count("pk"))})
    return out


def waiting_counts(*, queue: QueueRef = None) -> dict[str, int]:
    """``queue``'s pending and claimed items only: what the dashboard shows,
    read from waiting rows alone (status_counts() scans the whole history)."""
    waiting = ReviewItem.objects.filter(queue_id=queue_pk(queue), status__in=ReviewItem.WAITING)
    return _count_by(waiting, "status", ReviewItem.WAITING)


def status_counts(*, queue: QueueRef = None, given_by: datetime | None = None) -> dict[str, int]:
    """Items of ``queue`` by status; with ``given_by``, an item whose verdict
    was given later (still undoable) counts as ``claimed``, as a producer is
    shown it (``finality``)."""
    counts = _count_by(ReviewItem.objects.filter(queue_id=queue_pk(queue)), "status", ReviewItem.Status.values)
    if given_by is not None:
        unfinal = ReviewItem.objects.filter(queue_id=queue_pk(queue), status__in=HUMAN_DECIDED, decided_at__gt=given_by)
        _count_unfinal_as_claimed(counts, _count_by(unfinal, "status", HUMAN_DECIDED))
    return counts


def _count_unfinal_as_claimed(counts: dict[str, int], unfinal: dict[str, int]) -> None:
    for status, n in unfinal.items():
        counts[status] -= n
        counts[ReviewItem.Status.CLAIMED] += n


def lease_expiries_total(*, queue: QueueRef = None) -> int:
    expired = ReviewItem.objects.filter(queue_id=queue_pk(queue), lease_expiries__gt=0)
    return expired.aggregate(n=Sum("lease_expiries"))["n"] or 0


def decisions_total(*, queue: QueueRef = None) -> dict[str, int]:
    return _count_by(Verdict.objects.filter(queue_id=queue_pk(queue)), "decision", Verdict.Decision.values)


def loop_outcomes(*, queue: QueueRef = None) -> dict[str, int]:
    return _count_by(LoopRun.objects.filter(queue_id=queue_pk(queue)), "outcome", LoopRun.Outcome.values)


def snapshot(
    *, window: timedelta = RATE_WINDOWS[DEFAULT_RATE_WINDOW], now: datetime | None = None, queue: QueueRef = None
) -> dict[str, Any]:
    """``queue`` at a glance (the default queue when none is named), JSON-safe:
    what the API's stats endpoint returns."""
    now = now or timezone.now()
    queue = Queue.current(queue)
    # Producers hear only final verdicts (reviewqueue.finality): one still inside
    # its undo window may be taken back, so no number here counts it yet (its
    # item counts as claimed, as GET /api/items/{id} shows it).
    final_by = now - undo_window()
    counts = status_counts(queue=queue, given_by=final_by)
    depth = counts[ReviewItem.Status.PENDING] + counts[ReviewItem.Status.CLAIMED]
    approve = approve_rate(queue.tuner_window, queue=queue, given_by=final_by)
    audit = audit_reject_share(queue=queue, given_by=final_by)
    return {
        "queue": queue.slug,
        "depth": depth,
        "pending": counts[ReviewItem.Status.PENDING],
        "claimed": counts[ReviewItem.Status.CLAIMED],
        "capacity": queue.capacity,
        "high_watermark": queue.high_watermark,
        "low_watermark": queue.low_watermark,
        "mode": queue.mode,
        "step_limit": queue.step_limit,
        "status_counts": counts,
        "rates": rates(window, now=now, queue=queue, given_by=final_by).to_dict(),
        "ratio_stays_above_one": ratio_stays_above_one(now=now, queue=queue),
        "oldest_waiting_seconds": oldest_waiting_age(now=now, queue=queue),
        "approve_rate": approve.rate,
        "approve_rate_n": approve.n,
        "tuner_window": approve.window,
        "shed_by_priority": {str(k): v for k, v in shed_by_priority(queue=queue).items()},
        "lease_expiries": lease_expiries_total(queue=queue),
        "audit_reject_share": audit.share,
        "audit_reject_ci95": [audit.low, audit.high],
        "audit_n": audit.n,
        "sla": sla_figures(queue, now=now),
        "generated_at": now.isoformat(),
    }


# --- webhook deliveries -----------------------------------------------------------------

# Upper bounds (seconds) of the created -> delivered histogram on /metrics: a
# first attempt lands in the first few; retries spread over the rest of a day.
DELIVERY_LATENCY_BUCKETS = (
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    1800.0,
    3600.0,
    21600.0,
    86400.0,
)
# The dashboard calls an endpoint failing over this window.
FAILING_WINDOW = timedelta(hours=24)


def delivery_counts() -> dict[str, int]:
    """Webhook deliveries by status (pending, delivered, failed), zeros included."""
    found = dict(WebhookDelivery.objects.values_list("status").annotate(n=Count("pk")).values_list("status", "n"))
    return {status: found.get(status, 0) for status in WebhookDelivery.Status.values}


def delivery_attempts_total() -> int:
    return WebhookDelivery.objects.aggregate(n=Sum("attempts"))["n"] or 0


@dataclass(frozen=True)
class LatencyHistogram:
    """Cumulative counts per upper bound, the total and the sum in seconds."""

    buckets: list[tuple[float, int]]
    count: int
    sum_seconds: float


def delivery_latency() -> LatencyHistogram:
    """Created -> delivered for every delivered event, in one aggregate query."""
    latency = ExpressionWrapper(F("delivered_at") - F("created_at"), output_field=DurationField())
    delivered = WebhookDelivery.objects.filter(status=WebhookDelivery.Status.DELIVERED, delivered_at__isnull=False)
    counts = {
        f"le{i}": Count("pk", filter=Q(delivered_at__lte=F("created_at") + timedelta(seconds=bound)))
        for i, bound in enumerate(DELIVERY_LATENCY_BUCKETS)
    }
    row = delivered.aggregate(n=Count("pk"), total=Sum(latency), **counts)
    total = row["total"]
    return LatencyHistogram(
        buckets=[(bound, row[f"le{i}"]) for i, bound in enumerate(DELIVERY_LATENCY_BUCKETS)],
        count=row["n"],
        sum_seconds=total.total_seconds() if total is not None else 0.0,
    )


@dataclass(frozen=True)
class FailingEndpoint:
    url: str
    retrying: int
    failed: int
    last_attempt_at: datetime | None
    last_error: str
    last_status_code: int | None


def failing_endpoints(*, now: datetime | None = None, limit: int = 20) -> list[FailingEndpoint]:
    """Callback URLs with events being retried (pending after an attempt) or
    given up in the last day, worst first, with the latest error seen: one query."""
    since = (now or timezone.now()) - FAILING_WINDOW
    troubled = Q(status=WebhookDelivery.Status.PENDING, attempts__gt=0) | Q(
        status=WebhookDelivery.Status.FAILED, last_attempt_at__gte=since
    )
    latest = WebhookDelivery.objects.filter(troubled, url=OuterRef("url")).order_by("-last_attempt_at", "-pk")
    grouped = (
        WebhookDelivery.objects.filter(troubled)
        .values("url")
        .annotate(
            retrying=Count("pk", filter=Q(status=WebhookDelivery.Status.PENDING)),
            failed=Count("pk", filter=Q(status=WebhookDelivery.Status.FAILED)),
            last=Max("last_attempt_at"),
            error=Subquery(latest.values("last_error")[:1]),
            code=Subquery(latest.values("last_status_code")[:1]),
        )
        .order_by("-failed", "-retrying", "url")[:limit]
    )
    return [
        FailingEndpoint(
            url=row["url"],
            retrying=row["retrying"],
            failed=row["failed"],
            last_attempt_at=row["last"],
            last_error=row["error"] or "",
            last_status_code=row["code"],
        )
        for row in grouped
    ]


# --- every queue at once ------------------------------------------------------------------
# The overview and /metrics read these: one grouped query per kind of number,
# whatever the number of queues, each query bounded like the ones above.


def _grouped(queryset: QuerySet[Any], key: str, field: str) -> dict[int, dict[Any, int]]:
    """{queue pk: {value of field: rows}} in one GROUP BY query."""
    out: dict[int, dict[Any, int]] = {}
    for row in queryset.values(key, field).annotate(n=Count("pk")).order_by():
        out.setdefault(row[key], {})[row[field]] = row["n"]
    return out


def status_counts_by_queue(*, given_by: datetime | None = None) -> dict[int, dict[str, int]]:
    """Items by status per queue pk, every status present (0 when absent);
    ``given_by`` as for ``status_counts``."""
    found = _grouped(ReviewItem.objects.all(), "queue_id", "status")
    out = {pk: {s: counts.get(s, 0) for s in ReviewItem.Status.values} for pk, counts in found.items()}
    if given_by is not None:
        unfinal = ReviewItem.objects.filter(status__in=HUMAN_DECIDED, decided_at__gt=given_by)
        for pk, counts in _grouped(unfinal, "queue_id", "status").items():
            _count_unfinal_as_claimed(out[pk], counts)
    return out


def decisions_by_queue(*, given_by: datetime | None = None) -> dict[int, dict[str, int]]:
    """Verdicts by decision per queue pk; only those given by ``given_by`` when named."""
    verdicts = Verdict.objects.all() if given_by is None else Verdict.objects.filter(created_at__lte=given_by)
    found = _grouped(verdicts, "queue_id", "decision")
    return {pk: {d: counts.get(d, 0) for d in Verdict.Decision.values} for pk, counts in found.items()}


def loop_outcomes_by_queue() -> dict[int, dict[str, int]]:
    found = _grouped(LoopRun.objects.all(), "queue_id", "outcome")
    return {pk: {o: counts.get(o, 0) for o in LoopRun.Outcome.values} for pk, counts in found.items()}


def shed_by_queue() -> dict[int, dict[int, int]]:
    """Shed items per queue pk and priority (each circuit-breaker entry belongs to its item's queue)."""
    return _grouped(CircuitBreakerEntry.objects.all(), "item__queue_id", "priority")


def lease_expiries_by_queue() -> dict[int, int]:
    rows = (
        ReviewItem.objects.filter(lease_expiries__gt=0).values("queue_id").annotate(n=Sum("lease_expiries")).order_by()
    )
    return {row["queue_id"]: row["n"] or 0 for row in rows}


def oldest_waiting_by_queue(*, now: datetime | None = None) -> dict[int, float]:
    """Seconds the oldest waiting item of each queue has waited; queues with
    nothing waiting are absent. One statement: per queue, one probe of the
    index of waiting items by queue and age (``queue_waiting_by_age``)."""
    now = now or timezone.now()
    oldest = ReviewItem.objects.filter(queue_id=OuterRef("pk"), status__in=ReviewItem.WAITING).order_by("created_at")
    rows = Queue.objects.annotate(t=Subquery(oldest.values("created_at")[:1])).filter(t__isnull=False)
    return {pk: max(0.0, (now - t).total_seconds()) for pk, t in rows.values_list("pk", "t")}


def rates_by_queue(window: timedelta, *, now: datetime | None = None) -> dict[int, Rates]:
    """``rates`` for every queue with any flow in the window, in two grouped
    queries (arrivals, decisions); reviewers and auto-passes are not counted here."""
    now = now or timezone.now()
    since = now - window
    arrivals = dict(
        ReviewItem.objects.filter(created_at__gt=since, created_at__lte=now)
        .values("queue_id")
        .annotate(n=Count("pk"))
        .order_by()
        .values_list("queue_id", "n")
    )
    decisions = dict(
        Verdict.objects.filter(created_at__gt=since, created_at__lte=now)
        .values("queue_id")
        .annotate(n=Count("pk"))
        .order_by()
        .values_list("queue_id", "n")
    )
    minutes = window.total_seconds() / 60
    out = {}
    for pk in set(arrivals) | set(decisions):
        a, d = arrivals.get(pk, 0), decisions.get(pk, 0)
        out[pk] = Rates(
            window_min=minutes,
            arrivals=a,
            decisions=d,
            auto_passed=0,
            reviewers=0,
            arrivals_per_min=a / minutes,
            decisions_per_min=d / minutes,
            ratio=flow_ratio(a, d),
        )
    return out


def approve_rates_by_queue(queues: Sequence[Queue], *, given_by: datetime | None = None) -> dict[int, ApproveRate]:
    """``approve_rate`` of each queue over its own tuner window, in one
    statement: the tuning verdicts numbered newest first within each queue
    (a window function over the index ``verdict_tuning_by_queue``), kept while
    the number is within that queue's window; only verdicts given by
    ``given_by`` when named."""
    windows = {q.pk: q.tuner_window for q in queues}
    if not windows:
        return {}
    tuning = Verdict.objects.filter(counts_for_tuner=True, queue_id__in=list(windows))
    if given_by is not None:
        tuning = tuning.filter(created_at__lte=given_by)
    numbered = (
        tuning.annotate(
            rn=Window(RowNumber(), partition_by=[F("queue_id")], order_by=[F("created_at").desc(), F("pk").desc()])
        )
        .filter(rn__lte=max(windows.values()))
        .values_list("queue_id", "rn", "decision")
    )
    approved = dict.fromkeys(windows, 0)
    seen = dict.fromkeys(windows, 0)
    for pk, rn, decision in numbered:
        if rn <= windows[pk]:
            seen[pk] += 1
            approved[pk] += decision == Verdict.Decision.APPROVE
    return {
        pk: ApproveRate(
            rate=approved[pk] / seen[pk] if seen[pk] else None, approved=approved[pk], n=seen[pk], window=windows[pk]
        )
        for pk in windows
    }


# --- SLA: time to verdict, attainment and the forecast ---------------------------------

# The SLA figures' windows.
SLA_WINDOWS: dict[str, timedelta] = {"hour": timedelta(hours=1), "day": timedelta(hours=24)}
# Human verdicts: what a producer waits for (a filtered item was never a human's to judge).
HUMAN_DECIDED = (ReviewItem.Status.APPROVED, ReviewItem.Status.REJECTED, ReviewItem.Status.SENT_BACK)
# A queue's percentiles read at most this many of its newest verdicts in a window.
MAX_VERDICT_TIMES = 20_000
# Upper bounds (seconds) of the time-to-verdict histogram on /metrics.
TIME_TO_VERDICT_BUCKETS = (60.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 43200.0, 86400.0)


def percentile(values: Sequence[float], pct: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * pct / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True)
class VerdictTimes:
    """Admission to verdict over one window, in seconds; ``within_sla`` is the share decided within the SLA."""

    window: str
    n: int
    p50_seconds: float | None
    p95_seconds: float | None
    within_sla: float | None


def verdict_times(queue: Queue, window: str, *, now: datetime) -> VerdictTimes:
    """One queue's time to verdict over ``window`` ("hour" or "day"): the
    newest verdicts decided in the window, read through ``queue_verdicts_by_time``."""
    since = now - SLA_WINDOWS[window]
    rows = (
        ReviewItem.objects.filter(
            queue_id=queue.pk, status__in=HUMAN_DECIDED, decided_at__gt=since, decided_at__lte=now
        )
        .order_by("-decided_at")
        .values_list("created_at", "decided_at")[:MAX_VERDICT_TIMES]
    )
    waits = [max(0.0, (decided - created).total_seconds()) for created, decided in rows]
    sla = queue.sla_minutes * 60
    within = sum(1 for w in waits if w <= sla) / len(waits) if waits else None
    return VerdictTimes(window, len(waits), percentile(waits, 50), percentile(waits, 95), within)


def queue_forecast(queue: Queue, *, now: datetime, flow: Rates | None = None) -> policy.Forecast:
    """The breach forecast from the live pace: the default window's arrival
    and decision rates (the what-if's inputs), the kept depth and the oldest age."""
    flow = flow or rates(RATE_WINDOWS[DEFAULT_RATE_WINDOW], now=now, queue=queue)
    oldest = oldest_waiting_age(now=now, queue=queue)
    return policy.forecast(
        mode=policy.Mode(queue.mode),
        depth=queue.depth,
        marks=queue.watermarks(),
        arrivals_per_min=flow.arrivals_per_min,
        reviews_per_min=flow.decisions_per_min,
        oldest_minutes=None if oldest is None else oldest / 60,
        sla_minutes=queue.sla_minutes,
    )


def sla_figures(queue: Queue, *, now: datetime | None = None, flow: Rates | None = None) -> dict[str, Any]:
    """One queue's SLA at a glance, JSON-safe: time to verdict p50/p95 and
    the share within the SLA over the last hour and day, the oldest waiting
    age and the forecast (in minutes and in words)."""
    now = now or timezone.now()
    times = {name: verdict_times(queue, name, now=now) for name in SLA_WINDOWS}
    fc = queue_forecast(queue, now=now, flow=flow)
    return {
        "sla_minutes": queue.sla_minutes,
        "age_high_minutes": queue.age_high_minutes,
        "age_low_minutes": queue.age_low_minutes,
        "oldest_waiting_seconds": oldest_waiting_age(now=now, queue=queue),
        "time_to_verdict": {name: asdict(t) for name, t in times.items()},
        "forecast": {
            "minutes_to_high_watermark": fc.to_high_watermark,
            "minutes_to_sla_breach": fc.to_sla_breach,
            "stable": fc.stable,
            "text": policy.forecast_words(fc, sla_minutes=queue.sla_minutes, mode=policy.Mode(queue.mode)),
        },
    }


@dataclass(frozen=True)
class VerdictHistogram:
    """One queue's verdicts over the last day: cumulative counts per upper
    bound (seconds), the count, the sum, and how many were within its SLA."""

    buckets: list[tuple[float, int]]
    count: int
    sum_seconds: float
    within_sla: int

    @property
    def attainment(self) -> float | None:
        return self.within_sla / self.count if self.count else None


def verdict_histograms_by_queue(queues: Sequence[Queue], *, now: datetime | None = None) -> dict[int, VerdictHistogram]:
    """``VerdictHistogram`` of each queue, in one grouped query over the last
    day's human verdicts (the ``decided_at`` index bounds it); queues with
    none are absent. The SLA differs per queue, so each distinct SLA gets one
    filtered count over the queues that have it."""
    now = now or timezone.now()
    since = now - SLA_WINDOWS["day"]
    by_sla: dict[int, list[int]] = {}
    for q in queues:
        by_sla.setdefault(q.sla_minutes, []).append(q.pk)
    latency = ExpressionWrapper(F("decided_at") - F("created_at"), output_field=DurationField())
    counts: dict[str, Any] = {
        f"le{i}": Count("pk", filter=Q(decided_at__lte=F("created_at") + timedelta(seconds=bound)))
        for i, bound in enumerate(TIME_TO_VERDICT_BUCKETS)
    }
    for i, (minutes, pks) in enumerate(by_sla.items()):
        counts[f"sla{i}"] = Count(
            "pk", filter=Q(queue_id__in=pks, decided_at__lte=F("created_at") + timedelta(minutes=minutes))
        )
    rows = (
        ReviewItem.objects.filter(
            queue_id__in=[q.pk for q in queues], status__in=HUMAN_DECIDED, decided_at__gt=since, decided_at__lte=now
        )
        .values("queue_id")
        .annotate(n=Count("pk"), total=Sum(latency), **counts)
        .order_by()
    )
    out = {}
    for row in rows:
        total = row["total"]
        out[row["queue_id"]] = VerdictHistogram(
            buckets=[(bound, row[f"le{i}"]) for i, bound in enumerate(TIME_TO_VERDICT_BUCKETS)],
            count=row["n"],
            sum_seconds=total.total_seconds() if total is not None else 0.0,
            within_sla=sum(row[f"sla{i}"] for i in range(len(by_sla))),
        )
    return out
