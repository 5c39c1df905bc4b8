"""The identity provider's sign-in, callback and sign-out pages.

mozilla-django-oidc's views run the flow (state, nonce and PKCE in the
session); these add discovery, the sign-in rate limit, pages that say what
went wrong instead of a bare error, and sign-out at the provider. Each answers
404 while no ``OIDC_ISSUER`` is set.
"""

from __future__ import annotations

import logging
from typing import Any

import requests
from django.conf import settings
from django.contrib import auth
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render, resolve_url
from django.views.decorators.http import require_POST
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from .. import oidc
from .auth import login_rate_limited, sign_in_context

log = logging.getLogger(__name__)


def sign_in_problem(request: HttpRequest, message: str, status: int) -> HttpResponse:
    """The sign-in page with ``message`` (the provider's answer was refused,
    or the provider could not be reached)."""
    return render(
        request,
        "registration/login.html",
        {
            **sign_in_context(request),
            "oidc_error": message,
            "password_form": not oidc.only(),
            "form": AuthenticationForm(request),
        },
        status=status,
    )


class AuthenticateView(OIDCAuthenticationRequestView):
    """Sends the browser to the provider's authorization endpoint, with
    ``prompt=none`` for a re-check (``?silent=1``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)  # skip reading endpoints at build

    @property
    def OIDC_OP_AUTH_ENDPOINT(self) -> str:
        return str(oidc.discovery()["authorization_endpoint"])

    @property
    def OIDC_RP_CLIENT_ID(self) -> str:
        return str(settings.OIDC_RP_CLIENT_ID)

    def get(self, request: HttpRequest) -> HttpResponse:
        if not oidc.enabled():
            raise Http404("no identity provider is set up")
        try:
            return super().get(request)
        except oidc.ProviderUnavailable as exc:
            log.error("oidc provider unavailable", extra={"error": str(exc)[:300]})
            return sign_in_problem(request, "The identity provider cannot be reached. Try again in a minute.", 503)

    def get_extra_params(self, request: HttpRequest) -> dict[str, str]:
        return {"prompt": "none"} if request.GET.get("silent") == "1" else {}


class CallbackView(OIDCAuthenticationCallbackView):
    """The provider sends the browser back here with a code; a refused
    answer shows the sign-in page with the reason, never signs anyone in."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not oidc.enabled():
            raise Http404("no identity provider is set up")
        if login_rate_limited(request, group="oidc-callback", method="GET"):
            return sign_in_problem(
                request, "Too many sign-in attempts from your address. Wait a minute and try again.", 429
            )
        try:
            return super().get(request)
        except SuspiciousOperation as exc:
            log.warning("oidc answer refused", extra={"reason": str(exc)[:300]})
            auth.logout(request)  # a refused answer (a re-check's too) ends any session
            return sign_in_problem(request, "The identity provider's answer was refused. Sign in again.", 400)
        except (oidc.ProviderUnavailable, requests.RequestException) as exc:
            log.error("oidc provider unavailable", extra={"error": str(exc)[:300]})
            return sign_in_problem(request, "The identity provider cannot be reached. Try again in a minute.", 503)

    def login_failure(self) -> HttpResponse:
        request = self.request
        auth.logout(request)  # a failed sign-in or re-check leaves no session behind
        refused = getattr(request, "oidc_refused", None)
        if request.GET.get("error"):  # the provider said no (a silent re-check of an ended session, say)
            return sign_in_problem(request, f"You are signed out. Sign in with {settings.OIDC_PROVIDER_NAME}.", 401)
        return sign_in_problem(request, refused or "Sign-in with the identity provider failed. Try again.", 403)

    @property
    def success_url(self) -> str:
        return oidc.safe_next(self.request, self.request.session.get("oidc_login_next")) or super().success_url


authenticate_view = login_not_required(AuthenticateView.as_view())
callback_view = login_not_required(CallbackView.as_view())


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    """Ends the local session and, for a session from the provider that has
    an ``end_session_endpoint``, the provider's session too."""
    target = oidc.end_session_url(request) if oidc.enabled() and oidc.from_provider(request) else None
    auth.logout(request)
    return HttpResponseRedirect(target or resolve_url(settings.LOGOUT_REDIRECT_URL))
