"""The card's cutoff block for a loop that went backwards: which attempt the
reviewer judges, its grade, and what each failing check is for."""

from __future__ import annotations

import pytest
from django.urls import reverse

from reviewqueue import services

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture(autouse=True)
def _fresh_login_budget():
    # The real login is rate-limited per address, and every test signs in from the same one.
    from django.core.cache import cache

    cache.clear()


@pytest.mark.parametrize("width", [1280, 390])
def test_it_shows_the_best_attempt_and_what_its_failing_checks_are_for(
    new_context, login, live_server, make_user, admit_item, artifacts, width
):
    rita = make_user("rita", "reviewer")
    admit_item(
        task_description="Write roman(n) for 1 to 49.",
        final_output="def roman(n):\n    return 'XXXX' if n == 40 else 'I' * n\n",
        cutoff_reason="regression",
        attempt_count=5,
        reviewed_attempt=3,
        checks_passed=4,
        checks_total=5,
        last_error="AssertionError at check_5 (attempt 3)",
        failing_checks=[
            {"id": "check_5", "about": "subtractive forty, written XL and not XXXX, for the tens above thirty"}
        ],
    )
    services.claim(reviewer=rita)
    page = new_context(viewport={"width": width, "height": 900}).new_page()
    login(page, "rita")
    page.goto(f"{live_server.url}{reverse('review:queue')}")

    cutoff = page.locator("#cutoff")
    assert "regression: later attempts got worse" in cutoff.inner_text()
    assert "attempt 3 of 5, the best: 4 of 5 checks" in cutoff.inner_text()
    assert "Error of attempt 3" in cutoff.inner_text()
    failing = page.locator(".failing-checks li")
    assert failing.count() == 1 and failing.first.is_visible()
    assert failing.first.inner_text().startswith("check_5 subtractive forty")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    path = artifacts / f"review-failing-checks-{width}px.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 0
