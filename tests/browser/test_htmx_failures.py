"""A failed htmx request is said on every page: an error answer, a 503, no
answer at all and a timeout each show the site-wide notice, and the page
stays whole (no bare fragment in place of the document). Shown here on the
operators' dashboard, whose live region polls, and on the quality page,
whose own script says refusals beside its forms."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.django_db(transaction=True)


def fail_polls(page: Any, how: Any) -> None:
    """Every htmx request of the page meets ``how``; the page itself loads."""

    def handle(route: Any) -> None:
        if route.request.headers.get("hx-request") == "true":
            how(route)
        else:
            route.continue_()

    page.route("**/ops/**", handle)


def drop_expected(console_errors: list[str], *marks: str) -> None:
    """The browser and htmx log the failure provoked on purpose; nothing else
    may have gone wrong."""
    console_errors[:] = [e for e in console_errors if not any(mark in e for mark in marks)]


def expect_whole_page(page: Any) -> None:
    expect(page.locator("header.topbar")).to_be_visible()
    expect(page.locator("#live")).to_be_visible()


@pytest.mark.parametrize(
    ("status", "said"),
    [(500, "The server failed (500)"), (503, "The database is unavailable")],
    ids=["500", "503"],
)
def test_an_error_answer_to_a_poll_is_said_then_cleared_once_a_poll_works(
    page: Any, login: Any, live_server: Any, operator: Any, console_errors: list[str], status: int, said: str
) -> None:
    login(page, "otto")
    page.goto(f"{live_server.url}/ops/")
    notice = page.locator("#htmx-problem")
    expect(notice).to_be_hidden()
    fail_polls(page, lambda route: route.fulfill(status=status, body="<p>bare fragment</p>"))
    expect(notice).to_contain_text(said, timeout=15_000)
    expect(notice).to_have_attribute("role", "alert")
    expect_whole_page(page)
    assert "bare fragment" not in page.content()
    page.unroute("**/ops/**")
    expect(notice).to_be_hidden(timeout=40_000)
    drop_expected(console_errors, str(status), "htmx:responseError", "htmx:afterRequest")


def test_no_answer_at_all_is_said(
    page: Any, login: Any, live_server: Any, operator: Any, console_errors: list[str]
) -> None:
    login(page, "otto")
    page.goto(f"{live_server.url}/ops/")
    fail_polls(page, lambda route: route.abort("connectionrefused"))
    expect(page.locator("#htmx-problem")).to_contain_text("The server did not answer", timeout=15_000)
    expect_whole_page(page)
    drop_expected(console_errors, "ERR_CONNECTION_REFUSED", "htmx:sendError", "htmx:afterRequest")


def test_a_timeout_is_said(page: Any, login: Any, live_server: Any, operator: Any, console_errors: list[str]) -> None:
    login(page, "otto")
    page.goto(f"{live_server.url}/ops/")
    page.evaluate("htmx.config.timeout = 300")
    held: list[Any] = []
    fail_polls(page, held.append)  # never answered
    expect(page.locator("#htmx-problem")).to_contain_text("took too long", timeout=15_000)
    expect_whole_page(page)
    drop_expected(console_errors, "htmx:timeout", "htmx:afterRequest")


def test_the_quality_page_says_a_lost_connection_too(
    page: Any, login: Any, live_server: Any, operator: Any, console_errors: list[str]
) -> None:
    """Its own script says refused answers beside the form; no answer at all
    was silent there."""
    login(page, "otto")
    page.goto(f"{live_server.url}/ops/quality/")
    page.evaluate(
        """() => {
        const form = document.createElement('form');
        form.setAttribute('hx-post', '/ops/quality/');
        form.id = 'probe';
        form.innerHTML = '<button type=submit id=probe-button>Go</button>';
        document.querySelector('#quality').append(form);
        htmx.process(form);
    }"""
    )
    page.route(
        "**/ops/quality/",
        lambda route: route.abort("connectionrefused") if route.request.method == "POST" else route.continue_(),
    )
    page.click("#probe-button")
    expect(page.locator("#htmx-problem")).to_contain_text("The server did not answer")
    drop_expected(console_errors, "ERR_CONNECTION_REFUSED", "htmx:sendError", "htmx:afterRequest")


def test_a_poll_after_the_session_ended_goes_to_sign_in_not_into_the_page(
    new_context: Any, login: Any, live_server: Any, operator: Any
) -> None:
    """The poll follows the redirect to the sign-in page; that whole page must
    not be swapped into the dashboard's live region."""
    context = new_context()
    page = context.new_page()
    login(page, "otto")
    page.goto(f"{live_server.url}/ops/?queue=default")
    context.clear_cookies()
    page.wait_for_url("**/login/?next=%2Fops%2F%3Fqueue%3Ddefault", timeout=15_000)
    expect(page.locator("#id_username")).to_have_count(1)
    expect(page.locator("#live")).to_have_count(0)
