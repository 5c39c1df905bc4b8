from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("reviewqueue", "0014_item_metadata"),
    ]

    operations = [
        migrations.AddField(
            model_name="queue",
            name="gold_waiting",
            field=models.PositiveIntegerField(
                default=0,
                help_text="gold copies waiting (pending + claimed): with depth, the waiting count reviewers see; "
                "never in the depth the policy, producers and operators read",
            ),
        ),
        migrations.AlterField(
            model_name="queue",
            name="gold_rate",
            field=models.FloatField(
                default=0.02, help_text="share of real items admitted beside which a gold item's copy is placed"
            ),
        ),
        migrations.AlterField(
            model_name="reviewitem",
            name="gold",
            field=models.ForeignKey(
                blank=True,
                help_text="set on a gold item's copy: placed beside a real item at its admission, answered by one "
                "reviewer; never in the depth",
                null=True,
                on_delete=models.deletion.CASCADE,
                related_name="copies",
                to="reviewqueue.golditem",
            ),
        ),
    ]
