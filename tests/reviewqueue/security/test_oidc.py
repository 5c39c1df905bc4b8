"""Sign-in through an OpenID Connect provider, against a provider on
127.0.0.1 whose answers each test shapes (tests/idp/scripted.py): the good
answer signs in with roles from the groups claim, and every hostile answer
is refused without signing anyone in."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.test import Client

from reviewqueue import oidc
from reviewqueue.models import ProviderIdentity, Queue, RoleAudit
from reviewqueue.services import identity
from tests.idp.scripted import ScriptedProvider, new_key

User = get_user_model()


@pytest.fixture
def provider() -> Iterator[ScriptedProvider]:
    scripted = ScriptedProvider()
    yield scripted
    scripted.stop()


@pytest.fixture
def oidc_on(settings: Any, provider: ScriptedProvider, roles: dict[str, Any]) -> Iterator[ScriptedProvider]:
    settings.OIDC_ISSUER = provider.issuer
    settings.OIDC_RP_CLIENT_ID = provider.client_id
    settings.OIDC_RP_CLIENT_SECRET = provider.client_secret
    settings.OIDC_REVIEWER_GROUPS = ["reviewers"]
    settings.OIDC_OPERATOR_GROUPS = ["operators"]
    settings.OIDC_PROVIDER_NAME = "Example SSO"
    settings.OIDC_ONLY = False
    oidc.forget_provider()
    cache.clear()  # the sign-in limits and used nonces
    yield provider
    oidc.forget_provider()


def start(client: Client, provider: ScriptedProvider, path: str = "/oidc/authenticate/", code: str = "code-1") -> dict:
    """The site sends the browser to the provider; the provider remembers
    the nonce and PKCE challenge for the code it will hand back."""
    response = client.get(path)
    assert response.status_code == 302, response.content[:300]
    assert response["Location"].startswith(f"{provider.issuer}/authorize/?")
    query = {k: v[0] for k, v in parse_qs(urlsplit(response["Location"]).query).items()}
    provider.authorize(query["nonce"], code)
    provider.challenges[code] = query["code_challenge"]
    return query


def finish(client: Client, query: dict, code: str = "code-1", state: str | None = None) -> Any:
    return client.get("/oidc/callback/", {"code": code, "state": state or query["state"]})


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def sign_in(client: Client, provider: ScriptedProvider, code: str = "code-1") -> Any:
    query = start(client, provider, code=code)
    return finish(client, query, code=code)


# --- the good answer ----------------------------------------------------------------------------


def test_a_reviewer_signs_in_with_state_nonce_and_pkce(oidc_on: ScriptedProvider, client: Client) -> None:
    query = start(client, oidc_on)
    assert query["response_type"] == "code"
    assert query["scope"] == "openid email profile"
    assert query["code_challenge_method"] == "S256"
    assert len(query["state"]) >= 32 and len(query["nonce"]) >= 32
    response = finish(client, query)
    assert response.status_code == 302 and response["Location"] == "/"
    assert signed_in(client)
    assert oidc_on.token_requests[0]["code_verifier"]  # PKCE: the provider checked it against the challenge
    identity_row = ProviderIdentity.objects.get(issuer=oidc_on.issuer, subject="sub-alice")
    user = identity_row.user
    assert set(user.groups.values_list("name", flat=True)) == {"reviewer", "idp:reviewers"}
    assert not user.has_usable_password()
    assert client.get("/").headers["Location"] == "/review/"
    audit = RoleAudit.objects.get(user=user)
    assert audit.changes["reviewer"] == [False, True] and audit.source == oidc_on.issuer


def test_an_operator_lands_on_ops(oidc_on: ScriptedProvider, client: Client) -> None:
    oidc_on.id_token = lambda nonce: oidc_on.sign(
        oidc_on.claims(nonce=nonce, sub="sub-olga", email="olga@example.test", groups=["operators"])
    )
    sign_in(client, oidc_on)
    assert client.get("/").headers["Location"] == "/ops/"


def test_the_user_is_found_by_sub_not_email(oidc_on: ScriptedProvider, client: Client) -> None:
    sign_in(client, oidc_on)
    client.logout()
    # The provider changed alice's email: still the same account, by sub.
    oidc_on.id_token = lambda nonce: oidc_on.sign(oidc_on.claims(nonce=nonce, email="alice.new@example.test"))
    sign_in(client, oidc_on, code="code-2")
    assert ProviderIdentity.objects.count() == 1 and User.objects.filter(provider_identities__isnull=False).count() == 1


def test_roles_follow_the_groups_at_every_sign_in_and_are_audited(oidc_on: ScriptedProvider, client: Client) -> None:
    sign_in(client, oidc_on)
    user = ProviderIdentity.objects.get().user
    client.logout()
    oidc_on.id_token = lambda nonce: oidc_on.sign(oidc_on.claims(nonce=nonce, groups=["operators"]))
    sign_in(client, oidc_on, code="code-2")
    assert set(user.groups.values_list("name", flat=True)) == {"operator", "idp:operators"}
    last = RoleAudit.objects.filter(user=user).latest("pk")
    assert last.changes["reviewer"] == [True, False] and last.changes["operator"] == [False, True]
    client.logout()
    oidc_on.id_token = lambda nonce: oidc_on.sign(oidc_on.claims(nonce=nonce, groups=[]))
    sign_in(client, oidc_on, code="code-3")
    assert list(user.groups.values_list("name", flat=True)) == []
    response = client.get("/")
    assert response.status_code == 403 and b"No role yet" in response.content
    assert client.get("/review/").status_code == 403 and client.get("/ops/").status_code == 403
    # The same groups again: nothing changes, nothing more is audited.
    audits = RoleAudit.objects.count()
    client.logout()
    sign_in(client, oidc_on, code="code-4")
    assert RoleAudit.objects.count() == audits


def test_a_provider_group_named_like_a_role_grants_nothing(oidc_on: ScriptedProvider, client: Client) -> None:
    oidc_on.id_token = lambda nonce: oidc_on.sign(oidc_on.claims(nonce=nonce, groups=["reviewer", "operator"]))
    sign_in(client, oidc_on)
    user = ProviderIdentity.objects.get().user
    assert set(user.groups.values_list("name", flat=True)) == {"idp:reviewer", "idp:operator"}
    assert client.get("/review/").status_code == 403


def test_queue_membership_follows_the_provider_groups(oidc_on: ScriptedProvider, client: Client) -> None:
    queue = Queue.objects.create(slug="team-a-work", name="Team A")
    queue.member_groups.set(identity.provider_groups(["team-a"]))
    oidc_on.id_token = lambda nonce: oidc_on.sign(oidc_on.claims(nonce=nonce, groups=["reviewers", "team-a"]))
    sign_in(client, oidc_on)
    user = ProviderIdentity.objects.get().user
    assert queue in Queue.objects.reviewable_by(user)
    client.logout()
    oidc_on.id_token = lambda nonce: oidc_on.sign(oidc_on.claims(nonce=nonce, groups=["reviewers"]))
    sign_in(client, oidc_on, code="code-2")
    assert queue not in Queue.objects.reviewable_by(User.objects.get(pk=user.pk))


def test_an_operator_names_provider_groups_on_a_queue(oidc_on: ScriptedProvider, client: Client, operator: Any) -> None:
    queue = Queue.objects.create(slug="team-b-work", name="Team B")
    client.force_login(operator)
    page = client.get(f"/ops/queues/{queue.slug}/")
    assert b"Provider groups" in page.content
    response = client.post(f"/ops/queues/{queue.slug}/", {"provider_groups": "team-b, team-c"})
    assert response.status_code == 302
    assert set(queue.member_groups.values_list("name", flat=True)) == {"idp:team-b", "idp:team-c"}
    assert b"team-b, team-c" in client.get(f"/ops/queues/{queue.slug}/").content


def test_the_groups_claim_name_is_configurable(oidc_on: ScriptedProvider, client: Client, settings: Any) -> None:
    settings.OIDC_GROUPS_CLAIM = "roles"
    oidc_on.id_token = lambda nonce: oidc_on.sign(oidc_on.claims(nonce=nonce, groups=None, roles=["operators"]))
    sign_in(client, oidc_on)
    assert client.get("/").headers["Location"] == "/ops/"


def test_groups_only_in_userinfo_count(oidc_on: ScriptedProvider, client: Client) -> None:
    oidc_on.id_token = lambda nonce: oidc_on.sign(oidc_on.claims(nonce=nonce, groups=None))
    oidc_on.userinfo = {"sub": "sub-alice", "groups": ["operators"]}
    sign_in(client, oidc_on)
    assert client.get("/").headers["Location"] == "/ops/"


def test_userinfo_about_someone_else_is_ignored(oidc_on: ScriptedProvider, client: Client) -> None:
    oidc_on.userinfo = {"sub": "sub-mallory", "groups": ["operators"]}
    sign_in(client, oidc_on)
    assert client.get("/").headers["Location"] == "/review/"


def test_a_rotated_key_is_fetched_again(oidc_on: ScriptedProvider, client: Client) -> None:
    sign_in(client, oidc_on)
    assert oidc_on.jwks_fetches == 1
    client.logout()
    sign_in(client, oidc_on, code="code-2")
    assert oidc_on.jwks_fetches == 1  # the kept keys serve
    client.logout()
    oidc_on.keys["k2"] = new_key()
    oidc_on.published = ["k2"]
    oidc_on.id_token = lambda nonce: oidc_on.sign(oidc_on.claims(nonce=nonce), kid="k2")
    response = sign_in(client, oidc_on, code="code-3")
    assert response.status_code == 302 and signed_in(client)
    assert oidc_on.jwks_fetches == 2


def test_sign_in_works_while_the_cache_is_down(oidc_on: ScriptedProvider, client: Client, settings: Any) -> None:
    # Nothing listens on port 1: every cache call fails, as with Redis gone.
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"}
    }
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.db"
    response = sign_in(client, oidc_on)
    assert response.status_code == 302 and signed_in(client)


def test_an_off_site_next_is_ignored(oidc_on: ScriptedProvider, client: Client) -> None:
    query = start(client, oidc_on, path="/oidc/authenticate/?next=https://evil.example/steal")
    assert finish(client, query)["Location"] == "/"
    client.logout()
    query = start(client, oidc_on, path="/oidc/authenticate/?next=/ops/queues/", code="code-2")
    assert finish(client, query, code="code-2")["Location"] == "/ops/queues/"


# --- hostile answers: each is refused and signs no one in ----------------------------------------


def refused(response: Any, client: Client, status: int = 400) -> None:
    assert response.status_code == status, response.content[:500]
    assert b'role="alert"' in response.content
    assert not signed_in(client)
    assert not ProviderIdentity.objects.exists()


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"iss": "https://evil.example/o"}, id="wrong-issuer"),
        pytest.param({"aud": "another-client"}, id="wrong-audience"),
        pytest.param({"aud": ["another-client", "reviewqueue"], "azp": "another-client"}, id="audience-for-another"),
        pytest.param({"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}, id="expired"),
        pytest.param({"exp": None}, id="no-expiry"),
    ],
)
def test_a_token_with_bad_claims_is_refused(oidc_on: ScriptedProvider, client: Client, overrides: dict) -> None:
    oidc_on.id_token = lambda nonce: oidc_on.sign(oidc_on.claims(nonce=nonce, **overrides))
    refused(sign_in(client, oidc_on), client)


def test_a_token_signed_by_another_key_is_refused(oidc_on: ScriptedProvider, client: Client) -> None:
    impostor = new_key()
    oidc_on.id_token = lambda nonce: oidc_on.sign(oidc_on.claims(nonce=nonce), kid="k1", key=impostor)
    refused(sign_in(client, oidc_on), client)


def test_a_token_naming_an_unpublished_key_is_refused(oidc_on: ScriptedProvider, client: Client) -> None:
    oidc_on.keys["k9"] = new_key()
    oidc_on.id_token = lambda nonce: oidc_on.sign(oidc_on.claims(nonce=nonce), kid="k9")
    refused(sign_in(client, oidc_on), client)


def test_an_unsigned_or_hmac_token_is_refused(oidc_on: ScriptedProvider, client: Client) -> None:
    import jwt

    oidc_on.id_token = lambda nonce: jwt.encode(oidc_on.claims(nonce=nonce), oidc_on.client_secret, algorithm="HS256")
    refused(sign_in(client, oidc_on), client)


@pytest.mark.parametrize("token", ["", "not-a-jwt", "a.b.c"], ids=["missing", "garbage", "three-dots"])
def test_a_malformed_id_token_is_refused(oidc_on: ScriptedProvider, client: Client, token: str) -> None:
    oidc_on.id_token = lambda nonce: token
    refused(sign_in(client, oidc_on), client)


def test_a_state_that_does_not_match_is_refused(oidc_on: ScriptedProvider, client: Client) -> None:
    query = start(client, oidc_on)
    refused(finish(client, query, state="not-the-state-we-sent"), client)
    assert oidc_on.token_requests == []  # refused before the code was even exchanged


def test_a_callback_without_a_sign_in_started_is_refused(oidc_on: ScriptedProvider, client: Client) -> None:
    refused(client.get("/oidc/callback/", {"code": "code-1", "state": "x" * 32}), client, status=403)


def test_a_replayed_nonce_is_refused(oidc_on: ScriptedProvider, client: Client) -> None:
    tokens: list[str] = []

    def remember(nonce: str) -> str:
        tokens.append(oidc_on.sign(oidc_on.claims(nonce=nonce)))
        return tokens[-1]

    oidc_on.id_token = remember
    sign_in(client, oidc_on)
    assert signed_in(client)
    client.logout()
    ProviderIdentity.objects.all().delete()
    # The provider hands back the first sign-in's ID token (its nonce) again.
    oidc_on.id_token = lambda nonce: tokens[0]
    refused(sign_in(client, oidc_on, code="code-2"), client)


def test_a_nonce_is_accepted_once_even_with_its_own_sign_in(oidc_on: ScriptedProvider) -> None:
    token = oidc_on.sign(oidc_on.claims(nonce="n" * 32))
    oidc.discovery()
    assert oidc.verify_id_token(token, nonce="n" * 32)["sub"] == "sub-alice"
    from django.core.exceptions import SuspiciousOperation

    with pytest.raises(SuspiciousOperation, match="already used"):
        oidc.verify_id_token(token, nonce="n" * 32)


def test_an_email_colliding_with_a_local_user_is_refused(oidc_on: ScriptedProvider, client: Client) -> None:
    local = User.objects.create_user("alice-local", email="Alice@Example.test", password="pw-for-tests-1")
    local.groups.add(Group.objects.get(name="operator"))
    response = sign_in(client, oidc_on)
    refused(response, client, status=403)
    assert b"already exists" in response.content
    assert User.objects.count() == 1


def test_a_discovery_document_for_another_issuer_is_refused(
    oidc_on: ScriptedProvider, client: Client, settings: Any
) -> None:
    settings.OIDC_ISSUER = oidc_on.issuer.replace("/o", "/other")
    oidc.forget_provider()
    response = client.get("/oidc/authenticate/")
    assert response.status_code == 503 and not signed_in(client)


def test_the_callback_is_throttled(oidc_on: ScriptedProvider, client: Client, settings: Any) -> None:
    settings.LOGIN_RATE_LIMIT = "3/m"
    statuses = [client.get("/oidc/callback/", {"code": "c", "state": "s"}).status_code for _ in range(5)]
    assert statuses[:3] == [403, 403, 403] and statuses[3:] == [429, 429]


# --- sessions: re-checked with the provider, and sign-out there ----------------------------------


def test_a_session_is_rechecked_after_the_bound(oidc_on: ScriptedProvider, client: Client) -> None:
    sign_in(client, oidc_on)
    assert client.get("/review/").status_code == 200
    session = client.session
    session["oidc_id_token_expiration"] = time.time() - 1
    session.save()
    response = client.get("/review/")
    assert response.status_code == 302
    assert response["Location"] == "/oidc/authenticate/?next=%2Freview%2F&silent=1"
    htmx = client.get("/review/next/", headers={"HX-Request": "true"})
    assert htmx.status_code == 401 and htmx["HX-Refresh"] == "true"
    # The silent re-check asks the provider not to prompt; the provider now
    # says alice is in no group, and the role goes.
    query = start(client, oidc_on, path=response["Location"], code="code-2")
    assert query["prompt"] == "none"
    oidc_on.id_token = lambda nonce: oidc_on.sign(oidc_on.claims(nonce=nonce, groups=[]))
    assert finish(client, query, code="code-2")["Location"] == "/review/"
    assert client.get("/review/").status_code == 403


def test_a_silent_recheck_the_provider_refuses_signs_out(oidc_on: ScriptedProvider, client: Client) -> None:
    sign_in(client, oidc_on)
    query = start(client, oidc_on, path="/oidc/authenticate/?silent=1", code="code-2")
    response = client.get("/oidc/callback/", {"error": "login_required", "state": query["state"]})
    assert response.status_code == 401 and not signed_in(client)


def test_a_user_deactivated_here_is_signed_out_and_kept_out(oidc_on: ScriptedProvider, client: Client) -> None:
    sign_in(client, oidc_on)
    User.objects.filter(provider_identities__isnull=False).update(is_active=False)
    assert client.get("/review/").status_code == 302  # to the sign-in page: the session's user is gone
    response = sign_in(client, oidc_on, code="code-2")
    assert response.status_code == 403 and b"deactivated" in response.content and not signed_in(client)


def test_a_password_session_is_not_rechecked(oidc_on: ScriptedProvider, client: Client, reviewer: Any) -> None:
    client.force_login(reviewer, backend="django.contrib.auth.backends.ModelBackend")
    assert client.get("/review/").status_code == 200


def test_sign_out_ends_the_provider_session_too(oidc_on: ScriptedProvider, client: Client) -> None:
    sign_in(client, oidc_on)
    response = client.post("/logout/")
    location = urlsplit(response["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == f"{oidc_on.issuer}/logout/"
    params = {k: v[0] for k, v in parse_qs(location.query).items()}
    assert params["post_logout_redirect_uri"] == "http://testserver/login/"
    assert params["id_token_hint"].count(".") == 2 and params["client_id"] == "reviewqueue"
    assert not signed_in(client)


def test_a_password_user_signs_out_locally(oidc_on: ScriptedProvider, client: Client, reviewer: Any) -> None:
    client.force_login(reviewer, backend="django.contrib.auth.backends.ModelBackend")
    assert client.post("/logout/")["Location"] == "/login/"


# --- the sign-in pages with and without the provider, OIDC_ONLY on and off ----------------------


def test_without_an_issuer_nothing_changes(client: Client, reviewer: Any, settings: Any) -> None:
    settings.OIDC_ISSUER = ""
    page = client.get("/login/")
    assert b"Sign in with" not in page.content and b'name="password"' in page.content
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/", {"code": "c", "state": "s"}).status_code == 404
    assert client.get("/login/password/").status_code == 404
    assert client.post("/login/", {"username": "rita", "password": "pw-for-tests-1"}).status_code == 302


def test_the_login_page_offers_the_provider_and_passwords(
    oidc_on: ScriptedProvider, client: Client, reviewer: Any
) -> None:
    page = client.get("/login/?next=/ops/")
    assert b"Sign in with Example SSO" in page.content
    assert b'href="/oidc/authenticate/?next=%2Fops%2F"' in page.content
    assert b'name="password"' in page.content
    assert b"evil.example" not in client.get("/login/?next=https://evil.example/").content.split(b"<form")[0]
    assert client.get("/login/password/").status_code == 404
    assert client.post("/login/", {"username": "rita", "password": "pw-for-tests-1"}).status_code == 302


def test_oidc_only_takes_no_password_but_keeps_break_glass(
    oidc_on: ScriptedProvider, client: Client, reviewer: Any, settings: Any, django_user_model: Any
) -> None:
    settings.OIDC_ONLY = True
    page = client.get("/login/")
    assert b"Sign in with Example SSO" in page.content and b'name="password"' not in page.content
    assert client.post("/login/", {"username": "rita", "password": "pw-for-tests-1"}).status_code == 403
    assert not signed_in(client)
    assert client.get("/admin/login/").status_code == 302  # the admin takes no password either
    assert client.post("/admin/login/", {"username": "rita", "password": "pw-for-tests-1"}).status_code == 302
    assert not signed_in(client)
    glass = client.get("/login/password/")
    assert glass.status_code == 200 and b'name="password"' in glass.content
    # Only a superuser gets in there, and a reviewer's right password gets the wrong one's answer.
    right = client.post("/login/password/", {"username": "rita", "password": "pw-for-tests-1"})
    wrong = client.post("/login/password/", {"username": "rita", "password": "not-it"})
    assert right.status_code == wrong.status_code == 200 and not signed_in(client)
    assert right.content.split(b'role="alert">')[1][:60] == wrong.content.split(b'role="alert">')[1][:60]
    django_user_model.objects.create_superuser("root", password="pw-for-tests-1")
    assert client.post("/login/password/", {"username": "root", "password": "pw-for-tests-1"}).status_code == 302
    assert signed_in(client)


def test_break_glass_is_throttled(oidc_on: ScriptedProvider, client: Client, settings: Any) -> None:
    settings.OIDC_ONLY = True
    settings.LOGIN_RATE_LIMIT = "2/m"
    statuses = [
        client.post("/login/password/", {"username": "root", "password": "wrong"}).status_code for _ in range(4)
    ]
    assert statuses == [200, 200, 429, 429]


def test_oidc_only_without_an_issuer_keeps_passwords(client: Client, reviewer: Any, settings: Any) -> None:
    settings.OIDC_ISSUER = ""
    settings.OIDC_ONLY = True
    assert client.post("/login/", {"username": "rita", "password": "pw-for-tests-1"}).status_code == 302
