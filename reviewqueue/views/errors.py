"""The site's own 404 and 500 answers: the site-styled page for a person,
JSON for the API, as the API's other errors are (docs/API.md)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

API_PATHS = ("/api/", "/metrics")


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith(API_PATHS):
        return JsonResponse({"error": "not_found", "fields": {}, "detail": "no such endpoint"}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """Rendered without the request's context (defaults.server_error): its
    context processors might meet the very failure being answered."""
    if request.path.startswith(API_PATHS):
        return JsonResponse(
            {"error": "server_error", "fields": {}, "detail": "the server failed; try again"}, status=500
        )
    return defaults.server_error(request)
