"""The provider's claims: email, username and the user's groups."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from django.http import HttpRequest, HttpResponse
from oauth2_provider.oauth2_validators import OAuth2Validator


class Validator(OAuth2Validator):
    # A claim is sent only when its scope was asked for; groups come with openid.
    oidc_claim_scope = {
        **OAuth2Validator.oidc_claim_scope,
        "groups": "openid",
        "preferred_username": "profile",
        "email": "email",
    }

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        user = request.user
        return {
            "email": user.email,
            "preferred_username": user.username,
            "groups": sorted(user.groups.values_list("name", flat=True)),
        }

    # django-oauth-toolkit leaves prompt=none to its users: the silent
    # sign-in succeeds while the provider's own session lasts, and this
    # client needs no consent (its application skips authorization).
    def validate_silent_login(self, request: Any) -> bool:
        user = signed_in.get()
        return user is not None and user.is_authenticated

    def validate_silent_authorization(self, request: Any) -> bool:
        return True


signed_in: ContextVar[Any] = ContextVar("signed_in", default=None)


class SignedInMiddleware:
    """Makes the request's user readable by the validator (oauthlib's
    request does not carry Django's)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = signed_in.set(request.user)
        try:
            return self.get_response(request)
        finally:
            signed_in.reset(token)
