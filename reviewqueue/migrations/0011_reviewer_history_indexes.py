"""The review page reads a reviewer's newest answers of every kind, and the
last hour's, from an index that starts with the reviewer and the time: the
read stays the same size however long their history grows. Verdicts already
have one (verdict_by_reviewer); answers get theirs here."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("reviewqueue", "0010_many_queues"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="judgement",
            index=models.Index(fields=["reviewer", "-created_at"], name="judgement_by_reviewer_time"),
        ),
    ]
