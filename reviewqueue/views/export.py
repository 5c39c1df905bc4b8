"""Operator views: the verdict export and the API reference. Both need the
operator role; the export is about one queue like the dashboard
(views/queues.py)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from ..access import operator_required
from ..export import export_lines
from ..forms import (
    ExportForm,
)
from ..models import Queue
from ..selectors.scope import scope_context
from .http import queue_scoped

# --- export -------------------------------------------------------------------------------


@require_GET
@operator_required
@queue_scoped
def export(request: HttpRequest, queue: Queue) -> HttpResponse:
    """The export form; the download itself is export_download."""
    return render(request, "ops/export.html", {"form": ExportForm(), **scope_context(queue)})


@require_GET
@operator_required
@queue_scoped
def export_download(request: HttpRequest, queue: Queue) -> HttpResponse:
    """One queue's verdicts as CSV or JSON Lines, streamed in chunks so any row count fits in memory."""
    form = ExportForm(request.GET)
    if not form.is_valid():
        return render(request, "ops/export.html", {"form": form, **scope_context(queue)}, status=400)
    fmt = form.cleaned_data["format"]
    content_type = "text/csv; charset=utf-8" if fmt == "csv" else "application/x-ndjson; charset=utf-8"
    dataset = form.cleaned_data["dataset"]
    response = StreamingHttpResponse(export_lines(form.queryset(queue), fmt, dataset), content_type=content_type)
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    name = f"{'dataset' if dataset else 'verdicts'}-{queue.slug}"
    response["Content-Disposition"] = f'attachment; filename="{name}-{stamp}.{fmt}"'
    return response


# --- API reference ----------------------------------------------------------------------


@require_GET
@operator_required
def api_docs(request: HttpRequest) -> HttpResponse:
    """The interactive API reference (vendored Swagger UI over /api/openapi.json)."""
    return render(request, "ops/api_docs.html")
