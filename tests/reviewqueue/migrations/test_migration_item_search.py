"""Migration 0016 builds the item list's indexes without stopping writes:
on PostgreSQL each is ``CREATE INDEX CONCURRENTLY``, outside a transaction,
and they are the very indexes the former, locking build made (so a database
that applied that one holds the same); on SQLite the keyset indexes are
built plainly and there is no full-text index. Forwards and back on both
databases, and, on PostgreSQL, a build that failed half-way is finished by
the next ``migrate``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("reviewqueue", "0015_gold_placeholders")]
AFTER = [("reviewqueue", "0016_item_search")]
KEYSET = ["item_keyset", "item_producer_keyset", "item_queue_keyset"]
SEARCH = "item_search"
on_postgresql = pytest.mark.skipif(connection.vendor != "postgresql", reason="CONCURRENTLY is PostgreSQL's")
on_sqlite = pytest.mark.skipif(connection.vendor != "sqlite", reason="the SQLite build")


def _sql(*options: str) -> str:
    out = StringIO()
    call_command("sqlmigrate", "reviewqueue", "0016", *options, stdout=out)
    return out.getvalue()


def _migrate(target: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)


@pytest.fixture
def at_0015() -> Iterator[None]:
    """The database as it was before 0016; migrated back to the newest after."""
    _migrate(BEFORE)
    try:
        yield
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


def _indexes() -> dict[str, bool]:
    """The item list's indexes on the items table, each with whether it is valid."""
    with connection.cursor() as cursor:
        names = set(connection.introspection.get_constraints(cursor, "reviewqueue_reviewitem")) & {*KEYSET, SEARCH}
        if connection.vendor != "postgresql":
            return dict.fromkeys(names, True)
        cursor.execute(
            "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE c.relname = ANY(%s)",
            [sorted(names)],
        )
        return dict(cursor.fetchall())


def test_it_runs_outside_a_transaction() -> None:
    assert MigrationLoader(connection).get_migration("reviewqueue", "0016_item_search").atomic is False


@on_postgresql
def test_on_postgresql_every_index_is_built_and_dropped_concurrently() -> None:
    forwards, backwards = _sql(), _sql("--backwards")
    built = re.findall(r'^CREATE INDEX CONCURRENTLY "(\w+)"', forwards, re.MULTILINE)
    assert sorted(built) == sorted([*KEYSET, SEARCH])
    assert "BEGIN;" not in forwards and 'CREATE INDEX "' not in forwards
    dropped = re.findall(r'^DROP INDEX CONCURRENTLY IF EXISTS "(\w+)"', backwards, re.MULTILINE)
    assert sorted(dropped) == sorted([*KEYSET, SEARCH])


@on_postgresql
def test_the_indexes_are_the_ones_the_locking_build_made() -> None:
    """What the former 0016 ran (the same indexes, built plainly in a
    transaction) is this migration's SQL without CONCURRENTLY: a database that
    applied it holds exactly these indexes under these names."""
    module = MigrationLoader(connection).get_migration("reviewqueue", "0016_item_search")
    apps = MigrationExecutor(connection).loader.project_state(AFTER).apps
    model = apps.get_model("reviewqueue", "ReviewItem")
    with connection.schema_editor(collect_sql=True) as editor:
        for operation in module.operations:
            editor.add_index(model, operation.index)
    plain = [statement for statement in editor.collected_sql if statement.startswith("CREATE INDEX")]
    ours = [line for line in _sql().splitlines() if line.startswith("CREATE INDEX")]
    assert [line.replace(" CONCURRENTLY", "") for line in ours] == plain


@on_sqlite
def test_on_sqlite_the_keyset_indexes_are_built_plainly_and_there_is_no_search_index() -> None:
    forwards = _sql()
    assert sorted(re.findall(r'^CREATE INDEX "(\w+)"', forwards, re.MULTILINE)) == KEYSET
    assert SEARCH not in forwards.replace("full-text index item_search", "") and "CONCURRENTLY" not in forwards


def test_it_migrates_forwards_and_back(at_0015: None) -> None:
    assert _indexes() == {}
    _migrate(AFTER)
    expected = [*KEYSET, SEARCH] if connection.vendor == "postgresql" else KEYSET
    assert _indexes() == dict.fromkeys(expected, True)
    _migrate(BEFORE)
    assert _indexes() == {}


@on_postgresql
def test_a_build_that_failed_half_way_is_finished_by_the_next_migrate(at_0015: None) -> None:
    """An earlier run built one index and left the full-text one invalid (a
    concurrent build that failed does), then stopped: 0016 is not recorded."""
    with connection.cursor() as cursor:
        cursor.execute('CREATE INDEX "item_keyset" ON "reviewqueue_reviewitem" ("created_at", "id")')
        cursor.execute(
            'CREATE INDEX "item_search" ON "reviewqueue_reviewitem" USING gin ((to_tsvector(\'simple\'::regconfig,'
            " COALESCE(\"task_description\", '') || ' ' || COALESCE(\"final_output\", ''))))"
        )
        cursor.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'item_search'::regclass")
    assert _indexes() == {"item_keyset": True, SEARCH: False}
    _migrate(AFTER)
    assert _indexes() == dict.fromkeys([*KEYSET, SEARCH], True)
