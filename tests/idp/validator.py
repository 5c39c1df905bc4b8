"""The provider's claims: email, username and the user's groups."""

from __future__ import annotations

from typing import Any

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
