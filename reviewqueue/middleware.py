"""Site-wide answers for failures that are nobody's input."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5


class DatabaseUnavailableMiddleware:
    """A database that is unreachable or drops a connection mid-request answers
    503 with Retry-After, never a 500 traceback. Nothing is half-written:
    every service runs in one transaction, which the database rolls back when
    the connection goes, so repeating the request is safe."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, OperationalError | InterfaceError):
            return None
        log.warning("database unavailable", extra={"path": request.path, "error": str(exception)[:200]})
        response: HttpResponse
        if request.path.startswith(("/api/", "/metrics")):
            response = JsonResponse(
                {"error": "database_unavailable", "detail": "the database is unreachable; nothing was saved"},
                status=503,
            )
        else:
            response = HttpResponse(render_to_string("503.html", request=None), status=503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
