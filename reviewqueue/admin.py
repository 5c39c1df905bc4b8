from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils import timezone

from . import models, services, webhooks
from .services import routing
from .views.auth import RateLimitedAdminAuthenticationForm
from .webhooks import CallbackRefused, check_callback_url

# The admin's sign-in counts against the same per-address limit as the site's.
admin.site.login_form = RateLimitedAdminAuthenticationForm


class ReadOnlyAdmin(admin.ModelAdmin):
    """The queue's books and logs: written only by the services (admit, claim,
    decide, the tuner, the sampler), so that produced = auto-passed + enqueued
    + shed always holds and every log stays append-only. Readable by anyone
    with the view permission (operators), writable by no one here."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(models.ReviewItem)
class ReviewItemAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "queue",
        "task_id",
        "status",
        "label",
        "draft",
        "priority",
        "cutoff_reason",
        "attempt_count",
        "created_at",
    )
    list_filter = ("queue", "status", "label", "draft", "cutoff_reason", "task_kind")
    # metadata: the producer's routing object, so an operator finds an item by its thread or trace id.
    search_fields = ("task_id", "idempotency_key", "source_run_id", "metadata", "task_description")
    readonly_fields = ("created_at", "updated_at", "claimed_at", "decided_at", "shed_at", "idempotency_key")
    raw_id_fields = ("lease_holder",)
    date_hierarchy = "created_at"


@admin.register(models.Verdict)
class VerdictAdmin(ReadOnlyAdmin):
    list_display = ("id", "queue", "item", "reviewer", "decision", "reason_label", "counts_for_tuner", "created_at")
    list_filter = ("queue", "decision", "reason_label", "counts_for_tuner")
    raw_id_fields = ("item", "reviewer")
    date_hierarchy = "created_at"


@admin.register(models.Queue)
class QueueAdmin(admin.ModelAdmin):
    """Queues are added through services.create_queue and changed through
    services.policy_update (validated and audited like the operator pages);
    a queue is archived or restored, never deleted: its items and history
    refer to it."""

    list_display = ("slug", "name", "capacity", "depth", "mode", "is_archived", "step_limit", "updated_at")
    list_filter = ("mode", ("archived_at", admin.EmptyFieldListFilter), "open_to_all")
    search_fields = ("slug", "name")
    filter_horizontal = ("members", "member_groups")
    # depth and mode are kept by the services under the row lock; an edit here would desynchronise them.
    # The tuner's expected step limit and the reviewers' reliability are the services' too.
    readonly_fields = (
        "mode",
        "depth",
        "gold_waiting",
        "expected_step_limit",
        "reliability",
        "archived_at",
        "created_at",
        "updated_at",
    )
    actions = ["archive", "restore"]

    @admin.display(description="archived", boolean=True)
    def is_archived(self, obj: models.Queue) -> bool:
        return obj.archived

    def get_readonly_fields(self, request, obj=None):  # type: ignore[no-untyped-def]
        # Producers and routing rules name a queue by its slug: it is chosen once.
        return (*self.readonly_fields, "slug") if obj is not None else self.readonly_fields

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def save_model(self, request, obj, form, change):  # type: ignore[no-untyped-def]
        # Through the services, so an admin edit is validated and audited like any other,
        # and the row's depth and mode (written under its lock) are never overwritten.
        changes = {name: getattr(obj, name) for name in models.Queue.EDITABLE_FIELDS}
        if change:
            services.policy_update(user=request.user, changes=changes, queue=obj)
        else:
            created = services.create_queue(user=request.user, slug=obj.slug, name=obj.name, settings=changes)
            obj.pk = created.pk
        models.Queue.objects.filter(pk=obj.pk).update(name=obj.name, open_to_all=obj.open_to_all)
        # No longer open to all: whoever reviewed it only so gives back what they hold of it
        # (members taken off are released by the signals the form's m2m save sends).
        services.release_lost_leases(queue_ids=[obj.pk])
        routing.forget()

    def _set_archived(self, request, queryset, archived: bool) -> None:  # type: ignore[no-untyped-def]
        done = 0
        for queue in queryset:
            try:
                services.archive_queue(queue=queue, user=request.user, archived=archived)
            except services.InvalidInput as exc:
                self.message_user(request, f"{queue.slug}: {exc.message}", level=messages.ERROR)
            else:
                done += 1
        self.message_user(request, f"{done} queue(s) {'archived' if archived else 'restored'}.")

    @admin.action(description="Archive selected queues (they accept nothing new)")
    def archive(self, request, queryset):  # type: ignore[no-untyped-def]
        self._set_archived(request, queryset, True)

    @admin.action(description="Restore selected queues")
    def restore(self, request, queryset):  # type: ignore[no-untyped-def]
        self._set_archived(request, queryset, False)


@admin.register(models.RoutingRule)
class RoutingRuleAdmin(admin.ModelAdmin):
    """Routing rules in the order they are tried (ARCHITECTURE.md, "Many queues").
    Written through services.routing, audited like the operator pages."""

    list_display = (
        "position",
        "producer",
        "task_kind",
        "min_priority",
        "max_priority",
        "task_id_prefix",
        "queue",
        "enabled",
    )
    list_editable = ("enabled",)
    list_filter = ("enabled", "queue")
    readonly_fields = ("created_at",)
    ordering = ("position", "id")

    def formfield_for_foreignkey(self, db_field, request, **kwargs):  # type: ignore[no-untyped-def]
        if db_field.name == "queue":
            # Only a queue that accepts work can be a rule's target.
            kwargs["queryset"] = models.Queue.objects.active()
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request, obj, form, change):  # type: ignore[no-untyped-def]
        routing.rule_save(rule=obj, user=request.user)

    def delete_model(self, request, obj):  # type: ignore[no-untyped-def]
        routing.rule_delete(rule_id=obj.pk, user=request.user)

    def delete_queryset(self, request, queryset):  # type: ignore[no-untyped-def]
        for rule_id in queryset.values_list("pk", flat=True):
            routing.rule_delete(rule_id=rule_id, user=request.user)


@admin.register(models.FilterRule)
class FilterRuleAdmin(admin.ModelAdmin):
    list_display = ("queue", "label", "gate", "status", "count_at_proposal", "proposed_at", "decided_by")
    list_filter = ("queue", "status")


@admin.register(models.LabelCount)
class LabelCountAdmin(ReadOnlyAdmin):
    list_display = ("queue", "label", "count")
    list_filter = ("queue",)


@admin.register(models.ModeChange)
class ModeChangeAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "queue", "previous", "mode", "depth")
    list_filter = ("queue", "mode")


@admin.register(models.CircuitBreakerEntry)
class CircuitBreakerEntryAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "item", "priority", "depth", "capacity", "incoming")
    # An entry belongs to its item's queue.
    list_filter = (("item__queue", admin.RelatedOnlyFieldListFilter),)
    raw_id_fields = ("item", "displaced_by")


@admin.register(models.StepLimitChange)
class StepLimitChangeAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "queue", "previous", "step_limit", "approve_rate", "changed_by")
    list_filter = ("queue",)
    raw_id_fields = ("verdict",)


@admin.register(models.PolicyAudit)
class PolicyAuditAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "queue", "user", "__str__")
    list_filter = ("queue",)


@admin.register(models.DepthSample)
class DepthSampleAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "queue", "depth", "pending", "claimed", "mode", "capacity", "step_limit")
    list_filter = ("queue",)


@admin.register(models.LoopRun)
class LoopRunAdmin(ReadOnlyAdmin):
    list_display = (
        "run_id",
        "task_id",
        "outcome",
        "stop_reason",
        "attempts",
        "draft",
        "sampled",
        "deliveries",
        "created_at",
    )
    list_filter = ("queue", "outcome", "stop_reason", "draft", "sampled")
    search_fields = ("run_id", "task_id")
    raw_id_fields = ("item",)


class ApiTokenForm(forms.ModelForm):
    """Scopes as checkboxes: the admin grants exactly what is ticked. The
    default webhook URL is checked against WEBHOOK_ALLOWED_HOSTS; its signing
    secret comes only from the commands, which show it once."""

    scopes = forms.MultipleChoiceField(
        choices=models.ApiToken.Scope.choices, widget=forms.CheckboxSelectMultiple, required=False
    )
    webhook_url = forms.URLField(
        required=False,
        max_length=2000,
        assume_scheme="https",
        help_text="default callback URL for this producer's events; its host must be in WEBHOOK_ALLOWED_HOSTS",
    )

    class Meta:
        model = models.ApiToken
        fields = ("name", "scopes", "webhook_url", "revoked_at")

    def clean_webhook_url(self) -> str:
        url = (self.cleaned_data.get("webhook_url") or "").strip()
        if url:
            try:
                check_callback_url(url)
            except CallbackRefused as exc:
                raise forms.ValidationError(exc.detail) from None
        return url


@admin.register(models.ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    form = ApiTokenForm
    list_display = ("name", "prefix", "scope_list", "webhook_url", "signs", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "token_hash", "created_at", "last_used_at", "signs")
    actions = ["revoke"]

    @admin.display(description="scopes")
    def scope_list(self, obj: models.ApiToken) -> str:
        return ", ".join(obj.scopes) or "none"

    @admin.display(description="webhook secret", boolean=True)
    def signs(self, obj: models.ApiToken) -> bool:
        """Whether it has a signing secret (never the secret: rotate_webhook_secret makes one)."""
        return bool(obj.webhook_secret)

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        # A token's secret is shown once, on a terminal: create_api_token
        # issues tokens. The admin edits scopes and revokes.
        return False

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request, queryset):  # type: ignore[no-untyped-def]
        queryset.filter(revoked_at=None).update(revoked_at=timezone.now())


@admin.register(models.WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    """The outbox, read-only like the queue's other books; an event is sent
    again only through the redeliver action (same id and body)."""

    list_display = ("event_id", "event_type", "url", "status", "attempts", "last_status_code", "last_attempt_at")
    list_filter = ("status", "event_type")
    search_fields = ("event_id", "url", "producer")
    raw_id_fields = ("item", "run")
    actions = ["redeliver"]

    @admin.action(description="Redeliver selected events (same event id)")
    def redeliver(self, request, queryset):  # type: ignore[no-untyped-def]
        again = webhooks.redeliver(list(queryset.values_list("pk", flat=True)))
        self.message_user(request, f"{again} event(s) will be sent again; events still pending were left as they are.")


@admin.register(models.GoldItem)
class GoldItemAdmin(ReadOnlyAdmin):
    """Gold items are marked from an item's page and retired from the review
    quality page or here (services.mark_gold and retire_gold keep the
    expectation consistent with the item's state)."""

    list_display = ("item", "expected_decision", "expected_label", "created_by", "created_at", "retired_at")
    list_filter = ("expected_decision", "expected_label", ("retired_at", admin.EmptyFieldListFilter))
    raw_id_fields = ("item", "created_by")
    date_hierarchy = "created_at"
    actions = ["retire"]

    @admin.action(description="Retire selected gold items (no longer served)")
    def retire(self, request, queryset):  # type: ignore[no-untyped-def]
        active = list(queryset.filter(retired_at=None).values_list("pk", flat=True))
        for gold_id in active:
            services.retire_gold(gold_id=gold_id, operator=request.user)
        self.message_user(request, f"{len(active)} gold item(s) retired.")


@admin.register(models.Judgement)
class JudgementAdmin(ReadOnlyAdmin):
    list_display = ("id", "item", "reviewer", "kind", "round", "decision", "reason_label", "correct", "created_at")
    list_filter = ("kind", "round", "decision", "reason_label", "correct")
    raw_id_fields = ("item", "reviewer")
    date_hierarchy = "created_at"


@admin.register(models.LeaseRecord)
class LeaseRecordAdmin(ReadOnlyAdmin):
    list_display = ("id", "item", "holder", "claimed_at", "renewals", "last_at", "expires_at", "released_at")
    raw_id_fields = ("item", "holder")
    date_hierarchy = "claimed_at"


@admin.register(models.UndoneAnswer)
class UndoneAnswerAdmin(ReadOnlyAdmin):
    list_display = ("id", "item", "reviewer", "kind", "round", "decision", "reason_label", "decided_at", "undone_at")
    list_filter = ("kind", "decision", "reason_label")
    raw_id_fields = ("item", "reviewer")
    date_hierarchy = "undone_at"


@admin.register(models.ReviewerStanding)
class ReviewerStandingAdmin(ReadOnlyAdmin):
    """Flags and pauses are set from gold answers; an operator clears them with
    the reinstate action (or on the review quality page), never by editing."""

    list_display = ("reviewer", "flagged_at", "paused_at", "reinstated_at", "reinstated_by", "updated_at")
    list_filter = (("flagged_at", admin.EmptyFieldListFilter), ("paused_at", admin.EmptyFieldListFilter))
    raw_id_fields = ("reviewer", "reinstated_by")
    actions = ["reinstate"]

    @admin.action(description="Reinstate selected reviewers (clear flag and pause)")
    def reinstate(self, request, queryset):  # type: ignore[no-untyped-def]
        ids = list(queryset.values_list("reviewer_id", flat=True))
        for reviewer_id in ids:
            services.reinstate(reviewer_id=reviewer_id, operator=request.user)
        self.message_user(request, f"{len(ids)} reviewer(s) reinstated.")


@admin.register(models.SimulationRun)
class SimulationRunAdmin(admin.ModelAdmin):
    list_display = ("id", "queue", "name", "status", "progress_done", "progress_total", "created_by", "created_at")
    list_filter = ("queue", "status")


@admin.register(models.ProviderIdentity)
class ProviderIdentityAdmin(admin.ModelAdmin):
    """Superusers link an existing account to its provider subject here
    (sign-in never links by email)."""

    list_display = ("user", "issuer", "subject", "last_sign_in_at")
    search_fields = ("user__username", "subject")
    readonly_fields = ("groups", "last_sign_in_at", "created_at")


@admin.register(models.RoleAudit)
class RoleAuditAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "user", "source", "__str__")
    list_filter = ("source",)
