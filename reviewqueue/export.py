"""The verdict export as text: one row per verdict, streamed as CSV or JSON
Lines in chunks so memory stays flat whatever the row count. The export page
(views/export.py) and the ``export_verdicts`` command both stream from here.

Read-only: nothing here writes, so an export can be repeated at will.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from .models import Queue, Verdict

EXPORT_COLUMNS = (
    ("verdict_id", "pk"),
    ("item_id", "item_id"),
    ("task_id", "item__task_id"),
    ("task_kind", "item__task_kind"),
    ("label", "item__label"),
    ("draft", "item__draft"),
    ("priority", "item__priority"),
    ("cutoff_reason", "item__cutoff_reason"),
    ("attempt_count", "item__attempt_count"),
    ("reviewed_attempt", "item__reviewed_attempt"),  # the best attempt, which the verdict judged
    ("checks_passed", "item__checks_passed"),
    ("checks_total", "item__checks_total"),
    ("reviewed_score", "item__reviewed_score"),
    ("failing_checks", "item__failing_checks"),  # JSON text: [{"id", "about"}]
    ("producer", "item__producer"),
    ("decision", "decision"),  # approve, reject, edit (approved with edits), send_back
    ("reason_label", "reason_label"),
    ("note", "note"),
    ("item_version", "item__version"),  # 2 and up: the output of a run resumed after a send-back
    ("previous_item_id", "item__previous_version_id"),
    ("reviewer", "reviewer__username"),
    # reviewer (one review), agreement, tiebreak or operator: how a double review was settled
    ("settled_by", "settled_by"),
    ("counts_for_tuner", "counts_for_tuner"),
    ("item_created_at", "item__created_at"),
    ("decided_at", "created_at"),
    ("queue", "queue__slug"),  # the queue the item was reviewed in
)
# Appended with the dataset option: the text a verdict was about.
DATASET_COLUMNS = (
    ("task_description", "item__task_description"),
    ("final_output", "item__final_output"),
    ("last_error", "item__last_error"),
    # Edit and approve: the reviewer's corrected output, beside the original
    # (empty for any other decision). The pair is a correction example.
    ("edited_output", "edited_output"),
)
EXPORT_CHUNK = 2000
# Outputs run to hundreds of kilobytes: read fewer rows at a time with the text.
DATASET_CHUNK = 100
# A spreadsheet runs a cell starting with one of these as a formula.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def verdicts(
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    label: str | None = None,
    reviewer: str | None = None,
    queue: Queue | int | None = None,
) -> QuerySet[Verdict]:
    """Verdicts from ``since`` (inclusive) to ``until`` (exclusive), on items
    with ``label``, by the user named ``reviewer``, in ``queue`` (a row or a
    pk), oldest first; a filter left empty does not filter."""
    qs = Verdict.objects.order_by("created_at", "pk")
    if queue is not None:
        qs = qs.filter(queue_id=queue.pk if isinstance(queue, Queue) else queue)
    if since:
        qs = qs.filter(created_at__gte=since)
    if until:
        qs = qs.filter(created_at__lt=until)
    if label:
        qs = qs.filter(item__label=label)
    if reviewer:
        qs = qs.filter(reviewer__username=reviewer)
    return qs


def export_columns(dataset: bool = False) -> tuple[tuple[str, str], ...]:
    """(name, lookup) of each exported column; ``dataset`` adds the text columns."""
    return EXPORT_COLUMNS + DATASET_COLUMNS if dataset else EXPORT_COLUMNS


def export_rows(queryset: QuerySet[Verdict], dataset: bool = False) -> Iterator[dict[str, Any]]:
    """One dict per verdict, read in chunks so memory stays flat whatever the row count."""
    columns = export_columns(dataset)
    names = [name for name, _ in columns]
    lookups = [lookup for _, lookup in columns]
    chunk = DATASET_CHUNK if dataset else EXPORT_CHUNK
    for values in queryset.values_list(*lookups).iterator(chunk_size=chunk):
        row = dict(zip(names, values, strict=True))
        for key in ("item_created_at", "decided_at"):
            if row[key] is not None:
                row[key] = row[key].isoformat()
        yield row


def csv_safe(value: Any) -> Any:
    """Neutralise spreadsheet formula injection by quoting a leading trigger character."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


class _Echo:
    """A file-like object whose write returns the line, so csv.writer can stream."""

    def write(self, value: str) -> str:
        return value


def csv_lines(rows: Iterable[dict[str, Any]], dataset: bool = False) -> Iterator[str]:
    """A header line, then one line per row, every cell made formula-safe."""
    writer = csv.writer(_Echo())
    yield writer.writerow([name for name, _ in export_columns(dataset)])
    for row in rows:
        yield writer.writerow([csv_safe(v) for v in row.values()])


def jsonl_lines(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """One JSON object per line, non-ASCII text kept as it is."""
    for row in rows:
        yield json.dumps(row, ensure_ascii=False) + "\n"


def export_lines(queryset: QuerySet[Verdict], fmt: str, dataset: bool = False) -> Iterator[str]:
    """The export as text lines; ``dataset`` adds the task text, output and last error."""
    rows = export_rows(queryset, dataset)
    return csv_lines(rows, dataset) if fmt == "csv" else jsonl_lines(rows)
