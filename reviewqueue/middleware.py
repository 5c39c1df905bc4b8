"""Site-wide answers for failures that are nobody's input.

A lost database is answered here and only here: the JSON API gets a JSON 503,
an htmx request the unavailable partial, any other page the full 503 page,
all with one Retry-After. A view adds only what only it can say, through
``when_database_lost``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar, cast

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

log = logging.getLogger(__name__)

# How long a client should wait before repeating a request that met an outage
# (the database here, the broker in the task API): one value site-wide.
RETRY_AFTER_SECONDS = 5
# The 503 page and, for htmx requests, the fragment of it that replaces the card.
UNAVAILABLE_PAGE = "503.html"
UNAVAILABLE_PARTIAL = "503.html#unavailable"

DATABASE_ERRORS = (OperationalError, InterfaceError)

V = TypeVar("V", bound=Callable[..., HttpResponse])


class DatabaseLost(Exception):
    """The database went away during a view that has more to say about it:
    ``detail`` is that view's sentence (what was not saved), shown in place of
    the general "Nothing was saved"."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def when_database_lost(detail: str) -> Callable[[V], V]:
    """Decorate a view whose lost database deserves its own words; the answer
    itself (status, Retry-After, page or partial) is still the middleware's."""

    def decorate(view: V) -> V:
        @functools.wraps(view)
        def answered(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                return view(request, *args, **kwargs)
            except DATABASE_ERRORS as exc:
                raise DatabaseLost(detail) from exc

        return cast(V, answered)

    return decorate


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
        if not isinstance(exception, (*DATABASE_ERRORS, DatabaseLost)):
            return None
        cause = exception.__cause__ if isinstance(exception, DatabaseLost) else exception
        log.warning("database unavailable", extra={"path": request.path, "error": str(cause)[:200]})
        response = unavailable_response(request, detail=getattr(exception, "detail", ""))
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response


def unavailable_response(request: HttpRequest, *, detail: str = "") -> HttpResponse:
    """The 503 body for this kind of request. Rendered without the request:
    its context processors would ask the database that just went away."""
    if request.path.startswith(("/api/", "/metrics")):
        return JsonResponse(
            {"error": "database_unavailable", "detail": "the database is unreachable; nothing was saved"},
            status=503,
        )
    template = UNAVAILABLE_PARTIAL if getattr(request, "htmx", False) else UNAVAILABLE_PAGE
    return HttpResponse(render_to_string(template, {"detail": detail}, request=None), status=503)
