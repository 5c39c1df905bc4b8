"""Named statements on PostgreSQL: prepared once per connection, then sent
as ``EXECUTE`` with their parameters.

The reviewer's path sends the same few statements on every request (the
queue heads, the claim, the side panel). Built through the ORM each one costs
more in Python (building the queryset, compiling its SQL) than in the
database; written once as SQL and prepared, it costs its round trip. This is
how the one-statement admission sends its statements (``services.admission_pg``).

Each statement goes through the thread's Django connection (so it joins the
transaction in progress, and a lost connection raises Django's own database
errors) on one server-side-binding cursor kept while that connection lives.
With prepared statements turned off in the settings (``DB_PREPARED_STATEMENTS=0``,
for a pooler in transaction mode) the same statements are sent unprepared.
When Django logs queries (``DEBUG``, ``CaptureQueriesContext``), each
execution is logged too, with its values, so statement counts stay honest.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from django.db import connection

_cursors = threading.local()


def _cursor(pg: psycopg.Connection[Any]) -> psycopg.Cursor[Any]:
    """This thread's server-side-binding cursor on ``pg``: psycopg prepares a
    statement on a connection once and keeps its name, so every later call
    sends only the name and the parameters."""
    kept = getattr(_cursors, "kept", None)
    if kept is None or kept.connection is not pg or kept.closed:
        kept = _cursors.kept = psycopg.Cursor(pg)
    return kept


def fetch(sql: str, params: Mapping[str, Any] | Sequence[Any]) -> list[tuple[Any, ...]]:
    """Every row of one prepared statement on the default connection. Runs
    whatever ``sql`` does: safe to repeat exactly when the statement is."""
    connection.ensure_connection()
    started = time.monotonic()
    with connection.wrap_database_errors:
        pg = connection.connection
        cursor = _cursor(pg)
        # DB_PREPARED_STATEMENTS=0 (a pooler in transaction mode) turns preparing off.
        cursor.execute(sql, params, prepare=pg.prepare_threshold is not None)
        rows = cursor.fetchall() if cursor.description is not None else []
    if connection.queries_logged:
        # with its values, as Django logs its own statements (and as EXPLAIN can take it)
        shown = psycopg.ClientCursor(pg).mogrify(sql, params)
        connection.queries_log.append({"sql": shown, "time": f"{time.monotonic() - started:.3f}"})
    return rows
