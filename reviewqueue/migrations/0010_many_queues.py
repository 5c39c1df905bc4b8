"""Many queues: the one policy row becomes the queue ``default``, and every
row that belongs to a queue (items, runs, label counts, filter rules, mode and
step-limit changes, policy audits, depth samples, what-ifs) is given to it.
Nothing is dropped: the label counts move to a table keyed by (queue, label)
row for row. Reversible down to one queue: the reverse keeps the default
queue's rows and refuses while another queue holds any."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

import reviewqueue.models


def name_the_default_queue(apps, schema_editor):
    Queue = apps.get_model("reviewqueue", "Queue")
    rows = list(Queue.objects.order_by("pk"))
    if not rows:
        rows = [Queue.objects.create()]
    first, *others = rows
    Queue.objects.filter(pk=first.pk).update(slug="default", name="Default", open_to_all=True)
    for row in others:  # never more than one before this migration; named so it cannot fail
        Queue.objects.filter(pk=row.pk).update(slug=f"queue-{row.pk}", name=f"Queue {row.pk}")


def give_rows_to_default(apps, schema_editor):
    Queue = apps.get_model("reviewqueue", "Queue")
    default = Queue.objects.get(slug="default")
    for model, _, _ in QUEUED_ROWS:
        apps.get_model("reviewqueue", model).objects.filter(queue__isnull=True).update(queue=default)
    Old = apps.get_model("reviewqueue", "LegacyLabelCount")
    LabelCount = apps.get_model("reviewqueue", "LabelCount")
    LabelCount.objects.bulk_create(
        LabelCount(queue=default, label=row.label, count=row.count) for row in Old.objects.all()
    )


def back_to_one_queue(apps, schema_editor):
    Queue = apps.get_model("reviewqueue", "Queue")
    default = Queue.objects.filter(slug="default").first()
    others = Queue.objects.exclude(pk=getattr(default, "pk", None))
    for model, _, _ in QUEUED_ROWS:
        if apps.get_model("reviewqueue", model).objects.filter(queue__in=others).exists():
            raise RuntimeError(f"cannot go back to one queue: {model} rows belong to other queues")
    Old = apps.get_model("reviewqueue", "LegacyLabelCount")
    LabelCount = apps.get_model("reviewqueue", "LabelCount")
    Old.objects.bulk_create(Old(label=row.label, count=row.count) for row in LabelCount.objects.filter(queue=default))
    others.delete()


# The models whose rows belong to one queue: a ``queue`` column.
QUEUE_COLUMNS = [
    ("reviewitem", "items", {}),
    ("verdict", "verdicts", {"help_text": "the item's queue, kept here for the tuner's window"}),
    ("looprun", "runs", {"help_text": "the queue the run was routed to: its step limit, its verdicts"}),
    ("labelcount", "label_counts", {}),
    ("filterrule", "filter_rules", {}),
    ("modechange", "mode_changes", {}),
    ("steplimitchange", "step_limit_changes", {}),
    ("policyaudit", "policy_audits", {}),
    ("depthsample", "depth_samples", {}),
    (
        "simulationrun",
        "simulation_runs",
        {"help_text": "the queue whose live data and policy it started from"},
    ),
]


def _queue_column(related, extra, **options):
    return models.ForeignKey(
        on_delete=django.db.models.deletion.PROTECT,
        related_name=related,
        to="reviewqueue.queue",
        **extra,
        **options,
    )


QUEUED_ROWS = [column for column in QUEUE_COLUMNS if column[0] != "labelcount"]


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("reviewqueue", "0009_trust_the_verdicts"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # The policy row becomes a queue.
        migrations.RenameModel("QueuePolicy", "Queue"),
        migrations.AlterModelOptions(name="queue", options={"ordering": ["slug"]}),
        migrations.AddField("queue", "slug", models.SlugField(max_length=50, null=True, db_index=False)),
        migrations.AddField("queue", "name", models.CharField(max_length=100, default="")),
        migrations.AddField(
            "queue",
            "open_to_all",
            models.BooleanField(
                default=False, help_text="every reviewer may review this queue, whatever the members below"
            ),
        ),
        migrations.AddField(
            "queue",
            "archived_at",
            models.DateTimeField(
                blank=True, null=True, help_text="archived: accepts nothing new, keeps its items and history"
            ),
        ),
        migrations.AddField("queue", "created_at", models.DateTimeField(default=django.utils.timezone.now)),
        migrations.AddField(
            "queue",
            "members",
            models.ManyToManyField(
                blank=True,
                help_text="reviewers of this queue",
                related_name="review_queues",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            "queue",
            "member_groups",
            models.ManyToManyField(
                blank=True,
                help_text="groups whose users review this queue",
                related_name="review_queues",
                to="auth.group",
            ),
        ),
        # Label counts move to a table keyed by (queue, label).
        migrations.RenameModel("LabelCount", "LegacyLabelCount"),
        migrations.CreateModel(
            name="LabelCount",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "label",
                    models.CharField(
                        choices=reviewqueue.models.ReasonLabel.choices,
                        max_length=20,
                    ),
                ),
                ("count", models.PositiveIntegerField(default=0)),
                (
                    "queue",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="label_counts",
                        to="reviewqueue.queue",
                    ),
                ),
            ],
        ),
        # Every row that belongs to a queue gets a queue column...
        *[
            migrations.AddField(model, "queue", _queue_column(related, {}, null=True))
            for model, related, _ in QUEUE_COLUMNS
            if model != "labelcount"
        ],
        # ...filled with the default queue.
        migrations.RunPython(name_the_default_queue, migrations.RunPython.noop),
        migrations.RunPython(give_rows_to_default, back_to_one_queue),
        migrations.DeleteModel("LegacyLabelCount"),
        migrations.AlterField(
            "queue",
            "slug",
            models.SlugField(
                max_length=50,
                unique=True,
                help_text="lowercase letters, digits and hyphens, starting with a letter; "
                "producers name the queue by it (POST /api/outputs, /api/tasks)",
            ),
        ),
        migrations.AlterField("queue", "name", models.CharField(max_length=100)),
        migrations.AlterField(
            "filterrule", "label", models.CharField(choices=reviewqueue.models.ReasonLabel.choices, max_length=20)
        ),
        migrations.AddConstraint(
            "filterrule", models.UniqueConstraint(fields=("queue", "label"), name="filter_rule_per_queue")
        ),
        migrations.AddConstraint(
            "labelcount", models.UniqueConstraint(fields=("queue", "label"), name="label_count_per_queue")
        ),
        migrations.RemoveIndex("reviewitem", "pending_by_priority"),
        migrations.RemoveIndex("reviewitem", "pending_shed_order"),
        migrations.AddIndex(
            "reviewitem",
            models.Index(
                condition=models.Q(status__in=["pending", "claimed"]),
                fields=["queue", "-priority", "created_at", "id"],
                name="queue_next_item",
            ),
        ),
        migrations.AddIndex(
            "reviewitem",
            models.Index(
                condition=models.Q(status="pending"),
                fields=["queue", "priority", "created_at"],
                name="queue_shed_order",
            ),
        ),
        migrations.AddIndex(
            "reviewitem",
            models.Index(
                condition=models.Q(status__in=["pending", "claimed"]),
                fields=["queue", "created_at"],
                name="queue_waiting_by_age",
            ),
        ),
        migrations.AddIndex(
            "verdict",
            models.Index(
                condition=models.Q(counts_for_tuner=True),
                fields=["queue", "-created_at"],
                name="verdict_tuning_by_queue",
            ),
        ),
        migrations.AddIndex("depthsample", models.Index(fields=["queue", "-created_at"], name="depth_sample_by_queue")),
        migrations.CreateModel(
            name="RoutingRule",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "position",
                    models.PositiveIntegerField(default=0, help_text="rules are tried in increasing position"),
                ),
                (
                    "producer",
                    models.CharField(blank=True, help_text="exact producer (token name); blank: any", max_length=100),
                ),
                ("task_kind", models.CharField(blank=True, help_text="exact task kind; blank: any", max_length=20)),
                (
                    "min_priority",
                    models.IntegerField(blank=True, help_text="inclusive; blank: no lower bound", null=True),
                ),
                (
                    "max_priority",
                    models.IntegerField(blank=True, help_text="inclusive; blank: no upper bound", null=True),
                ),
                (
                    "task_id_prefix",
                    models.CharField(blank=True, help_text="task ids starting with this", max_length=200),
                ),
                ("enabled", models.BooleanField(default=True)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "queue",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="routing_rules",
                        to="reviewqueue.queue",
                    ),
                ),
            ],
            options={"ordering": ["position", "id"]},
        ),
        # Last, the queue columns become required; a row made without naming
        # its queue belongs to the default queue (a Python default, which the
        # database never needs: every row has its queue by now).
        *[
            operation
            for model, related, extra in QUEUE_COLUMNS
            for operation in (
                migrations.AlterField(model, "queue", _queue_column(related, extra)),
                migrations.SeparateDatabaseAndState(
                    state_operations=[
                        migrations.AlterField(
                            model,
                            "queue",
                            _queue_column(related, extra, default=reviewqueue.models.default_queue_pk),
                        )
                    ]
                ),
            )
        ],
    ]
