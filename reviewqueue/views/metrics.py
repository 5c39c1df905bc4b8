"""Prometheus metrics at /metrics, read from the database on each scrape
(selectors.metrics says what is exported and how queues are labelled).

Access: a bearer token with the ``metrics`` scope, or a signed-in operator
(docs/API.md).
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..access import is_operator
from ..models import ApiToken
from ..selectors.metrics import registry
from ..tokens import RESERVED_NAME_ERROR, bearer_token, name_refusal
from .api import missing_scope_body


def _unauthorized(detail: str) -> HttpResponse:
    response = JsonResponse({"error": "unauthorized", "fields": {}, "detail": detail}, status=401)
    response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


@login_not_required
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text format; 401 without credentials, 403 without the right,
    both as JSON in the API's error shape."""
    if "Authorization" in request.headers:
        token = bearer_token(request)
        if token is None:
            return _unauthorized("invalid or revoked token")
        if name_refusal(token):
            return JsonResponse({"error": RESERVED_NAME_ERROR, "fields": {}, "detail": name_refusal(token)}, status=403)
        if not token.has_scope(ApiToken.Scope.METRICS):
            return JsonResponse(missing_scope_body(ApiToken.Scope.METRICS), status=403)
    elif not request.user.is_authenticated:
        return _unauthorized("a bearer token with the 'metrics' scope, or an operator's session, is required")
    elif not is_operator(request.user):
        return JsonResponse({"error": "forbidden", "fields": {}, "detail": "operators only"}, status=403)
    return HttpResponse(generate_latest(registry()), content_type=CONTENT_TYPE_LATEST)
