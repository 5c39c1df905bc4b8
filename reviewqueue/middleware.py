"""Site-wide answers for failures that are nobody's input.

A lost database is answered here and only here: the JSON API gets a JSON 503,
an htmx request the unavailable partial, any other page the full 503 page,
all with one Retry-After. A view adds only what only it can say, through
``when_database_lost``.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import Any, TypeVar, cast

from django.core.signals import got_request_exception
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


# Set on a request whose database error escaped outside a view (the session
# or user lookup in a middleware, the session saved on the way out), where
# Django turns it into a 500 before any process_exception sees it.
LOST_ATTR = "_reviewqueue_database_lost"
# The 503 in place of such a 500 keeps the 500's other headers (security and
# CSP, added by the inner middleware on its way out), never these.
OWN_HEADERS = ("Content-Type", "Content-Length")


def _note_database_lost(sender: object, request: HttpRequest | None = None, **kwargs: Any) -> None:
    """Django's got_request_exception handler runs inside its except block,
    so the exception being answered is sys.exc_info()'s."""
    exception = sys.exc_info()[1]
    if request is not None and isinstance(exception, (*DATABASE_ERRORS, DatabaseLost)):
        setattr(request, LOST_ATTR, exception)


got_request_exception.connect(_note_database_lost, dispatch_uid="reviewqueue-database-lost")


class DatabaseUnavailableMiddleware:
    """A database that is unreachable or drops a connection mid-request answers
    503 with Retry-After, never a 500 traceback, whatever DEBUG says. Nothing
    is half-written: every service runs in one transaction, which the database
    rolls back when the connection goes, so repeating the request is safe.

    Before the session and auth middleware, so it also sees the 500 Django made of a database
    error raised in another middleware (the session and user lookups before
    the view, the session save after it), and answers 503 in its place."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        lost = getattr(request, LOST_ATTR, None)
        if lost is None or response.status_code != 500:
            return response
        unavailable = self.answer(request, lost)
        for header, value in response.items():
            if header not in OWN_HEADERS and header not in unavailable:
                unavailable[header] = value
        return unavailable

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, (*DATABASE_ERRORS, DatabaseLost)):
            return None
        return self.answer(request, exception)

    @staticmethod
    def answer(request: HttpRequest, exception: Exception) -> HttpResponse:
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
    # The header, not request.htmx: the error may come before htmx's middleware ran.
    htmx = request.headers.get("HX-Request") == "true"
    template = UNAVAILABLE_PARTIAL if htmx else UNAVAILABLE_PAGE
    return HttpResponse(render_to_string(template, {"detail": detail}, request=None), status=503)
