"""Sign-in through the team's OpenID Connect provider, on mozilla-django-oidc.

The library runs the authorization code flow with ``state``, ``nonce`` and
PKCE. This module adds what it leaves to its users:

* endpoints from the issuer's discovery document, fetched on first use and
  cached, so start-up never needs the provider;
* the ID token checked in full: signature against the provider's JWKS (kept,
  and fetched again when a token names a key it does not hold, as after a
  rotation), issuer, audience, expiry, and a nonce used once only;
* the user found by issuer + ``sub``, roles and queue groups set from the
  groups claim at every sign-in (``services.identity``);
* the session checked with the provider again after
  ``OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS`` (``RecheckMiddleware``).

Without ``OIDC_ISSUER`` every piece here is inert.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import jwt
import requests
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.cache import cache
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from .services import identity

log = logging.getLogger(__name__)

# Asymmetric algorithms only: "none" and HMAC (keyed with the client secret)
# are never accepted for an ID token.
ALLOWED_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
DISCOVERY_SECONDS = 3600
CLOCK_SKEW_SECONDS = 60
BACKEND_PATH = "reviewqueue.oidc.ProviderBackend"


class ProviderUnavailable(Exception):
    """The provider's discovery document or keys could not be read."""


def enabled() -> bool:
    return bool(getattr(settings, "OIDC_ISSUER", ""))


def only() -> bool:
    """Passwords are refused at the ordinary sign-in (break-glass stays)."""
    return enabled() and bool(getattr(settings, "OIDC_ONLY", False))


def _get_json(url: str) -> dict[str, Any]:
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        data = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderUnavailable(f"{url}: {exc}") from exc
    if not isinstance(data, dict):
        raise ProviderUnavailable(f"{url}: not a JSON object")
    return data


_memo: dict[str, tuple[float, dict[str, Any]]] = {}
_memo_lock = threading.Lock()


def discovery() -> dict[str, Any]:
    """The issuer's ``/.well-known/openid-configuration``, kept an hour (in
    the process, and in the shared cache so other processes skip the fetch).
    Its ``issuer`` must be the configured one (OpenID Connect Discovery 4.3)."""
    issuer = settings.OIDC_ISSUER
    key = f"reviewqueue:oidc:discovery:{hashlib.sha256(issuer.encode()).hexdigest()[:16]}"
    now = time.monotonic()
    with _memo_lock:
        found = _memo.get(key)
    if found and now - found[0] < DISCOVERY_SECONDS:
        return found[1]
    try:
        document = cache.get(key)
    except Exception:  # noqa: BLE001 - the cache is an optimisation; fetch instead
        document = None
    if not document:
        document = _get_json(f"{issuer}/.well-known/openid-configuration")
        if str(document.get("issuer", "")).rstrip("/") != issuer:
            raise ProviderUnavailable(f"discovery names issuer {document.get('issuer')!r}, not {issuer!r}")
        for field in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
            if not document.get(field):
                raise ProviderUnavailable(f"discovery has no {field}")
        try:
            cache.set(key, document, DISCOVERY_SECONDS)
        except Exception:  # noqa: BLE001
            log.warning("oidc discovery not cached: cache unavailable")
    with _memo_lock:
        _memo[key] = (now, document)
    return document


def forget_provider() -> None:
    """Drop the kept discovery document and keys (tests, a changed issuer)."""
    with _memo_lock:
        _memo.clear()
    _jwks.clear()


_jwks: dict[str, tuple[float, dict[str, Any]]] = {}


def signing_key(token: str) -> jwt.PyJWK:
    """The provider's key that signed ``token``: from the kept JWKS, or from
    a fresh fetch when the token names a key it does not hold (a rotation)."""
    header = jwt.get_unverified_header(token)
    alg = header.get("alg")
    if alg not in ALLOWED_ALGORITHMS:
        raise SuspiciousOperation(f"ID token algorithm {alg!r} is not accepted")
    uri = discovery()["jwks_uri"]
    kid = header.get("kid")

    def find(keys: dict[str, Any]) -> dict[str, Any] | None:
        candidates = [k for k in keys.get("keys", []) if isinstance(k, dict) and k.get("use", "sig") == "sig"]
        candidates = [k for k in candidates if k.get("alg", alg) == alg]
        if kid is not None:
            candidates = [k for k in candidates if k.get("kid") == kid]
        return candidates[0] if len(candidates) == 1 or (kid and candidates) else None

    kept = _jwks.get(uri)
    match = find(kept[1]) if kept else None
    # ID tokens come from the provider's token endpoint, never from the
    # browser, so an unknown key is a rotation, worth a fetch each time.
    if match is None:
        keys = _get_json(uri)
        _jwks[uri] = (time.monotonic(), keys)
        match = find(keys)
    if match is None:
        raise SuspiciousOperation(f"no key {kid!r} in the provider's JWKS")
    return jwt.PyJWK(match, algorithm=alg)


def verify_id_token(token: str, *, nonce: str | None) -> dict[str, Any]:
    """The ID token's claims, once its signature, issuer, audience, expiry
    and nonce check out; SuspiciousOperation otherwise. A nonce is accepted
    once: a replayed token is refused even within its lifetime."""
    if not token:
        raise SuspiciousOperation("the provider sent no ID token")
    try:
        key = signing_key(token)
        claims = jwt.decode(
            token,
            key,
            algorithms=[key.algorithm_name],
            audience=settings.OIDC_RP_CLIENT_ID,
            issuer=settings.OIDC_ISSUER,
            leeway=CLOCK_SKEW_SECONDS,
            options={"require": ["iss", "aud", "exp", "iat", "sub"]},
        )
    except jwt.PyJWTError as exc:
        raise SuspiciousOperation(f"ID token refused: {exc}") from exc
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != settings.OIDC_RP_CLIENT_ID:
        raise SuspiciousOperation("ID token for several audiences without this client as azp")
    if not nonce or claims.get("nonce") != nonce:
        raise SuspiciousOperation("ID token nonce does not match this sign-in")
    used = f"reviewqueue:oidc:nonce:{hashlib.sha256(nonce.encode()).hexdigest()}"
    try:
        fresh = cache.add(used, 1, timeout=max(int(claims["exp"] - time.time()) + CLOCK_SKEW_SECONDS, 60))
    except Exception:  # noqa: BLE001 - the session's one-use state already bound this nonce
        log.warning("oidc nonce not recorded: cache unavailable")
        fresh = True
    if not fresh:
        raise SuspiciousOperation("ID token nonce was already used")
    return claims


class ProviderBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend with endpoints from discovery, the full
    ID token check above, and users found by issuer + sub.

    Built for every request that reads a signed-in user (Django's
    ``get_user``), so its constructor reads nothing and fetches nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.UserModel = get_user_model()
        self.OIDC_RP_SIGN_ALGO = "RS256"  # read only by the library's own (replaced) checks
        self.OIDC_RP_IDP_SIGN_KEY = None

    # The library reads these as attributes; they come from discovery.
    @property
    def OIDC_OP_TOKEN_ENDPOINT(self) -> str:
        return str(discovery()["token_endpoint"])

    @property
    def OIDC_OP_USER_ENDPOINT(self) -> str:
        return str(discovery().get("userinfo_endpoint") or "")

    @property
    def OIDC_OP_JWKS_ENDPOINT(self) -> str:
        return str(discovery()["jwks_uri"])

    @property
    def OIDC_RP_CLIENT_ID(self) -> str:
        return str(settings.OIDC_RP_CLIENT_ID)

    @property
    def OIDC_RP_CLIENT_SECRET(self) -> str:
        return str(settings.OIDC_RP_CLIENT_SECRET)

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        # Only the callback (which passes the nonce) signs in here; a
        # username and password never reach the provider's backend.
        if not enabled() or request is None or "nonce" not in kwargs:
            return None
        return super().authenticate(request, **kwargs)

    def get_user(self, user_id: Any) -> Any:
        # Django's check, not the library's: a user deactivated here is
        # signed out at their next request, whatever the provider says.
        return ModelBackend.get_user(self, user_id)

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        return verify_id_token(token, nonce=kwargs.get("nonce"))

    def get_userinfo(self, access_token: str, id_token: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The ID token's claims, completed from the userinfo endpoint when
        the provider has one (some put groups only there). The userinfo
        answer must be about the same ``sub``."""
        claims = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT and access_token:
            try:
                response = requests.get(
                    self.OIDC_OP_USER_ENDPOINT,
                    headers={"Authorization": f"Bearer {access_token}"},
                    timeout=settings.OIDC_TIMEOUT,
                )
                response.raise_for_status()
                info = response.json()
            except (requests.RequestException, ValueError) as exc:
                log.warning("oidc userinfo unavailable; using the ID token alone", extra={"error": str(exc)[:200]})
                info = {}
            if isinstance(info, dict) and info.get("sub") == payload.get("sub"):
                claims = {**info, **payload}
        return claims

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        claims = self.get_userinfo(access_token, id_token, payload)
        groups = identity.groups_from_claim(claims.get(settings.OIDC_GROUPS_CLAIM))
        try:
            return identity.sign_in_from_provider(
                issuer=settings.OIDC_ISSUER,
                claims=claims,
                groups=groups,
                reviewer_groups=settings.OIDC_REVIEWER_GROUPS,
                operator_groups=settings.OIDC_OPERATOR_GROUPS,
            )
        except identity.IdentityRefused as exc:
            self.request.oidc_refused = str(exc)  # type: ignore[attr-defined]
            log.warning("oidc sign-in refused", extra={"sub": claims.get("sub"), "reason": str(exc)})
            return None


def from_provider(request: HttpRequest) -> bool:
    """This session was signed in through the provider."""
    return bool(request.session.get(BACKEND_SESSION_KEY) == BACKEND_PATH)


def safe_next(request: HttpRequest, value: str | None) -> str | None:
    """``value`` when it stays on this site, else None (an off-site ``next`` is ignored)."""
    if value and url_has_allowed_host_and_scheme(
        value, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return value
    return None


def end_session_url(request: HttpRequest) -> str | None:
    """Where to send the browser to end the provider's session too, or None
    when the provider has no ``end_session_endpoint``. Read before the
    local session is flushed (it holds the ID token hint)."""
    try:
        endpoint = discovery().get("end_session_endpoint")
    except ProviderUnavailable:
        return None
    if not endpoint:
        return None
    params = {
        "client_id": settings.OIDC_RP_CLIENT_ID,
        "post_logout_redirect_uri": request.build_absolute_uri(reverse("login")),
    }
    hint = request.session.get("oidc_id_token")
    if hint:
        params["id_token_hint"] = hint
    return f"{endpoint}?{urlencode(params)}"


class RecheckMiddleware:
    """A session from the provider is checked with it again once its check
    is older than ``OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS``: the browser goes
    through the sign-in again (silently, with ``prompt=none``, while the
    provider's own session lasts), which sets the roles anew, or is signed
    out when the provider says no. An htmx request is told to reload the
    page, which then does that; any other request that is not a GET is sent
    through the sign-in before it runs."""

    EXEMPT = ("oidc_authenticate", "oidc_callback", "logout", "health", "login", "login_password")

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if enabled() and request.user.is_authenticated and from_provider(request):
            expiry = request.session.get("oidc_id_token_expiration", 0)
            if expiry <= time.time() and request.path not in {reverse(name) for name in self.EXEMPT}:
                return self.recheck(request)
        return self.get_response(request)

    def recheck(self, request: HttpRequest) -> HttpResponse:
        if request.headers.get("HX-Request"):
            response = HttpResponse(status=401)
            response["HX-Refresh"] = "true"
            return response
        target = request.get_full_path() if request.method == "GET" else reverse("home")
        return HttpResponseRedirect(f"{reverse('oidc_authenticate')}?{urlencode({'next': target, 'silent': '1'})}")
