"""The item list: keyset indexes (every item's, a queue's, a producer's, newest
first) and, on PostgreSQL only, the full-text expression index that
``selectors.items.searched`` reads. Other databases search by substring and
get no such index; the model state does not carry it, so it is built from
the very expression the selector uses and cannot drift from it."""

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector
from django.db import migrations, models

SEARCH_INDEX = "item_search"


def search_index() -> GinIndex:
    # The same vector as selectors.items.searched (config "simple", task then output).
    return GinIndex(SearchVector("task_description", "final_output", config="simple"), name=SEARCH_INDEX)


def add_search_index(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.add_index(apps.get_model("reviewqueue", "ReviewItem"), search_index())


def remove_search_index(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.remove_index(apps.get_model("reviewqueue", "ReviewItem"), search_index())


class Migration(migrations.Migration):
    dependencies = [
        ("reviewqueue", "0015_gold_placeholders"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="reviewitem",
            index=models.Index(fields=["created_at", "id"], name="item_keyset"),
        ),
        migrations.AddIndex(
            model_name="reviewitem",
            index=models.Index(fields=["queue", "created_at", "id"], name="item_queue_keyset"),
        ),
        migrations.AddIndex(
            model_name="reviewitem",
            index=models.Index(fields=["producer", "created_at", "id"], name="item_producer_keyset"),
        ),
        migrations.RunPython(add_search_index, remove_search_index),
    ]
