from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("reviewqueue", "0013_sla_and_alerts"),
    ]

    operations = [
        migrations.AddField(
            model_name="reviewitem",
            name="metadata",
            field=models.TextField(
                blank=True,
                db_default="",
                default="",
                help_text="the producer's JSON object for routing the verdict back (a thread id, say); "
                "never shown to reviewers",
            ),
        ),
    ]
