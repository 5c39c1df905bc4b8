"""Signing in through a real OpenID Connect provider in Chromium: the
provider is django-oauth-toolkit, run as its own process on 127.0.0.1
(tests/idp), with cookies of its own names. Reviewers land on the review
page, operators on the dashboard, people in no group on the no-role page
alone; a person taken out of a group loses the role at the next sign-in and
when the session is re-checked. Every test runs with OIDC_ONLY off and on."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache
from django.test import override_settings
from django.utils.module_loading import import_string

from reviewqueue import oidc
from reviewqueue.access import ensure_groups
from reviewqueue.models import ProviderIdentity, RoleAudit
from tests.idp.running import RunningProvider, start_provider
from tests.idp.serve import PASSWORD

pytestmark = pytest.mark.usefixtures("transactional_db")

VIOLATION_PROBE = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__violations.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline'));
});
"""
NO_ROLE_STATUS = "the server responded with a status of 403"


@pytest.fixture(scope="session")
def site(live_server: Any) -> str:
    """The live server by address, like the provider: both on 127.0.0.1,
    where only their cookies' names keep the two sessions apart."""
    return f"http://127.0.0.1:{live_server.thread.port}"


@pytest.fixture(scope="session")
def provider(site: str) -> Iterator[RunningProvider]:
    running = start_provider(site)
    yield running
    running.stop()


@pytest.fixture(params=[False, True], ids=["passwords-too", "oidc-only"])
def oidc_only(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
def idp(settings: Any, provider: RunningProvider, oidc_only: bool) -> Iterator[RunningProvider]:
    settings.OIDC_ISSUER = provider.issuer
    settings.OIDC_RP_CLIENT_ID = provider.client_id
    settings.OIDC_RP_CLIENT_SECRET = provider.client_secret
    settings.OIDC_REVIEWER_GROUPS = ["reviewers"]
    settings.OIDC_OPERATOR_GROUPS = ["operators"]
    settings.OIDC_PROVIDER_NAME = "Test IdP"
    settings.OIDC_ONLY = oidc_only
    # As settings.py does for a configured issuer: sign-out's redirect there is a form action.
    policy = copy.deepcopy(django_settings.CONTENT_SECURITY_POLICY)
    policy["DIRECTIVES"]["form-action"].append(provider.origin)
    settings.CONTENT_SECURITY_POLICY = policy
    for name, groups in {"alice": ["reviewers"], "olga": ["operators"], "nora": []}.items():
        provider.set_groups(name, groups)
    oidc.forget_provider()
    cache.clear()
    ensure_groups()
    yield provider
    oidc.forget_provider()


def watch_csp(page: Any) -> Any:
    page.add_init_script(VIOLATION_PROBE)
    return page


def assert_csp_clean(page: Any) -> None:
    assert page.evaluate("window.__violations || []") == []
    assert page.locator("script:not([src])").count() == 0  # no inline script on our pages


def sign_in(page: Any, site: str, idp: RunningProvider, username: str) -> None:
    """From the site's sign-in page, through the provider's, and back."""
    page.goto(f"{site}/login/")
    assert_csp_clean(page)
    page.click("#oidc-sign-in")
    page.wait_for_url(f"{idp.origin}/accounts/login/**")
    page.fill("#idp-username", username)
    page.fill("#idp-password", PASSWORD)
    page.click("#idp-submit")
    page.wait_for_url(f"{site}/**")
    page.wait_for_load_state("networkidle")


def sign_out(page: Any, site: str) -> None:
    page.click("form.logout button[type=submit]")
    page.wait_for_url(f"{site}/login/")
    page.wait_for_load_state("networkidle")


def shoot(page: Any, artifacts: Path, name: str) -> None:
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(100)
        sideways = page.evaluate("document.documentElement.scrollWidth > document.documentElement.clientWidth")
        assert not sideways, f"{name} scrolls sideways at {width} px"
        page.screenshot(path=str(artifacts / f"oidc-{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


def expect_no_role_status(console_errors: list[str]) -> None:
    """The no-role page answers 403 (as without a provider); Chromium logs
    that status, which is the one console line expected."""
    expected = [e for e in console_errors if NO_ROLE_STATUS in e]
    assert expected, "the no-role page should answer 403"
    for line in expected:
        console_errors.remove(line)


def test_a_reviewer_lands_on_the_review_page(
    page: Any, site: str, idp: RunningProvider, oidc_only: bool, artifacts: Path
) -> None:
    watch_csp(page)
    page.goto(f"{site}/login/")
    assert page.locator("#oidc-sign-in").inner_text() == "Sign in with Test IdP"
    assert (page.locator("#id_password").count() == 0) is oidc_only
    shoot(page, artifacts, f"login-{'only' if oidc_only else 'both'}")
    sign_in(page, site, idp, "alice")
    assert page.url == f"{site}/review/"
    assert_csp_clean(page)
    identity = ProviderIdentity.objects.get(issuer=idp.issuer)
    assert identity.user.username == "alice" and identity.groups == ["reviewers"]
    assert RoleAudit.objects.get(user=identity.user).changes["reviewer"] == [False, True]


def test_an_operator_lands_on_the_dashboard(page: Any, site: str, idp: RunningProvider) -> None:
    watch_csp(page)
    sign_in(page, site, idp, "olga")
    assert page.url == f"{site}/ops/"
    assert_csp_clean(page)


def test_someone_in_no_group_sees_the_no_role_page_only(
    page: Any, site: str, idp: RunningProvider, artifacts: Path, console_errors: list[str], oidc_only: bool
) -> None:
    watch_csp(page)
    sign_in(page, site, idp, "nora")
    assert page.url == f"{site}/"
    assert page.locator("h1").inner_text() == "No role yet"
    assert "Test IdP" in page.locator("#no-role").inner_text()
    # Nothing else: no navigation, and every page refuses.
    assert page.locator("nav[aria-label=Main] a").count() == 0
    assert_csp_clean(page)
    if not oidc_only:
        shoot(page, artifacts, "no-role")
    for path in ("/review/", "/ops/", "/ops/queues/"):
        assert page.goto(f"{site}{path}").status == 403
    page.goto(f"{site}/admin/")
    assert "/admin/login/" in page.url and page.locator("#content-main a").count() == 0
    expect_no_role_status(console_errors)


def test_taken_out_of_the_group_loses_the_role_at_next_sign_in(
    page: Any, site: str, idp: RunningProvider, console_errors: list[str]
) -> None:
    watch_csp(page)
    sign_in(page, site, idp, "alice")
    assert page.url == f"{site}/review/"
    idp.set_groups("alice", [])
    sign_out(page, site)  # also ends the provider's session: the next sign-in asks for a password
    sign_in(page, site, idp, "alice")
    assert page.locator("h1").inner_text() == "No role yet"
    user = ProviderIdentity.objects.get().user
    assert RoleAudit.objects.filter(user=user).latest("pk").changes["reviewer"] == [True, False]
    expect_no_role_status(console_errors)


# Operators review by default; this page is about a team that keeps the roles apart.
@override_settings(REVIEWQUEUE_OPERATORS_REVIEW=False)
def test_a_session_rechecked_with_the_provider_loses_a_removed_role(
    page: Any, site: str, idp: RunningProvider, console_errors: list[str]
) -> None:
    watch_csp(page)
    sign_in(page, site, idp, "alice")
    idp.set_groups("alice", ["operators"])
    # The session's check is due (as after OIDC_RECHECK_SECONDS): the next
    # page goes through the provider without a prompt, and comes back with
    # the roles it now says.
    cookie = next(c for c in page.context.cookies() if c["name"] == django_settings.SESSION_COOKIE_NAME)
    store = import_string(f"{django_settings.SESSION_ENGINE}.SessionStore")(cookie["value"])
    store["oidc_id_token_expiration"] = 0
    store.save()
    response = page.goto(f"{site}/review/")
    page.wait_for_load_state("networkidle")
    assert response.status == 403 and page.url == f"{site}/review/"
    page.goto(f"{site}/")
    assert page.url == f"{site}/ops/"
    console_errors[:] = [e for e in console_errors if "status of 403" not in e]


@pytest.mark.parametrize("oidc_only", [True], ids=["oidc-only"], indirect=True)
def test_the_break_glass_page(page: Any, site: str, idp: RunningProvider, artifacts: Path) -> None:
    watch_csp(page)
    page.goto(f"{site}/login/")
    assert page.locator("#id_password").count() == 0
    response = page.goto(f"{site}/login/password/")
    assert response.status == 200 and page.locator("#id_password").count() == 1
    assert page.locator("#oidc-sign-in").count() == 0
    assert_csp_clean(page)
    shoot(page, artifacts, "break-glass")


@pytest.mark.parametrize("oidc_only", [False], ids=["passwords-too"], indirect=True)
def test_a_refused_answer_shows_the_sign_in_page_with_the_reason(
    page: Any, site: str, idp: RunningProvider, artifacts: Path, console_errors: list[str]
) -> None:
    watch_csp(page)
    response = page.goto(f"{site}/oidc/callback/?code=forged&state=forged")
    assert response.status == 403
    assert "failed" in page.locator("p.error[role=alert]").inner_text()
    assert page.locator("#oidc-sign-in").count() == 1
    assert_csp_clean(page)
    shoot(page, artifacts, "refused")
    console_errors[:] = [e for e in console_errors if "status of 403" not in e]


@pytest.mark.parametrize("oidc_only", [True], ids=["oidc-only"], indirect=True)
def test_an_operator_names_provider_groups_on_a_queue(
    page: Any, site: str, idp: RunningProvider, artifacts: Path
) -> None:
    from reviewqueue.models import Queue

    queue = Queue.objects.create(slug="team-a-work", name="Team A")
    watch_csp(page)
    sign_in(page, site, idp, "olga")
    page.goto(f"{site}/ops/queues/{queue.slug}/")
    page.fill("#id_provider_groups", "team-a, reviewers")
    page.click("#members-form button[type=submit]")
    page.wait_for_load_state("networkidle")
    assert page.locator("#id_provider_groups").input_value() == "reviewers, team-a"
    assert set(queue.member_groups.values_list("name", flat=True)) == {"idp:team-a", "idp:reviewers"}
    assert_csp_clean(page)
    shoot(page, artifacts, "queue-provider-groups")
