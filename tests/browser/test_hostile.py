"""Hostile text in a real browser: no dialog opens, no script runs, and the
Content-Security-Policy is never violated by the pages themselves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reviewqueue.models import FilterRule, PolicyAudit, SimulationRun

pytestmark = pytest.mark.usefixtures("transactional_db")

HOSTILE = (
    "<script>window.pwned = 1; alert(1)</script>"
    '<img src=x onerror="window.pwned = 2; alert(2)">'
    '<a href="javascript:alert(3)">x</a>'
    '"><svg onload="window.pwned = 4; alert(4)">'
)
# Installed by the test before any page script: every CSP violation the browser
# reports is kept on window, so it can be read before the next navigation.
VIOLATION_PROBE = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__violations.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline'));
});
"""


@pytest.fixture(autouse=True)
def _fresh_login_budget() -> None:
    # The sign-in rate limit counts per address in the cache, shared by all tests.
    from django.core.cache import cache

    cache.clear()


class Watch:
    """Everything the browser says that would mean injected code or a blocked page resource."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.console: list[str] = []
        self.errors: list[str] = []
        self.violations: list[str] = []
        page.add_init_script(VIOLATION_PROBE)
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def collect(self) -> None:
        self.violations += self.page.evaluate("window.__violations || []")
        assert self.page.evaluate("window.pwned") is None

    def assert_quiet(self) -> None:
        csp_messages = [m for m in self.console if "Content Security Policy" in m or "Refused to" in m]
        assert self.dialogs == []
        assert self.violations == []
        assert csp_messages == []
        assert self.errors == []


@pytest.mark.slow
def test_no_hostile_field_opens_a_dialog_or_trips_the_csp(
    page: Any, login: Callable[..., None], live_server: Any, make_user: Any, admit_item: Any
) -> None:
    user = make_user("both", "reviewer", "operator")
    for _ in range(2):
        admit_item(task_description=HOSTILE, final_output=HOSTILE, last_error=HOSTILE, task_id=HOSTILE)
    FilterRule.objects.create(label="unclear", gate="parses", description=HOSTILE, decided_by=user)
    PolicyAudit.objects.create(user=user, changes={"capacity": [HOSTILE, HOSTILE]})
    run = SimulationRun.objects.create(
        created_by=user, name=HOSTILE[:100], params={}, status=SimulationRun.Status.FAILED, error=HOSTILE
    )
    watch = Watch(page)
    login(page, "both")

    page.goto(f"{live_server.url}/review/")
    page.click("form[action$='/review/next/'] button")
    page.wait_for_selector(".output")
    assert "<script>" in page.locator(".output").inner_text()
    page.fill("#note", HOSTILE)
    watch.collect()

    page.goto(f"{live_server.url}/ops/")
    # Stay for one poll, so the swapped-in live region is checked too.
    with page.expect_response(lambda r: r.url.endswith("/ops/") and r.request.headers.get("hx-request") == "true"):
        pass
    page.wait_for_load_state("networkidle")
    assert "<script>" in page.locator("#rules").inner_text()
    watch.collect()

    for path in ("/ops/policy/", "/ops/whatif/", f"/ops/whatif/{run.pk}/", "/ops/export/"):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
        watch.collect()
    watch.assert_quiet()
