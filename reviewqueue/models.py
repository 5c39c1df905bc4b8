"""The queue's tables. Row-level state changes live here as methods; writes that
touch several rows (admit, claim, decide) live in the services package."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Collection
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.db.models.expressions import RawSQL
from django.utils import timezone

from . import policy


class Mode(models.TextChoices):
    NORMAL = policy.Mode.NORMAL.value, "normal"
    DRAFT = policy.Mode.DRAFT.value, "draft"
    SHEDDING = policy.Mode.SHEDDING.value, "shedding"


class ReasonLabel(models.TextChoices):
    CODE_ERROR = "code_error", "code error"
    LOGIC_ERROR = "logic_error", "logic error"
    FORMAT_ISSUE = "format_issue", "format issue"
    HALLUCINATION = "hallucination", "hallucination"
    UNCLEAR = "unclear", "unclear"


assert tuple(ReasonLabel.values) == policy.REASON_LABELS


class CutoffReason(models.TextChoices):
    STEP_LIMIT = "step_limit", "step limit reached"
    STUCK = "stuck", "stuck: same failure repeated"
    OSCILLATION = "oscillation", "oscillation between failures"
    REGRESSION = "regression", "regression: later attempts got worse"
    WALL_CLOCK = "wall_clock", "wall-clock limit"
    TOKEN_BUDGET = "token_budget", "token budget spent"
    FORMAT_ANOMALY = "format_anomaly", "format anomaly"
    DRAFT = "draft", "draft mode: one attempt, no fix loop"
    SAMPLED = "sampled", "auto-passed, sampled for audit"
    EXTERNAL = "external", "pushed by a producer"


# The loops' cutoff reasons (loops.cutoff.CUTOFF_REASONS) come first, in their
# order; the queue adds its own two. Models import no loops module (the layer
# contracts in pyproject.toml), so a test holds the two lists together:
# tests/reviewqueue/policy/test_one_source.py.

# What a reviewer reads before judging, until an operator writes their own.
DEFAULT_INSTRUCTIONS = """\
**Approve** only output you would accept as the answer to the task, as it
stands. It is *unverified*: no check passed, so your approval is the only
check it gets, and the loop's step limit learns from your verdicts.

**Reject** anything wrong, incomplete or made up, and pick the reason that
fits the main problem; use *unclear* when the task itself is ambiguous.

**Skip** (`s`) when you cannot judge it: the item goes back to the queue for
someone else."""


DEFAULT_QUEUE = "default"


class QueueQuerySet(models.QuerySet["Queue"]):
    def active(self) -> QueueQuerySet:
        return self.filter(archived_at__isnull=True)

    def reviewable_by(self, user: Any) -> QueueQuerySet:
        """The queues whose items this user may review: those open to every
        reviewer, those naming the user, and those naming one of the user's
        groups. Archived queues stay in (their waiting items still need a
        verdict); callers that offer new work filter them as they need.
        A plain filter on the queue's pk (no join, no DISTINCT), so callers
        may annotate, order and filter it freely. The reviewer's prepared
        statements use its SQL twin, ``selectors.review.reviewable_sql``:
        change both together."""
        if not getattr(user, "is_authenticated", False):
            return self.none()
        mine = Queue.objects.filter(Q(open_to_all=True) | Q(members=user) | Q(member_groups__in=user.groups.all()))
        return self.filter(pk__in=mine.values("pk"))


# Per-queue settings that may be left blank (no alert; no escalation by time).
BLANK_ALLOWED = ("alert_age_minutes", "escalation_delay_minutes")


class Queue(models.Model):
    """One review queue: its name, its reviewers, its policy and the live
    state the policy drives (mode, kept depth, step limit). Each queue's row
    is that queue's lock: locking it serialises the admissions and verdicts
    of that queue alone, which keeps its watermark state machine consistent
    while other queues admit in parallel (ARCHITECTURE.md, "Many queues")."""

    slug = models.SlugField(
        max_length=50,
        unique=True,
        help_text="lowercase letters, digits and hyphens, starting with a letter; "
        "producers name the queue by it (POST /api/outputs, /api/tasks)",
    )
    name = models.CharField(max_length=100)
    open_to_all = models.BooleanField(
        default=False, help_text="every reviewer may review this queue, whatever the members below"
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="review_queues", help_text="reviewers of this queue"
    )
    member_groups = models.ManyToManyField(
        "auth.Group", blank=True, related_name="review_queues", help_text="groups whose users review this queue"
    )
    archived_at = models.DateTimeField(
        null=True, blank=True, help_text="archived: accepts nothing new, keeps its items and history"
    )
    created_at = models.DateTimeField(default=timezone.now)
    capacity = models.PositiveIntegerField(default=50)
    high_watermark = models.FloatField(default=0.8, help_text="fraction of capacity; above it: draft mode")
    low_watermark = models.FloatField(default=0.3, help_text="fraction of capacity; below it: normal flow")
    step_limit = models.PositiveIntegerField(default=5, help_text="live step limit for new loops")
    min_step_limit = models.PositiveIntegerField(default=3)
    max_step_limit = models.PositiveIntegerField(default=15)
    tuner_window = models.PositiveIntegerField(default=10)
    approve_low = models.FloatField(default=0.4, help_text="approve rate below this lowers the step limit")
    approve_high = models.FloatField(default=0.8, help_text="approve rate above this raises the step limit")
    label_threshold = models.PositiveIntegerField(default=3, help_text="a label seen more often proposes a filter rule")
    lease_seconds = models.PositiveIntegerField(default=300)
    sampling_rate = models.FloatField(default=0.1, help_text="share of grey-task auto-passes sampled for audit")
    instructions = models.TextField(
        default=DEFAULT_INSTRUCTIONS,
        blank=True,
        max_length=10_000,
        help_text="Markdown shown to reviewers on the review page and under ?: what Approve means here",
    )
    double_review_rate = models.FloatField(
        default=0.1, help_text="share of items a second reviewer judges without seeing the first verdict"
    )
    gold_rate = models.FloatField(
        default=0.02, help_text="share of real items admitted beside which a gold item's copy is placed"
    )
    gold_min_accuracy = models.FloatField(
        default=0.7, help_text="a reviewer whose accuracy on gold is below this, with enough gold answers, is flagged"
    )
    gold_min_answers = models.PositiveIntegerField(default=10, help_text="gold answers needed before flagging")
    gold_pause = models.BooleanField(default=False, help_text="pause a flagged reviewer from this queue")
    tuner_rule = models.CharField(
        max_length=16,
        choices=[(rule, rule.replace("_", "-")) for rule in policy.TUNER_RULES],
        default=policy.TUNER_RULES[0],
        help_text="plain counts every verdict alike; noise-aware weighs each by its reviewer's reliability",
    )
    expected_step_limit = models.FloatField(
        null=True, blank=True, help_text="the noise-aware tuner's fractional step limit; loops run it rounded"
    )
    reliability = models.JSONField(
        default=dict,
        blank=True,
        help_text="the reviewers' estimated error rates and the items' approve share, re-estimated from gold "
        "answers and double reviews (services.quality.reestimate)",
    )
    sla_minutes = models.PositiveIntegerField(
        default=60, help_text="target minutes from admission to verdict; the share within it is the SLA attainment"
    )
    age_high_minutes = models.FloatField(
        null=True,
        blank=True,
        help_text="age watermark: draft mode when the oldest waiting item is older than this, whatever the depth; "
        "blank: depth alone decides",
    )
    age_low_minutes = models.FloatField(
        null=True,
        blank=True,
        help_text="age watermark: normal flow again only when the oldest is younger than this (and depth is "
        "below the low watermark)",
    )
    sla_risk_minutes = models.PositiveIntegerField(
        default=15, help_text="alert 'SLA at risk' when the forecast puts a breach within this many minutes"
    )
    alert_age_minutes = models.FloatField(
        null=True, blank=True, help_text="alert when the oldest waiting item is older than this; blank: no such alert"
    )
    escalation_delay_minutes = models.FloatField(
        null=True,
        blank=True,
        default=60.0,
        help_text="a double review's disagreement waits this long for a third reviewer, then an operator settles "
        "it; 0: at once; blank: it waits for a third reviewer however long",
    )
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.NORMAL)
    depth = models.PositiveIntegerField(
        default=0,
        help_text="waiting items (pending + claimed), kept by the services under this row's lock "
        "so admission never counts rows; reconciled with a real count by the depth sampler",
    )
    gold_waiting = models.PositiveIntegerField(
        default=0,
        help_text="gold copies waiting (pending + claimed): with depth, the waiting count reviewers see; "
        "never in the depth the policy, producers and operators read",
    )
    updated_at = models.DateTimeField(auto_now=True)

    EDITABLE_FIELDS = (
        "capacity",
        "high_watermark",
        "low_watermark",
        "step_limit",
        "min_step_limit",
        "max_step_limit",
        "tuner_window",
        "approve_low",
        "approve_high",
        "label_threshold",
        "lease_seconds",
        "sampling_rate",
        "double_review_rate",
        "gold_rate",
        "gold_min_accuracy",
        "gold_min_answers",
        "gold_pause",
        "tuner_rule",
        "instructions",
        "sla_minutes",
        "age_high_minutes",
        "age_low_minutes",
        "sla_risk_minutes",
        "alert_age_minutes",
        "escalation_delay_minutes",
    )

    objects = QueueQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def archived(self) -> bool:
        return self.archived_at is not None

    @classmethod
    def default(cls) -> Queue:
        """The queue ``default``: where work goes when no routing rule matches.
        Created on first use (open to every reviewer) if it does not exist."""
        obj, _ = cls.objects.get_or_create(slug=DEFAULT_QUEUE, defaults={"name": "Default", "open_to_all": True})
        return obj

    @classmethod
    def current(cls, queue: Queue | int | None = None) -> Queue:
        """``queue`` read afresh (a row or its pk), or the default queue."""
        if queue is None:
            return cls.default()
        return cls.objects.get(pk=queue.pk if isinstance(queue, Queue) else queue)

    @classmethod
    def locked(cls, queue: Queue | int | None = None) -> Queue:
        """The queue's row under a row lock (the default queue when none is
        named); call inside transaction.atomic().

        The row lock is the queue's lock: every writer of the queue's state
        takes it here, or, for admit()'s one-statement path on PostgreSQL, by
        updating the row (see services.admission_pg.admit_one_statement)."""
        if queue is None:
            queue = cls.default()
        pk = queue.pk if isinstance(queue, Queue) else queue
        return cls.objects.select_for_update().get(pk=pk)

    @classmethod
    def locked_for_admission(
        cls, queue: Queue | int | None, producer: str, idempotency_key: str
    ) -> tuple[Queue, int | None, bool]:
        """The locked policy row (its ``depth`` is current: the lock serialises
        every change to it), then, in one query once the lock is held, the item
        this producer already admitted under this key (or None) and whether any filter rule
        is on. Two statements, not one: PostgreSQL evaluates subqueries of a
        ``SELECT ... FOR UPDATE`` with the snapshot taken before it waited for
        the lock, so a key committed meanwhile could be missed."""
        queue = cls.locked(queue)
        items = ReviewItem._meta.db_table
        rules = FilterRule._meta.db_table
        existing_pk, gates = (
            cls.objects.filter(pk=queue.pk)
            .annotate(
                existing_pk=RawSQL(
                    f"SELECT id FROM {items} WHERE producer = %s AND idempotency_key = %s",
                    (producer, idempotency_key),
                ),
                gates=RawSQL(
                    f"SELECT COUNT(*) FROM {rules} WHERE status = %s AND queue_id = %s",
                    (FilterRule.Status.ENABLED, queue.pk),
                ),
            )
            .values_list("existing_pk", "gates")
            .get()
        )
        return queue, existing_pk, bool(gates)

    @property
    def waiting(self) -> int:
        """The waiting count reviewers see: the depth and the gold copies
        waiting beside it, which they must not tell apart."""
        return self.depth + self.gold_waiting

    def watermarks(self) -> policy.Watermarks:
        return policy.Watermarks(
            capacity=self.capacity,
            high=self.high_watermark,
            low=self.low_watermark,
            age_high=self.age_high_minutes,
            age_low=self.age_low_minutes,
        )

    def tuner(self) -> policy.TunerConfig:
        return policy.TunerConfig(
            window=self.tuner_window,
            approve_high=self.approve_high,
            approve_low=self.approve_low,
            min_steps=self.min_step_limit,
            max_steps=self.max_step_limit,
        )

    def clean_fields(self, exclude: Collection[str] | None = None) -> None:
        # The slug's rule is policy.check_slug's, said by clean(): SlugField's
        # own validator would add a looser, contradicting message beside it.
        super().clean_fields(exclude={*(exclude or ()), "slug"})

    def clean(self) -> None:
        errors: dict[str, str] = {}
        try:
            policy.check_slug(self.slug)
        except policy.PolicyError as exc:
            errors["slug"] = exc.message
        if any(unicodedata.category(char) in ("Cc", "Zl", "Zp") for char in self.name):
            errors["name"] = "A queue's name is printable text: no control characters or line breaks."
        for build in (self.watermarks, self.tuner):
            try:
                build()
            except policy.PolicyError as exc:
                errors[exc.field] = exc.message
        values = {name: getattr(self, name) for name in self.EDITABLE_FIELDS}
        if not (
            policy.in_order("min_step_limit", "step_limit", values)
            and policy.in_order("step_limit", "max_step_limit", values)
        ):
            errors["step_limit"] = "must lie within [min_step_limit, max_step_limit]"
        # Every other bound, from the one table (the age marks are checked by
        # watermarks() above, both or neither; the alert age may be blank).
        for name, bound in policy.BOUNDS.items():
            value = values[name]
            if name not in errors and value is not None and not bound.holds(value):
                errors[name] = bound.text() + (", or blank" if name in BLANK_ALLOWED else "")
        if errors:
            raise ValidationError(errors)

    def snapshot(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.EDITABLE_FIELDS}


def default_queue_pk() -> int:
    """The default queue's pk: where a row made without naming its queue
    belongs (rows written before there were several queues, and tests)."""
    return Queue.default().pk


def queue_field(related_name: str, **options: Any) -> models.ForeignKey:
    """The ``queue`` column of a row that belongs to one queue. A queue is
    archived, never deleted, while anything refers to it."""
    return models.ForeignKey(
        Queue, on_delete=models.PROTECT, related_name=related_name, default=default_queue_pk, **options
    )


class RoutingRule(models.Model):
    """Send work that names no queue and matches this rule to ``queue``; the
    first enabled rule by position wins, and work no rule matches goes to the
    default queue (policy.route, ARCHITECTURE.md "Many queues")."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="routing_rules")
    position = models.PositiveIntegerField(default=0, help_text="rules are tried in increasing position")
    producer = models.CharField(max_length=100, blank=True, help_text="exact producer (token name); blank: any")
    task_kind = models.CharField(max_length=20, blank=True, help_text="exact task kind; blank: any")
    min_priority = models.IntegerField(null=True, blank=True, help_text="inclusive; blank: no lower bound")
    max_priority = models.IntegerField(null=True, blank=True, help_text="inclusive; blank: no upper bound")
    task_id_prefix = models.CharField(max_length=200, blank=True, help_text="task ids starting with this")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["position", "id"]

    def __str__(self) -> str:
        return f"#{self.position} -> {self.queue.slug}"

    def rule(self) -> policy.RoutingRule:
        return policy.RoutingRule(
            queue=self.queue.slug,
            producer=self.producer,
            task_kind=self.task_kind,
            min_priority=self.min_priority,
            max_priority=self.max_priority,
            task_id_prefix=self.task_id_prefix,
        )

    def clean(self) -> None:
        if self.min_priority is not None and self.max_priority is not None and self.min_priority > self.max_priority:
            raise ValidationError({"min_priority": "must not be above max_priority"})


# A double review whose three answers all differ waits in this round, which
# no reviewer claims: only an operator settles it (services.verdicts.settle).
OPERATOR_ROUND = 4


class QueueItems(models.Manager["ReviewItem"]):
    """The queue's items: everything but gold items' copies. A copy is served
    to one reviewer (services.review_quality) and must stay out of every count, list
    and export; only the lease and verdict services reach it, through
    ``ReviewItem.all_objects``."""

    def get_queryset(self) -> models.QuerySet[ReviewItem]:
        return super().get_queryset().filter(gold__isnull=True)


class ReviewItem(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        CLAIMED = "claimed"
        APPROVED = "approved"
        REJECTED = "rejected"
        SHED = "shed"
        FILTERED = "filtered", "rejected by a filter rule"
        SENT_BACK = "sent_back", "sent back with a note"
        GOLD = "gold", "gold answer: a gold item's copy, answered"

    class Label(models.TextChoices):
        UNVERIFIED = "unverified"
        SAMPLED = "sampled"

    WAITING = (Status.PENDING, Status.CLAIMED)
    DECIDED = (Status.APPROVED, Status.REJECTED, Status.FILTERED, Status.SENT_BACK)

    queue = queue_field("items")
    task_id = models.CharField(max_length=200, blank=True)
    task_kind = models.CharField(max_length=20, blank=True)
    task_description = models.TextField()
    final_output = models.TextField(blank=True)
    output_truncated = models.BooleanField(default=False)
    last_error = models.TextField(blank=True, help_text="the error of the reviewed attempt")
    attempt_count = models.PositiveIntegerField(default=0)
    reviewed_attempt = models.PositiveIntegerField(
        default=0, help_text="which attempt the output is (1-based): the best graded one; 0 when not known"
    )
    checks_passed = models.PositiveIntegerField(null=True, blank=True, help_text="hidden checks the output passes")
    checks_total = models.PositiveIntegerField(null=True, blank=True)
    reviewed_score = models.FloatField(
        null=True, blank=True, help_text="scored tasks: the stop rule's estimate of the reviewed attempt's quality"
    )
    # JSON text, not a JSONField: admit()'s one-statement path hands every
    # value to the database driver as it is, which a JSON value would not survive.
    failing_checks = models.TextField(
        blank=True, help_text='JSON list of the failing hidden checks, [{"id": ..., "about": ...}], in task order'
    )
    cutoff_reason = models.CharField(max_length=32, choices=CutoffReason.choices)
    label = models.CharField(max_length=16, choices=Label.choices, default=Label.UNVERIFIED)
    draft = models.BooleanField(default=False)
    priority = models.IntegerField(default=1, help_text="higher is more important; the lowest is shed first")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    lease_holder = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="leases"
    )
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lease_expiries = models.PositiveIntegerField(default=0, help_text="times a lease ran out before a verdict")
    source_run_id = models.CharField(max_length=200, blank=True)
    producer = models.CharField(
        max_length=100, blank=True, help_text="who pushed it: an API token's name, or loop:<agent> for built-in runs"
    )
    idempotency_key = models.CharField(max_length=200, help_text="unique per producer")
    filter_reason = models.TextField(blank=True)
    # Columns added since the first release carry database defaults too, so a
    # row written by plain SQL that does not name them (a bench, a script)
    # gets the same values as one written by the ORM.
    callback_url = models.URLField(
        max_length=2000,
        blank=True,
        db_default="",
        help_text="where this item's events are sent: the producer's or its token's URL",
    )
    version = models.PositiveIntegerField(
        default=1, db_default=1, help_text="2 and up: the output of a run resumed after a send-back"
    )
    previous_version = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="next_versions",
        help_text="the item this one's run was sent back from",
    )
    # JSON text, not a JSONField, for the reason failing_checks gives. The
    # producer's own: read back by it and by operators, never shown to reviewers.
    metadata = models.TextField(
        blank=True,
        default="",
        db_default="",
        help_text="the producer's JSON object for routing the verdict back (a thread id, say); "
        "never shown to reviewers",
    )
    review_round = models.PositiveSmallIntegerField(
        default=1,
        db_default=1,
        help_text="the review the item waits for: 1; 2, a second reviewer's, blind (double review); "
        "3, a third reviewer's, after the two disagreed; 4, an operator's, after three disagreed",
    )
    gold = models.ForeignKey(
        "GoldItem",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="copies",
        help_text="set on a gold item's copy: placed beside a real item at its admission, answered by one "
        "reviewer; never in the depth",
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True, db_index=True)
    shed_at = models.DateTimeField(null=True, blank=True)

    objects = QueueItems()
    all_objects = models.Manager()

    class Meta:
        base_manager_name = "all_objects"
        permissions = [
            ("review", "Can claim and decide review items"),
            ("operate", "Can operate the queue: dashboard, policy, what-if, export"),
        ]
        constraints = [
            # Keys belong to one producer: two producers may pick the same key.
            # Its index also serves admit()'s duplicate lookup by (producer, key).
            models.UniqueConstraint(fields=["producer", "idempotency_key"], name="item_key_per_producer"),
        ]
        indexes = [
            # claim(): a queue's next waiting item by priority, then age.
            models.Index(
                fields=["queue", "-priority", "created_at", "id"],
                name="queue_next_item",
                condition=Q(status__in=["pending", "claimed"]),
            ),
            # admit(): a queue's shedding candidate, lowest priority, oldest first.
            models.Index(
                fields=["queue", "priority", "created_at"], name="queue_shed_order", condition=Q(status="pending")
            ),
            # the lease sweep and depth counts.
            models.Index(fields=["status", "lease_expires_at"], name="status_lease"),
            # The oldest waiting item and the depth count read only waiting rows,
            # never the decided history (1M rows must cost what 1k rows cost).
            models.Index(fields=["created_at"], name="waiting_by_age", condition=Q(status__in=["pending", "claimed"])),
            models.Index(
                fields=["queue", "created_at"],
                name="queue_waiting_by_age",
                condition=Q(status__in=["pending", "claimed"]),
            ),
            # Time to verdict over the last hour and day (the SLA figures) reads
            # only a queue's recent human verdicts.
            models.Index(
                fields=["queue", "decided_at"],
                name="queue_verdicts_by_time",
                condition=Q(status__in=["approved", "rejected", "sent_back"]),
            ),
            # The item list's keyset pages, newest first (selectors.items.page_of):
            # all items, one queue's, one producer's (GET /api/items).
            models.Index(fields=["created_at", "id"], name="item_keyset"),
            models.Index(fields=["queue", "created_at", "id"], name="item_queue_keyset"),
            models.Index(fields=["producer", "created_at", "id"], name="item_producer_keyset"),
            # The audit share reads the newest decided sampled auto-passes only.
            models.Index(
                fields=["-decided_at"],
                name="sampled_decided",
                condition=Q(label="sampled", status__in=["approved", "rejected"]),
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.task_id or 'item'} ({self.status})"

    def candidate(self) -> policy.Candidate:
        return policy.Candidate(priority=self.priority, arrived=self.created_at.timestamp(), key=self.pk)

    def failing_check_list(self) -> list[dict[str, str]]:
        """The failing checks with the reviewer's description of each; [] when
        none were recorded (or the stored text is not the list it should be)."""
        try:
            value: Any = json.loads(self.failing_checks) if self.failing_checks else []
        except ValueError:
            return []
        if not isinstance(value, list):
            return []
        return [
            {"id": str(c.get("id", "")), "about": str(c.get("about") or "")}
            for c in value
            if isinstance(c, dict) and c.get("id")
        ]

    def metadata_object(self) -> dict[str, Any]:
        """The producer's metadata as it sent it; {} when it sent none."""
        try:
            value: Any = json.loads(self.metadata) if self.metadata else {}
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    @property
    def reviewed_is_earlier(self) -> bool:
        """The output is an earlier attempt than the last: a later one was worse."""
        return 0 < self.reviewed_attempt < self.attempt_count

    def lease_seconds_left(self, now: object = None) -> int:
        if self.status != self.Status.CLAIMED or self.lease_expires_at is None:
            return 0
        now = now or timezone.now()
        return max(0, int((self.lease_expires_at - now).total_seconds()))  # type: ignore[operator]


class Verdict(models.Model):
    class Decision(models.TextChoices):
        APPROVE = "approve"
        REJECT = "reject"
        EDIT = "edit", "approved with edits"
        SEND_BACK = "send_back", "sent back with a note"

    item = models.OneToOneField(ReviewItem, on_delete=models.CASCADE, related_name="verdict")
    queue = queue_field("verdicts", help_text="the item's queue, kept here for the tuner's window")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="verdicts"
    )
    decision = models.CharField(max_length=16, choices=Decision.choices)
    reason_label = models.CharField(max_length=20, choices=ReasonLabel.choices, blank=True)
    note = models.TextField(blank=True)
    edited_output = models.TextField(
        blank=True, db_default="", help_text="edit and approve: the reviewer's corrected output"
    )
    counts_for_tuner = models.BooleanField(default=True, help_text="verdicts on sampled auto-passes do not tune")
    settled_by = models.CharField(
        max_length=16,
        choices=[
            ("reviewer", "one reviewer"),
            ("agreement", "two reviewers agreed"),
            ("tiebreak", "a third reviewer broke the tie"),
            ("operator", "an operator settled a disagreement"),
        ],
        default="reviewer",
        db_default="reviewer",
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        indexes = [
            models.Index(fields=["reviewer", "-created_at"], name="verdict_by_reviewer"),
            # the tuner's window: a queue's newest verdicts that tune
            models.Index(
                fields=["queue", "-created_at"], name="verdict_tuning_by_queue", condition=Q(counts_for_tuner=True)
            ),
        ]
        constraints = [
            models.CheckConstraint(condition=~Q(decision="reject") | ~Q(reason_label=""), name="reject_needs_label"),
            models.CheckConstraint(condition=~Q(decision="edit") | ~Q(edited_output=""), name="edit_needs_output"),
            models.CheckConstraint(condition=~Q(decision="send_back") | ~Q(note=""), name="send_back_needs_note"),
        ]

    def __str__(self) -> str:
        return f"{self.decision} #{self.item_id}"

    @property
    def approved(self) -> bool:
        """The output was accepted: as it was, or as the reviewer corrected it."""
        return policy.counts_as_approval(self.decision)


class GoldItem(models.Model):
    """A decided item an operator vouches for: its right decision (and, for a
    rejection, its label) is known. Copies of it are served to reviewers at
    the policy's ``gold_rate`` and look like any other item; their answers
    measure the reviewer and go nowhere else."""

    class Expected(models.TextChoices):
        APPROVE = "approve"
        REJECT = "reject"

    item = models.OneToOneField(ReviewItem, on_delete=models.CASCADE, related_name="gold_spec")
    expected_decision = models.CharField(max_length=16, choices=Expected.choices)
    expected_label = models.CharField(
        max_length=20, choices=ReasonLabel.choices, blank=True, help_text="a rejection's right label, if one is"
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(default=timezone.now)
    retired_at = models.DateTimeField(null=True, blank=True, help_text="no longer served")

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(expected_decision="reject") | Q(expected_label=""), name="gold_label_only_on_reject"
            )
        ]

    def __str__(self) -> str:
        label = f" ({self.expected_label})" if self.expected_label else ""
        return f"gold #{self.item_id}: {self.expected_decision}{label}"


class Judgement(models.Model):
    """One reviewer's own answer on an item that more than one person judges:
    a double-reviewed item (rounds 1, 2 and, after a disagreement, 3) or a
    gold item's copy. The item's settled verdict is its ``Verdict``; a gold
    copy never has one. Agreement and reviewer reliability are computed from
    these rows (reviewqueue/agreement.py)."""

    class Kind(models.TextChoices):
        REVIEW = "review", "double review"
        GOLD = "gold"

    item = models.ForeignKey(ReviewItem, on_delete=models.CASCADE, related_name="judgements")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="judgements"
    )
    kind = models.CharField(max_length=8, choices=Kind.choices)
    round = models.PositiveSmallIntegerField(default=1)
    decision = models.CharField(max_length=16, choices=Verdict.Decision.choices)
    reason_label = models.CharField(max_length=20, choices=ReasonLabel.choices, blank=True)
    note = models.TextField(blank=True)
    edited_output = models.TextField(blank=True)
    correct = models.BooleanField(null=True, blank=True, help_text="gold: the decision was the expected one")
    label_correct = models.BooleanField(
        null=True, blank=True, help_text="gold: a rejection carried the expected label (when one is expected)"
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "reviewer"], name="one_judgement_per_reviewer")]
        indexes = [
            models.Index(fields=["reviewer", "kind", "-created_at"], name="judgement_by_reviewer"),
            # the review page's recent answers and last hour: a reviewer's newest first, any kind
            models.Index(fields=["reviewer", "-created_at"], name="judgement_by_reviewer_time"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.decision} #{self.item_id}"

    @property
    def approved(self) -> bool:
        return policy.counts_as_approval(self.decision)


class LeaseRecord(models.Model):
    """What became of a lease its reviewer worked under or gave back, kept as
    one row per lease: the item, its holder and the claim the lease began
    with, how many times the review page renewed it (the first and the last
    time, and where the last renewal moved its end), and when its holder gave
    the item back (a skip). A page renews every minute while its reviewer
    works, so a row per renewal would grow by one per reviewer-minute all
    day; this row grows by one per lease that was renewed or skipped, and a
    renewal changes only columns no index holds (an in-place update on
    PostgreSQL).

    Written by ``services.renew`` and ``services.release`` under the item's
    row lock, never on the claim or the verdict, so the reviewer's keypress
    sends no statement more. A lease that ended in an answer needs no row:
    the answer is the item's timeline line. The timeline reads it
    (ARCHITECTURE.md, "Finding items")."""

    # No index of its own: the unique constraint's index leads with the item.
    item = models.ForeignKey(ReviewItem, on_delete=models.CASCADE, related_name="lease_records", db_index=False)
    holder = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    claimed_at = models.DateTimeField(help_text="when the lease began: with the item and holder, which lease")
    renewals = models.PositiveIntegerField(default=0)
    first_at = models.DateTimeField(null=True, blank=True, help_text="the first renewal")
    last_at = models.DateTimeField(null=True, blank=True, help_text="the latest renewal")
    expires_at = models.DateTimeField(help_text="the lease's end as its claim or latest renewal set it")
    released_at = models.DateTimeField(null=True, blank=True, help_text="when its holder gave the item back (a skip)")

    class Meta:
        constraints = [
            # One row per lease; its index is also renew's lookup and the timeline's (by item).
            models.UniqueConstraint(fields=["item", "claimed_at", "holder"], name="one_record_per_lease")
        ]

    def __str__(self) -> str:
        skipped = ", skipped" if self.released_at else ""
        return f"lease on #{self.item_id} renewed {self.renewals}x{skipped}"


class UndoneAnswer(models.Model):
    """An answer its reviewer took back inside the undo window: what it
    decided, who gave it, when, and when it was undone. Undo deletes the
    verdict (or the double review's answer) it takes back, since the item's
    outcome, the tuner and the producer must never see it; this row keeps
    the fact for the item's timeline and the admin. Written only by
    ``services.undo``, which is its own request."""

    class Kind(models.TextChoices):
        VERDICT = "verdict", "the item's verdict"
        REVIEW = "review", "a double review's answer"
        GOLD = "gold", "a gold item's answer"

    item = models.ForeignKey(ReviewItem, on_delete=models.CASCADE, related_name="undone_answers")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    round = models.PositiveSmallIntegerField(default=1, help_text="the review round the answer was given in")
    decision = models.CharField(max_length=16, choices=Verdict.Decision.choices)
    reason_label = models.CharField(max_length=20, choices=ReasonLabel.choices, blank=True)
    note = models.TextField(blank=True)
    settled_by = models.CharField(max_length=16, blank=True, help_text="a verdict: how it had settled the item")
    decided_at = models.DateTimeField(help_text="when the answer was given")
    undone_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"undone {self.decision} #{self.item_id}"


class ReviewerStanding(models.Model):
    """A reviewer's standing in the queue: flagged when their accuracy on
    gold falls below the policy's bar with enough answers, paused from the
    queue when the policy says so, until an operator reinstates them."""

    reviewer = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="standing")
    flagged_at = models.DateTimeField(null=True, blank=True)
    paused_at = models.DateTimeField(null=True, blank=True, help_text="paused reviewers claim nothing")
    reinstated_at = models.DateTimeField(
        null=True, blank=True, help_text="gold answers before this no longer count towards a flag"
    )
    reinstated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        state = "paused" if self.paused_at else "flagged" if self.flagged_at else "in good standing"
        return f"{self.reviewer} ({state})"


class LabelCount(models.Model):
    """How often a queue's settled rejections carried each reason label."""

    queue = queue_field("label_counts")
    label = models.CharField(max_length=20, choices=ReasonLabel.choices)
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["queue", "label"], name="label_count_per_queue")]

    def __str__(self) -> str:
        return f"{self.label}: {self.count}"


class FilterRule(models.Model):
    """A cheap mechanical gate proposed by a recurring rejection label; an
    operator enables or dismisses it. Enabled gates run before output reaches
    a human (in the loop as a pre-gate, and in admit())."""

    class Status(models.TextChoices):
        PROPOSED = "proposed"
        ENABLED = "enabled"
        DISMISSED = "dismissed"

    queue = queue_field("filter_rules")
    label = models.CharField(max_length=20, choices=ReasonLabel.choices)
    gate = models.CharField(max_length=50)
    description = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PROPOSED)
    count_at_proposal = models.PositiveIntegerField(default=0)
    proposed_at = models.DateTimeField(default=timezone.now)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["queue", "label"], name="filter_rule_per_queue")]

    def __str__(self) -> str:
        return f"{self.gate} ({self.status})"


class ModeChange(models.Model):
    queue = queue_field("mode_changes")
    previous = models.CharField(max_length=16, choices=Mode.choices)
    mode = models.CharField(max_length=16, choices=Mode.choices)
    depth = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return f"{self.previous} -> {self.mode} at depth {self.depth}"


class CircuitBreakerEntry(models.Model):
    """One shed item: what, when, at which priority, and why."""

    item = models.ForeignKey(ReviewItem, on_delete=models.CASCADE, related_name="shed_entries")
    priority = models.IntegerField()
    depth = models.PositiveIntegerField()
    capacity = models.PositiveIntegerField()
    incoming = models.BooleanField(help_text="the arriving item itself was the lowest priority")
    displaced_by = models.ForeignKey(
        ReviewItem, null=True, blank=True, on_delete=models.SET_NULL, related_name="displaced"
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        verbose_name_plural = "circuit-breaker log"

    def __str__(self) -> str:
        return f"shed #{self.item_id} (priority {self.priority})"


class StepLimitChange(models.Model):
    queue = queue_field("step_limit_changes")
    previous = models.PositiveIntegerField()
    step_limit = models.PositiveIntegerField()
    approve_rate = models.FloatField(null=True, blank=True)
    verdict = models.ForeignKey(Verdict, null=True, blank=True, on_delete=models.SET_NULL)
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return f"{self.previous} -> {self.step_limit}"


class PolicyAudit(models.Model):
    """Who changed the policy, when, and each field's before -> after."""

    queue = queue_field("policy_audits")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    changes = models.JSONField(help_text='{"field": [before, after]}')
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        verbose_name_plural = "policy audit log"

    def __str__(self) -> str:
        return ", ".join(f"{k}: {v[0]} -> {v[1]}" for k, v in self.changes.items())


class DepthSample(models.Model):
    """Queue depth sampled by a periodic task; the dashboard reads a bounded
    window of these instead of scanning item history."""

    queue = queue_field("depth_samples")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    depth = models.PositiveIntegerField()
    pending = models.PositiveIntegerField()
    claimed = models.PositiveIntegerField()
    mode = models.CharField(max_length=16, choices=Mode.choices)
    capacity = models.PositiveIntegerField()
    step_limit = models.PositiveIntegerField()

    class Meta:
        indexes = [models.Index(fields=["queue", "-created_at"], name="depth_sample_by_queue")]

    def __str__(self) -> str:
        return f"{self.created_at:%H:%M:%S} depth {self.depth}"


class LoopRun(models.Model):
    """One run of an agent loop, keyed by (producer, run id) so a redelivered
    Celery task finds its earlier outcome instead of producing a second output,
    and two producers may use the same run id without meeting."""

    class Outcome(models.TextChoices):
        RUNNING = "running"
        AUTO_PASSED = "auto_passed", "auto-passed"
        ENQUEUED = "enqueued"
        SHED = "shed"
        FILTERED = "filtered"
        DUPLICATE = "duplicate"
        FAILED = "failed"

    queue = queue_field("runs", help_text="the queue the run was routed to: its step limit, its verdicts")
    run_id = models.CharField(max_length=200, help_text="unique per producer")
    producer = models.CharField(
        max_length=100, blank=True, help_text="the API token's name that submitted it; blank for operators' runs"
    )
    task_id = models.CharField(max_length=200)
    task_kind = models.CharField(max_length=20, blank=True)
    task = models.JSONField(help_text="the task as submitted")
    agent = models.CharField(max_length=50, default="scripted")
    agent_options = models.JSONField(default=dict, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.RUNNING)
    stop_reason = models.CharField(max_length=32, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    tokens = models.PositiveIntegerField(default=0)
    grades = models.JSONField(
        default=list, blank=True, help_text="hidden checks passed by each attempt, in order (never the checks)"
    )
    scores = models.JSONField(default=list, blank=True, help_text="scored tasks: each attempt's score")
    checks_total = models.PositiveIntegerField(null=True, blank=True)
    reviewed_attempt = models.PositiveIntegerField(default=0, help_text="the attempt handed over (1-based)")
    step_limit = models.PositiveIntegerField(null=True, blank=True)
    draft = models.BooleanField(default=False)
    sampled = models.BooleanField(default=False)
    deliveries = models.PositiveIntegerField(default=0, help_text="times a worker started this run")
    item = models.ForeignKey(ReviewItem, null=True, blank=True, on_delete=models.SET_NULL)
    error = models.TextField(blank=True)
    callback_url = models.URLField(max_length=2000, blank=True, help_text="where this run's events are sent")
    resumed_from = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="resumes",
        help_text="the run whose item a reviewer sent back; this run starts from its output",
    )
    resume_note = models.TextField(blank=True, help_text="the reviewer's note, redacted, added to the next prompt")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(default=timezone.now, help_text="last start or resubmission")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # Run ids belong to one producer; the index serves the lookup by (producer, run id).
            models.UniqueConstraint(fields=["producer", "run_id"], name="run_id_per_producer"),
        ]
        indexes = [models.Index(fields=["outcome", "updated_at"], name="looprun_outcome_updated")]

    def __str__(self) -> str:
        return f"{self.run_id} ({self.outcome})"


# Items from operators' loop runs are filed under producer names with this
# prefix (``loop:<agent>``); no token may take one.
RESERVED_PRODUCER_PREFIX = "loop:"


class ApiToken(models.Model):
    """A producer's API token. Only a hash is stored; the token is shown once.

    The token's name is its producer's identity: items and runs carry it, and
    idempotency keys and run ids are unique per name, so a replacement token
    issued under the same name keeps seeing its producer's runs. A token may
    do only what its scopes allow (least privilege: grant what the producer
    needs, nothing by default beyond pushing outputs)."""

    class Scope(models.TextChoices):
        OUTPUTS = "outputs", "outputs: push outputs (POST /api/outputs) and read their status"
        TASKS = "tasks", "tasks: submit tasks for agent loops (POST /api/tasks) and read their runs"
        METRICS = "metrics", "metrics: scrape /metrics"

    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, db_index=True)
    token_hash = models.CharField(max_length=128, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    scopes = models.JSONField(default=list, blank=True, help_text="what this token may do: outputs, tasks, metrics")
    webhook_url = models.URLField(
        max_length=2000, blank=True, help_text="default callback URL for this producer's items and runs"
    )
    # Kept as it is, not hashed: the server signs every event with it. Shown once.
    webhook_secret = models.CharField(max_length=100, blank=True, editable=False)

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def has_scope(self, scope: str) -> bool:
        return isinstance(self.scopes, list) and scope in self.scopes

    @staticmethod
    def checked_name(name: str) -> str:
        """The one rule for a token's name, wherever a token is issued or
        renamed (``create_api_token``, ``issue_token``, the admin): 1 to 100
        printable characters, never a built-in loop run's ``loop:`` producer
        name. Answers the name stripped; ValueError says what is wrong."""
        name = (name or "").strip()
        if not name or len(name) > 100 or not name.isprintable():
            raise ValueError("a token's name is 1 to 100 printable characters")
        if name.startswith(RESERVED_PRODUCER_PREFIX):
            raise ValueError(f"names starting with {RESERVED_PRODUCER_PREFIX!r} are kept for built-in loop runs")
        return name

    def clean(self) -> None:
        try:
            self.name = self.checked_name(self.name)
        except ValueError as exc:
            raise ValidationError({"name": str(exc)}) from None
        known = ", ".join(self.Scope.values)
        if not isinstance(self.scopes, list):
            raise ValidationError({"scopes": f"a list of scopes, from {known}"})
        unknown = sorted({str(scope) for scope in self.scopes} - set(self.Scope.values))
        if unknown:
            raise ValidationError({"scopes": f"unknown scopes: {', '.join(unknown)}; known: {known}"})


class SimulationRun(models.Model):
    """A what-if simulation an operator asked for, run by a Celery task."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    queue = queue_field("simulation_runs", help_text="the queue whose live data and policy it started from")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    name = models.CharField(max_length=100, blank=True)
    params = models.JSONField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"what-if #{self.pk} ({self.status})"


class EventType(models.TextChoices):
    """What a webhook tells a producer (docs/API.md, webhooks)."""

    ITEM_DECIDED = "item.decided"
    ITEM_SENT_BACK = "item.sent_back"
    ITEM_SHED = "item.shed"
    ITEM_FILTERED = "item.filtered"
    RUN_FINISHED = "run.finished"
    QUEUE_MODE_CHANGED = "queue.mode_changed"
    QUEUE_SLA_AT_RISK = "queue.sla_at_risk"
    QUEUE_SLA_BREACHED = "queue.sla_breached"
    QUEUE_RECOVERED = "queue.recovered"


class WebhookDelivery(models.Model):
    """The outbox: one event for one callback URL, written in the same
    transaction as the change it reports, so no event is lost between the
    commit and the broker. Delivery tasks and the sweep send it until the
    receiver answers 2xx or the retry schedule runs out (at least once;
    receivers dedupe on the event id). Events with the same ordering key (one
    item's, or one run's) are sent in the order they were written."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed", "gave up"

    event_id = models.CharField(max_length=40, unique=True)
    event_type = models.CharField(max_length=32, choices=EventType.choices)
    url = models.URLField(max_length=2000)
    producer = models.CharField(max_length=100, help_text="whose token's secret signs it")
    item = models.ForeignKey(
        ReviewItem, null=True, blank=True, on_delete=models.SET_NULL, related_name="webhook_deliveries"
    )
    run = models.ForeignKey(
        LoopRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="webhook_deliveries"
    )
    ordering_key = models.CharField(max_length=64, help_text="item:<id> or run:<id>: delivered in order within a key")
    body = models.TextField(help_text="the exact JSON sent, so every attempt signs the same bytes")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    locked_until = models.DateTimeField(null=True, blank=True, help_text="an attempt is under way until then")
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "webhook deliveries"
        indexes = [
            # the sweep: pending deliveries that are due.
            models.Index(fields=["next_attempt_at"], name="delivery_due", condition=Q(status="pending")),
            # ordering: an earlier pending delivery with the same key holds the later ones back.
            models.Index(fields=["ordering_key", "id"], name="delivery_pending_order", condition=Q(status="pending")),
            # the dashboard's failing endpoints and the deliveries page.
            models.Index(fields=["url", "-created_at"], name="delivery_by_url"),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.event_id} ({self.status})"


class ProviderIdentity(models.Model):
    """A user's account at the OpenID Connect provider: the provider's stable
    subject (``sub``) under its issuer. Sign-in finds the user by this pair,
    never by email, which a provider lets people change and reuse."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="provider_identities")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255, help_text="the provider's sub claim")
    created_at = models.DateTimeField(default=timezone.now)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)
    groups = models.JSONField(default=list, blank=True, help_text="the groups claim at the last sign-in")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="one_user_per_provider_subject")]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class RoleAudit(models.Model):
    """Role and group changes that came from the identity provider's groups
    claim at a sign-in: whose, when, and each role's before -> after."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="role_audits")
    source = models.CharField(max_length=255, help_text="the provider's issuer")
    changes = models.JSONField(help_text='{"reviewer": [before, after], "groups": [[...], [...]]}')
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        verbose_name_plural = "role audit log"

    def __str__(self) -> str:
        return ", ".join(f"{k}: {v[0]} -> {v[1]}" for k, v in self.changes.items())


# --- alerts (ARCHITECTURE.md, "Warn before it overflows") ---


class AlertCondition(models.TextChoices):
    """What an alert is about. The first four are a queue's; the rest are the team's."""

    MODE = "mode", "queue left normal flow (draft or shedding)"
    SHEDDING = "shedding", "queue at capacity, shedding work"
    SLA_AT_RISK = "sla_at_risk", "SLA breach forecast within the horizon"
    SLA_BREACHED = "sla_breached", "an item has waited longer than the SLA"
    OLDEST_AGE = "oldest_age", "oldest waiting item over its age limit"
    WEBHOOKS_FAILING = "webhooks_failing", "webhook deliveries failing"
    SANDBOX_UNAVAILABLE = "sandbox_unavailable", "red-line sandbox unavailable"
    REVIEWER_PAUSED = "reviewer_paused", "a reviewer paused by gold"


class AlertChannel(models.Model):
    """Where alerts go: an Apprise URL (chat, email, generic JSON...) or the
    signed webhook of a producer's token. With no queue, the channel is
    team-wide and hears every alert."""

    class Kind(models.TextChoices):
        APPRISE = "apprise", "Apprise URL (Slack, Teams, Discord, email, JSON, ...)"
        WEBHOOK = "webhook", "signed webhook of an API token"

    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.APPRISE)
    queue = models.ForeignKey(
        Queue,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="alert_channels",
        help_text="blank: team-wide, every queue's alerts and the team's",
    )
    # An Apprise URL carries its credentials (a bot token, a password): shown masked, never logged.
    url = models.TextField(blank=True, help_text="the Apprise URL (kind apprise)")
    producer = models.CharField(
        max_length=100, blank=True, help_text="the API token whose webhook URL and secret are used (kind webhook)"
    )
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["queue_id", "name", "id"]

    def __str__(self) -> str:
        return self.name


class AlertEpisode(models.Model):
    """One condition's episode state for one queue (or the team) and one
    subject (a reviewer's name; blank for most): the hysteresis of
    ``policy.step_alert``, kept between evaluations."""

    queue = models.ForeignKey(Queue, null=True, blank=True, on_delete=models.CASCADE, related_name="alert_episodes")
    # "queue:<pk>" or "team": NULL is never equal to NULL in a unique index, a key is.
    scope = models.CharField(max_length=40)
    condition = models.CharField(max_length=32, choices=AlertCondition.choices)
    subject = models.CharField(max_length=150, blank=True, default="")
    firing = models.BooleanField(default=False)
    clear_since = models.DateTimeField(null=True, blank=True)
    recovered_at = models.DateTimeField(null=True, blank=True)
    detail = models.CharField(max_length=200, blank=True, help_text="what the last alert said, e.g. the mode")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope", "condition", "subject"], name="one_episode_per_condition")
        ]


class Alert(models.Model):
    """One message that went out: an episode fired or recovered, or a test.
    ``deliveries`` records each channel tried and its outcome."""

    class Kind(models.TextChoices):
        FIRED = "fired"
        RECOVERED = "recovered"
        TEST = "test"

    queue = models.ForeignKey(Queue, null=True, blank=True, on_delete=models.CASCADE, related_name="alerts")
    condition = models.CharField(max_length=32, choices=AlertCondition.choices)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    subject = models.CharField(max_length=150, blank=True, default="")
    title = models.CharField(max_length=200)
    body = models.TextField()
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    deliveries = models.JSONField(default=list, blank=True, help_text='[{"channel", "kind", "ok", "detail"}]')
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    acknowledged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.condition} {self.created_at:%Y-%m-%d %H:%M}"
