"""The item list: keyset indexes (every item's, a queue's, a producer's, newest
first) and, on PostgreSQL only, the full-text expression index that
``selectors.items.searched`` reads. Other databases search by substring and
get no such index; the model state does not carry it, so it is built from
the very expression the selector uses and cannot drift from it.

On PostgreSQL every index here is built with ``CREATE INDEX CONCURRENTLY``
(Django's ``AddIndexConcurrently``), outside a transaction: a plain build
takes a lock that stops every write to the items table until it ends, and
over a million items the full-text index takes minutes, during which no
output could be admitted and no verdict given. A concurrent build lets
writes go on. Other databases build them as before.

This migration used to build them in a transaction, with the same names
and definitions. A database that applied it then has the same indexes, and
Django never runs an applied migration again, so it is unaffected; one that
has not yet applied it (an upgrade from 0015 with its items in place) runs
this version. A new migration could not have helped those: 0016 would still
have run first, with its lock.

A concurrent build that fails leaves the migration unrecorded and may leave
an index behind, built or marked invalid. Running ``migrate`` again
finishes the job: a valid index of the same name is kept, an invalid one is
dropped and built again.
"""

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.operations import AddIndexConcurrently
from django.contrib.postgres.search import SearchVector
from django.db import migrations, models

SEARCH_INDEX = "item_search"


def search_index() -> GinIndex:
    # The same vector as selectors.items.searched (config "simple", task then output).
    return GinIndex(SearchVector("task_description", "final_output", config="simple"), name=SEARCH_INDEX)


def _on_postgresql(schema_editor) -> bool:
    return schema_editor.connection.vendor == "postgresql"


def _already_built(schema_editor, name: str) -> bool:
    """True if a valid index ``name`` exists (left by an earlier run of this
    migration that failed later on); an invalid one, left by a concurrent
    build that failed, is dropped so it can be built again. Only when the
    migration is run: ``sqlmigrate`` shows every statement."""
    if schema_editor.collect_sql:
        return False
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", [name])
        row = cursor.fetchone()
    if row is None:
        return False
    if not row[0]:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(name)}")
        return False
    return True


class AddIndexWithoutLocking(AddIndexConcurrently):
    """``AddIndexConcurrently`` on PostgreSQL; a plain ``AddIndex`` elsewhere."""

    def describe(self):
        return f"Create index {self.index.name} on {', '.join(self.index.fields)} (concurrently on PostgreSQL)"

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if not _on_postgresql(schema_editor):
            return migrations.AddIndex.database_forwards(self, app_label, schema_editor, from_state, to_state)
        if not _already_built(schema_editor, self.index.name):
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if not _on_postgresql(schema_editor):
            return migrations.AddIndex.database_backwards(self, app_label, schema_editor, from_state, to_state)
        super().database_backwards(app_label, schema_editor, from_state, to_state)


class AddSearchIndexWithoutLocking(AddIndexWithoutLocking):
    """The full-text index: PostgreSQL's alone and outside the model state."""

    def state_forwards(self, app_label, state):
        pass

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if _on_postgresql(schema_editor):
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if _on_postgresql(schema_editor):
            super().database_backwards(app_label, schema_editor, from_state, to_state)

    def describe(self):
        return f"Create the full-text index {self.index.name} (concurrently; PostgreSQL only)"


class Migration(migrations.Migration):
    # CREATE INDEX CONCURRENTLY cannot run inside a transaction.
    atomic = False

    dependencies = [
        ("reviewqueue", "0015_gold_placeholders"),
    ]

    operations = [
        AddIndexWithoutLocking(
            model_name="reviewitem",
            index=models.Index(fields=["created_at", "id"], name="item_keyset"),
        ),
        AddIndexWithoutLocking(
            model_name="reviewitem",
            index=models.Index(fields=["queue", "created_at", "id"], name="item_queue_keyset"),
        ),
        AddIndexWithoutLocking(
            model_name="reviewitem",
            index=models.Index(fields=["producer", "created_at", "id"], name="item_producer_keyset"),
        ),
        AddSearchIndexWithoutLocking(model_name="reviewitem", index=search_index()),
    ]
