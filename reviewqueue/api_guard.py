"""The API's transport guard: every route is mounted behind ``guard``, which
opens it to token auth (the API's views skip the login middleware) and
refuses a body over the limit with a JSON 413 before anything parses it,
chunked bodies included. urls.py mounts the API's routes through ``guarded``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern

# Request bodies above this are refused with 413 before they are parsed. Outputs
# longer than REVIEWQUEUE_MAX_OUTPUT_CHARS inside a smaller body are truncated
# by admit() with a visible marker instead.
API_MAX_BODY_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def _too_large() -> JsonResponse:
    return JsonResponse(
        {"error": "payload_too_large", "detail": f"request bodies are limited to {API_MAX_BODY_BYTES} bytes"},
        status=413,
    )


def _chunked(request: HttpRequest) -> bool:
    return "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()


def _read_chunked(request: HttpRequest) -> HttpResponse | None:
    """A chunked body declares no length, and Django reads no further than
    Content-Length says (none: nothing). Read it from the server's de-chunked
    stream, one byte past the limit at most: 413 if it is longer, else keep
    it as the request's body."""
    body = request.META["wsgi.input"].read(API_MAX_BODY_BYTES + 1)
    if len(body) > API_MAX_BODY_BYTES:
        return _too_large()
    if not body:
        # Servers that do not de-chunk (Django's development server) pass an
        # empty stream on: say so instead of parsing nothing.
        return JsonResponse(
            {"error": "length_required", "detail": "this server cannot read a chunked body: send Content-Length"},
            status=411,
        )
    request._body = body  # what HttpRequest.body returns from now on
    return None


def guard(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Token-auth views skip the login middleware; a body larger than the
    limit is refused with a JSON 413 before it is parsed: at once when its
    Content-Length says so, after one byte past the limit when it is chunked."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method in ("POST", "PUT", "PATCH"):
            try:
                declared = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return JsonResponse({"error": "invalid", "detail": "bad Content-Length"}, status=400)
            if declared > API_MAX_BODY_BYTES:
                return _too_large()
            if not declared and _chunked(request):
                refused = _read_chunked(request)
                if refused is not None:
                    return refused
        return view(request, *args, **kwargs)

    return login_not_required(wrapped)


def guarded(patterns: list[Any]) -> list[Any]:
    """The API's routes, each behind ``guard``; urls.py mounts them."""
    for pattern in patterns:
        if isinstance(pattern, URLPattern):
            pattern.callback = guard(pattern.callback)
    return patterns
