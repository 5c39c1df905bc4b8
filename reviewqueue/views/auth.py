"""Sign-in (rate-limited), home routing by role, and the health check."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import DatabaseError, connection
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseForbidden, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET
from django_ratelimit.core import is_ratelimited
from redis.exceptions import RedisError

from .. import oidc
from ..access import is_operator, is_reviewer

log = logging.getLogger(__name__)


def login_rate_limited(request: HttpRequest, *, group: str = "login", method: Any = "POST") -> bool:
    """Count this sign-in attempt against the client address's limit.

    The counter lives in the shared cache (Redis at scale, the database on the
    embedded defaults), so every process counts against one limit; the site's
    sign-in and the admin's share it too. When the cache is down, sign-in
    stays open rather than locking every reviewer out: the limit is a brake
    on guessing, and the password check still runs.
    """
    try:
        return is_ratelimited(
            request, group=group, key="ip", rate=settings.LOGIN_RATE_LIMIT, method=method, increment=True
        )
    except (RedisError, OSError, DatabaseError) as exc:
        log.warning("login rate limit skipped: cache unavailable", extra={"error": str(exc)[:200]})
        return False


class LoginView(auth_views.LoginView):
    """Django's login view; past the rate limit a POST is refused with 429
    before the password is even checked. With an identity provider set up it
    offers "Sign in with ...", and with ``OIDC_ONLY`` it takes no password
    (the break-glass page does, for superusers)."""

    redirect_authenticated_user = True
    break_glass = False

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context.update(sign_in_context(self.request))
        context["break_glass"] = self.break_glass
        context["password_form"] = self.break_glass or not oidc.only()
        return context

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if self.break_glass and not oidc.only():
            raise Http404("the password sign-in is the ordinary one")
        return super().dispatch(request, *args, **kwargs)

    def post(self, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        if login_rate_limited(request):
            form = self.get_form()
            return render(
                request,
                self.template_name,
                {
                    "form": form,
                    "rate_limited": True,
                    **sign_in_context(request),
                    "password_form": True,
                    "break_glass": self.break_glass,
                },
                status=429,
            )
        if oidc.only() and not self.break_glass:
            return HttpResponseForbidden("Passwords are off here: sign in with the identity provider.")
        return super().post(request, *args, **kwargs)

    def form_valid(self, form: AuthenticationForm) -> HttpResponse:
        # Break-glass is for superusers alone; everyone else has the provider.
        # Refused with the wrong password's answer, so the page tells no one
        # whether a non-superuser's password was right.
        if self.break_glass and not form.get_user().is_superuser:
            form.add_error(None, "not a superuser")
            return self.form_invalid(form)
        return super().form_valid(form)


def sign_in_context(request: HttpRequest) -> dict[str, Any]:
    """What the sign-in page needs to offer the identity provider."""
    if not oidc.enabled():
        return {"oidc": False}
    return {
        "oidc": True,
        "oidc_provider_name": settings.OIDC_PROVIDER_NAME,
        "oidc_next": oidc.safe_next(request, request.GET.get("next")) or "",
    }


login_view = login_not_required(LoginView.as_view())
break_glass_login_view = login_not_required(LoginView.as_view(break_glass=True))

TOO_MANY_ATTEMPTS = "Too many sign-in attempts from your address. Wait a minute and try again."


class RateLimitedAdminAuthenticationForm(AdminAuthenticationForm):
    """The admin's sign-in form, under the same limit as the site's: past it,
    the attempt is refused before the password is checked."""

    def clean(self) -> dict[str, Any]:
        if self.request is not None and login_rate_limited(self.request):
            self.request.login_rate_limited = True  # type: ignore[attr-defined]
            raise ValidationError(TOO_MANY_ATTEMPTS, code="rate_limited")
        return super().clean()


@login_not_required
def admin_login(request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
    """The admin's login view (its form is RateLimitedAdminAuthenticationForm,
    set in admin.py), answering 429 to a refused attempt as the site's does."""
    if oidc.only():  # the admin takes no password either; signed-in staff reach it
        if request.user.is_authenticated:
            if request.user.is_staff:
                return redirect("admin:index")
            raise PermissionDenied
        return redirect_to_login(oidc.safe_next(request, request.GET.get("next")) or reverse("admin:index"))
    response = admin.site.login(request, extra_context)
    if getattr(request, "login_rate_limited", False):
        response.status_code = 429
    return response


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    # An operator lands on the dashboard, though operators may review too.
    if is_operator(request.user):
        return redirect("ops:dashboard")
    if is_reviewer(request.user):
        return redirect("review:queue")
    return render(
        request,
        "no_role.html",
        {"oidc_provider_name": settings.OIDC_PROVIDER_NAME if oidc.enabled() else ""},
        status=403,
    )


@login_not_required
@require_GET
def health(request: HttpRequest) -> JsonResponse:
    """Liveness for load balancers: the database answers."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})
