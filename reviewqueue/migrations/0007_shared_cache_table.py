# The shared cache's table (reviewqueue/cache.py), made by migrate so that no
# checkout, test run or CI job depends on remembering `createcachetable`.

from django.core.management.commands.createcachetable import Command as CreateCacheTable
from django.db import migrations

TABLE = "reviewqueue_cache"


def create_table(apps, schema_editor):
    # Creates it only if missing, with Django's own layout for DatabaseCache.
    command = CreateCacheTable()
    command.verbosity = 0
    command.create_table(schema_editor.connection.alias, TABLE, dry_run=False)


def drop_table(apps, schema_editor):
    schema_editor.execute(f"DROP TABLE IF EXISTS {schema_editor.quote_name(TABLE)}")


class Migration(migrations.Migration):

    dependencies = [
        ("reviewqueue", "0006_token_scopes_and_keys_per_producer"),
    ]

    operations = [
        migrations.RunPython(create_table, drop_table),
    ]
