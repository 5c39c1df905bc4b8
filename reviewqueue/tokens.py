"""Producer API tokens: issued once in plain text, kept only as a hash, looked
up in constant time. The JSON API, ``/metrics`` and the ``create_api_token``
command share these; which scope an endpoint needs is the endpoint's business.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Collection
from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest
from django.utils import timezone

from .models import ApiToken

TOKEN_PREFIX_LEN = 8
# last_used_at is a hint, not an audit trail: write it at most once a minute per token.
LAST_USED_RESOLUTION = timedelta(minutes=1)
WEBHOOK_SECRET_PREFIX = "whsec_"


def hash_token(token: str) -> str:
    """What is stored of a token: its SHA-256, never the token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_webhook_secret() -> str:
    """A signing secret for webhooks: 256 random bits, spelled as Standard
    Webhooks libraries read it (``whsec_`` and padded standard base64). Kept in
    the clear, since the server signs with it; shown to the producer once."""
    return WEBHOOK_SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def issue_token(
    *,
    name: str,
    scopes: Collection[str],
    created_by: AbstractBaseUser | None = None,
    webhook_url: str = "",
) -> tuple[ApiToken, str]:
    """Create a token with exactly ``scopes``; the plain text is returned once
    and never stored. Raises ValueError for an unknown scope or a reserved or
    empty name. Not idempotent: each call issues a new token.

    With ``webhook_url`` (checked by the caller) the token gets a signing
    secret (``token.webhook_secret``, for the caller to show once) and its
    producer's items and runs default to that callback URL."""
    name = ApiToken.checked_name(name)
    unknown = sorted(set(scopes) - set(ApiToken.Scope.values))
    if unknown:
        raise ValueError(f"unknown scope {', '.join(unknown)}; known: {', '.join(ApiToken.Scope.values)}")
    prefix = secrets.token_hex(TOKEN_PREFIX_LEN // 2)
    plain = f"rq_{prefix}_{secrets.token_urlsafe(32)}"
    token = ApiToken.objects.create(
        name=name,
        prefix=prefix,
        token_hash=hash_token(plain),
        # In the order the scopes are declared, whatever order they came in.
        scopes=[scope for scope in ApiToken.Scope.values if scope in set(scopes)],
        created_by=created_by,
        webhook_url=webhook_url,
        webhook_secret=new_webhook_secret() if webhook_url else "",
    )
    return token, plain


def rotate_webhook_secret(token: ApiToken) -> str:
    """Give ``token`` a new signing secret, effective for the next attempt; the
    old one stops signing at once. Events a receiver refuses meanwhile are
    retried, so rotating loses nothing (docs/SECURITY.md)."""
    secret = new_webhook_secret()
    ApiToken.objects.filter(pk=token.pk).update(webhook_secret=secret)
    token.webhook_secret = secret
    return secret


def token_for(raw: str) -> ApiToken | None:
    """The active token matching ``raw``, compared in constant time."""
    parts = raw.split("_")
    if len(parts) < 3 or parts[0] != "rq" or len(parts[1]) != TOKEN_PREFIX_LEN:
        return None
    digest = hash_token(raw)
    for token in ApiToken.objects.filter(prefix=parts[1], revoked_at=None):
        if hmac.compare_digest(token.token_hash, digest):
            now = timezone.now()
            if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
                ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
            return token
    return None


def name_refusal(token: ApiToken) -> str:
    """Why ``token`` may not act under its name, or "": a name that breaks
    ``ApiToken.checked_name`` (a built-in loop run's ``loop:`` name above
    all) got there around the rule, e.g. by a direct database edit, and a
    token must never act as a loop. The API and /metrics answer 403 with
    ``RESERVED_NAME_ERROR``."""
    try:
        ApiToken.checked_name(token.name)
    except ValueError as exc:
        return f"this token's name {token.name[:100]!r} is refused: {exc}; an operator renames it in the admin"
    return ""


RESERVED_NAME_ERROR = "reserved_producer_name"


def bearer_token(request: HttpRequest) -> ApiToken | None:
    """The token from an ``Authorization: Bearer`` header, if valid."""
    header = request.headers.get("Authorization", "")
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        return None
    return token_for(raw.strip())
