"""Sign-in (rate-limited), home routing by role, and the health check."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET
from django_ratelimit.core import is_ratelimited
from redis.exceptions import RedisError

from ..access import is_operator, is_reviewer

log = logging.getLogger(__name__)


def login_rate_limited(request: HttpRequest) -> bool:
    """Count this sign-in attempt against the client address's limit.

    The counter lives in the cache (Redis at scale). When the cache is down,
    sign-in stays open rather than locking every reviewer out: the limit is a
    brake on guessing, and the password check still runs.
    """
    try:
        return is_ratelimited(
            request, group="login", key="ip", rate=settings.LOGIN_RATE_LIMIT, method="POST", increment=True
        )
    except (RedisError, OSError) as exc:
        log.warning("login rate limit skipped: cache unavailable", extra={"error": str(exc)[:200]})
        return False


class LoginView(auth_views.LoginView):
    """Django's login view; past the rate limit a POST is refused with 429
    before the password is even checked."""

    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        if login_rate_limited(request):
            form = self.get_form()
            return render(
                request,
                self.template_name,
                {"form": form, "rate_limited": True},
                status=429,
            )
        return super().post(request, *args, **kwargs)


login_view = login_not_required(LoginView.as_view())


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    if is_reviewer(request.user):
        return redirect("review:queue")
    if is_operator(request.user):
        return redirect("ops:dashboard")
    return render(request, "no_role.html", status=403)


@login_not_required
@require_GET
def health(request: HttpRequest) -> JsonResponse:
    """Liveness for load balancers: the database answers."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})
