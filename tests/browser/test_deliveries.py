"""The webhook deliveries page and the dashboard's failing endpoints, as an
operator uses them at 1280 and 390 px: every state of a delivery readable,
long URLs and error texts kept inside the screen, hostile text inert, and
Redeliver answered in place (htmx, with the CSRF token) from the mouse and
from the keyboard. A reviewer is refused."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = {"1280": {"width": 1280, "height": 800}, "390": {"width": 390, "height": 844}}
NO_SIDEWAYS = "() => document.documentElement.scrollWidth <= document.documentElement.clientWidth"
# Nothing inside the deliveries table is pushed sideways either (a table that
# scrolls inside its box hides the Redeliver button off screen on a phone).
TABLE_FITS = "sel => { const t = document.querySelector(sel); return t.scrollWidth <= t.clientWidth; }"

LONG_URL = "https://hooks.example.com/" + "very-long-path-segment/" * 6 + "?token=" + "x" * 90
LONG_ERROR = "ConnectError: " + "a" * 100 + " and more words after the unbroken run"
HOSTILE = '<script>window.pwned = 1</script><img src="x" onerror="window.pwned = 2">'
SHORT_URL = "https://ok.example.com/hook"


@pytest.fixture(autouse=True)
def _no_login_limit(settings: Any) -> None:
    # These tests sign in more often than the login rate limit allows a person per minute.
    settings.RATELIMIT_ENABLE = False


@pytest.fixture
def announced(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Deliveries redelivered, caught instead of being sent to the broker."""
    sent: list[int] = []
    monkeypatch.setattr("reviewqueue.webhooks.announce", sent.append)
    return sent


@pytest.fixture
def rows(db: None) -> dict[str, Any]:
    """One delivery in each state; the failing ones carry long and hostile text."""
    from django.utils import timezone

    from reviewqueue.models import WebhookDelivery

    now = timezone.now()

    def make(n: int, **fields: Any) -> WebhookDelivery:
        defaults: dict[str, Any] = {
            # As the outbox makes them: evt_ and 32 hex digits, one unbroken word.
            "event_id": f"evt_{n:032x}",
            "event_type": "item.decided",
            "url": SHORT_URL,
            "producer": "acme",
            "ordering_key": f"item:{n}",
            "body": "{}",
            "created_at": now - timedelta(minutes=n),
        }
        return WebhookDelivery.objects.create(**{**defaults, **fields})

    return {
        "pending": make(
            1,
            url=LONG_URL,
            attempts=3,
            last_attempt_at=now - timedelta(minutes=1),
            last_status_code=503,
            last_error=LONG_ERROR,
            next_attempt_at=now + timedelta(hours=1),
        ),
        "delivered": make(
            2, status="delivered", attempts=1, last_attempt_at=now, last_status_code=204, delivered_at=now
        ),
        "failed": make(
            3,
            url=LONG_URL,
            status="failed",
            attempts=30,
            last_attempt_at=now,
            last_status_code=500,
            last_error=HOSTILE,
        ),
        "failed_long": make(
            4,
            status="failed",
            event_type="run.finished",
            attempts=30,
            last_attempt_at=now - timedelta(minutes=9),
            last_error=LONG_ERROR,
        ),
    }


def _operator_page(new_context: Any, login: Any, width: str) -> Any:
    page = new_context(viewport=WIDTHS[width]).new_page()
    login(page, "otto")
    return page


def _assert_inert(page: Any, where: str) -> None:
    assert page.evaluate("() => window.pwned") is None
    assert page.locator(f"{where} script, {where} img").count() == 0
    expect(page.locator(where)).to_contain_text('<script>window.pwned = 1</script><img src="x"')


@pytest.mark.parametrize("width", WIDTHS)
def test_every_state_reads_on_a_desktop_and_a_phone(
    new_context: Any, live_server: Any, login: Any, operator: Any, rows: dict[str, Any], width: str, artifacts: Path
) -> None:
    page = _operator_page(new_context, login, width)
    page.goto(f"{live_server.url}/ops/deliveries/")
    table = page.locator("#deliveries")
    expect(table.locator("caption")).to_have_text("4 events")
    pending = page.locator(f"#delivery-{rows['pending'].pk}")
    expect(pending).to_contain_text("Pending")
    expect(pending).to_contain_text("HTTP 503")
    expect(pending).to_contain_text("queued")
    expect(pending.locator("time")).to_have_count(2)  # last attempt, and the retry to come
    expect(pending.get_by_role("button", name="Redeliver")).to_have_count(0)
    delivered = page.locator(f"#delivery-{rows['delivered'].pk}")
    expect(delivered).to_contain_text("Delivered")
    expect(delivered).to_contain_text("HTTP 204")
    failed = page.locator(f"#delivery-{rows['failed'].pk}")
    expect(failed).to_contain_text("gave up")
    expect(failed).to_contain_text("HTTP 500")
    for key in ("delivered", "failed", "failed_long"):
        expect(page.locator(f"#delivery-{rows[key].pk}").get_by_role("button", name="Redeliver")).to_be_visible()
    _assert_inert(page, f"#delivery-{rows['failed'].pk}")
    # The long URL is shown whole, wrapped, and still links to its own deliveries.
    expect(pending.get_by_role("link", name=LONG_URL)).to_be_visible()
    page.screenshot(path=str(artifacts / f"ops-deliveries-{width}.png"), full_page=True)
    assert page.evaluate(NO_SIDEWAYS)
    assert page.evaluate(TABLE_FITS, ".table-scroll")
    for key in ("delivered", "failed", "failed_long"):
        box = page.locator(f"#delivery-{rows[key].pk}").get_by_role("button", name="Redeliver").bounding_box()
        assert box is not None and 0 <= box["x"] and box["x"] + box["width"] <= WIDTHS[width]["width"]


@pytest.mark.parametrize("width", WIDTHS)
def test_redeliver_from_the_mouse_answers_in_place_with_the_csrf_token(
    new_context: Any,
    live_server: Any,
    login: Any,
    operator: Any,
    rows: dict[str, Any],
    announced: list[int],
    width: str,
    artifacts: Path,
) -> None:
    from reviewqueue.models import WebhookDelivery

    failed = rows["failed"]
    page = _operator_page(new_context, login, width)
    page.goto(f"{live_server.url}/ops/deliveries/")
    page.evaluate("() => { window.sameDocument = true; }")
    row = page.locator(f"#delivery-{failed.pk}")
    with page.expect_response(f"**/ops/deliveries/{failed.pk}/redeliver/**") as answer:
        row.get_by_role("button", name="Redeliver").click()
    request = answer.value.request
    assert answer.value.status == 200
    assert request.headers.get("hx-request") == "true"
    assert request.headers.get("x-csrftoken")
    expect(row).to_contain_text("Pending")
    expect(row).to_contain_text("queued")
    expect(row.get_by_role("button", name="Redeliver")).to_have_count(0)
    assert page.evaluate("() => window.sameDocument") is True  # swapped, not reloaded
    _assert_inert(page, f"#delivery-{failed.pk}")  # the swapped-in row escapes as the page does
    assert page.evaluate(NO_SIDEWAYS)
    page.screenshot(path=str(artifacts / f"ops-deliveries-redelivered-{width}.png"), full_page=True)
    assert WebhookDelivery.objects.get(pk=failed.pk).status == "pending"
    assert announced == [failed.pk]


def test_redeliver_is_refused_without_the_token_the_page_sends(
    new_context: Any, live_server: Any, login: Any, operator: Any, rows: dict[str, Any], announced: list[int]
) -> None:
    from reviewqueue.models import WebhookDelivery

    delivered = rows["delivered"]
    page = _operator_page(new_context, login, "1280")
    page.goto(f"{live_server.url}/ops/deliveries/")
    url = f"{live_server.url}/ops/deliveries/{delivered.pk}/redeliver/"
    # The same signed-in session, with the htmx header but no token: refused.
    bare = page.context.request.post(url, headers={"HX-Request": "true"})
    assert bare.status == 403
    assert "CSRF verification failed" in bare.text()
    assert WebhookDelivery.objects.get(pk=delivered.pk).status == "delivered"
    assert announced == []
    # The token the page carries is the one that lets it through.
    token = page.locator("body").get_attribute("hx-headers")
    assert token is not None and "X-CSRFToken" in token
    with page.expect_response(f"**/ops/deliveries/{delivered.pk}/redeliver/**") as answer:
        page.locator(f"#delivery-{delivered.pk}").get_by_role("button", name="Redeliver").click()
    assert answer.value.status == 200
    expect(page.locator(f"#delivery-{delivered.pk}")).to_contain_text("queued")
    assert announced == [delivered.pk]


@pytest.mark.parametrize("width", WIDTHS)
def test_redeliver_from_the_keyboard(
    new_context: Any,
    live_server: Any,
    login: Any,
    operator: Any,
    rows: dict[str, Any],
    announced: list[int],
    width: str,
) -> None:
    target = rows["failed_long"]
    page = _operator_page(new_context, login, width)
    page.goto(f"{live_server.url}/ops/deliveries/")
    page.evaluate("() => { window.sameDocument = true; }")
    button = page.locator(f"#delivery-{target.pk}").get_by_role("button", name="Redeliver")
    for _ in range(60):
        page.keyboard.press("Tab")
        if button.evaluate("b => b === document.activeElement"):
            break
    else:
        pytest.fail("Tab never reached the Redeliver button")
    page.keyboard.press("Enter")
    row = page.locator(f"#delivery-{target.pk}")
    expect(row).to_contain_text("queued")
    expect(row).to_contain_text("Pending")
    assert page.evaluate("() => window.sameDocument") is True
    assert announced == [target.pk]


@pytest.mark.parametrize("width", WIDTHS)
def test_the_dashboard_names_failing_endpoints_readably(
    new_context: Any, live_server: Any, login: Any, operator: Any, rows: dict[str, Any], width: str, artifacts: Path
) -> None:
    page = _operator_page(new_context, login, width)
    page.goto(f"{live_server.url}/ops/")
    panel = page.locator("#failing-endpoints")
    expect(panel.get_by_role("link", name=LONG_URL)).to_be_visible()
    expect(panel.get_by_role("link", name=SHORT_URL)).to_be_visible()
    panel.scroll_into_view_if_needed()
    panel.screenshot(path=str(artifacts / f"ops-failing-endpoints-{width}.png"))
    _assert_inert(page, "#failing-endpoints")
    assert page.evaluate(NO_SIDEWAYS)
    assert page.evaluate(TABLE_FITS, "#failing-endpoints .table-scroll")
    panel.get_by_role("link", name=LONG_URL).click()
    expect(page.locator("#deliveries caption")).to_have_text(f"2 events, to {LONG_URL}")


def test_a_reviewer_is_refused_the_page_and_redeliver(
    new_context: Any,
    live_server: Any,
    login: Any,
    reviewer: Any,
    rows: dict[str, Any],
    announced: list[int],
    console_errors: list[str],
) -> None:
    from reviewqueue.models import WebhookDelivery

    page = new_context(viewport=WIDTHS["390"]).new_page()
    login(page, "rita")
    response = page.goto(f"{live_server.url}/ops/deliveries/")
    assert response is not None and response.status == 403
    expect(page.locator("main")).to_contain_text("This page needs the operator role")
    expect(page.get_by_role("button", name="Redeliver")).to_have_count(0)
    # With a valid CSRF token from a page the reviewer may open, Redeliver is still refused: the role decides.
    page.goto(f"{live_server.url}/review/")
    headers = json.loads(page.locator("body").get_attribute("hx-headers") or "{}")
    assert headers.get("X-CSRFToken")
    refused = page.context.request.post(
        f"{live_server.url}/ops/deliveries/{rows['failed'].pk}/redeliver/",
        headers={"HX-Request": "true", "X-CSRFToken": headers["X-CSRFToken"], "Referer": f"{live_server.url}/review/"},
    )
    assert refused.status == 403
    assert "This page needs the operator role" in refused.text()  # refused for the role, not for the token
    assert WebhookDelivery.objects.get(pk=rows["failed"].pk).status == "failed"
    assert announced == []
    # The 403 itself is logged by the browser as a failed resource: expected here.
    console_errors[:] = [e for e in console_errors if "403" not in e]
