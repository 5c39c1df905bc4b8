"""The item list, an item's timeline, a bulk action and a reviewer's history
in the browser at a desktop and a phone width: no sideways scrolling, no
console error (the conftest fails the test on any), and screenshots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.django_db(transaction=True)

from tests.browser.test_ops_pages import OVERFLOW, WIDTHS


@pytest.fixture(autouse=True)
def _no_login_limit(settings: Any) -> None:
    settings.RATELIMIT_ENABLE = False


@pytest.fixture
def items(admit_item: Any, operator: Any, reviewer: Any) -> list[Any]:
    from reviewqueue import services

    made = [admit_item(task_description=f"Parse the invoice dates, case {n}", producer="alpha").item for n in range(3)]
    made.append(admit_item(task_description="Reconcile a very long ledger " + "word " * 60, producer="beta").item)
    services.claim(reviewer=reviewer)
    services.decide(item_id=made[0].pk, reviewer=reviewer, approve=False, reason_label="logic_error")
    return made


def _open(new_context: Any, login: Any, width: str, user: str) -> Any:
    page = new_context(viewport=WIDTHS[width]).new_page()
    login(page, user)
    return page


def _no_overflow(page: Any, what: str) -> None:
    found = page.evaluate(OVERFLOW)
    assert found["scroll"] <= found["client"], f"{what}: {found}"


@pytest.mark.parametrize("width", WIDTHS)
def test_an_operator_searches_opens_the_timeline_and_expires_by_filter(
    new_context: Any, live_server: Any, login: Any, items: list[Any], width: str, artifacts: Path
) -> None:
    page = _open(new_context, login, width, "otto")
    page.goto(f"{live_server.url}/ops/items/")
    expect(page.locator("#items tbody tr")).to_have_count(4)
    _no_overflow(page, f"items at {width}")
    page.screenshot(path=str(artifacts / f"ops-items-{width}.png"), full_page=True)
    page.fill("#id_q", "invoice")
    page.select_option("#id_status", "pending")
    page.locator("#item-filters button[type=submit]").click()
    expect(page.locator("#items tbody tr")).to_have_count(2)
    expect(page.locator(f"#item-{items[0].pk}")).to_have_count(0)
    page.locator(f"#item-{items[1].pk} a").click()
    expect(page.locator("#timeline")).to_contain_text("Admitted to Default from alpha")
    _no_overflow(page, f"item at {width}")
    page.screenshot(path=str(artifacts / f"ops-item-{width}.png"), full_page=True)
    page.go_back()
    page.select_option("#id_action", "expire")
    page.locator("#bulk-form button[type=submit]").click()
    expect(page.locator("#bulk-count")).to_contain_text("2 items will be expired")
    _no_overflow(page, f"bulk confirm at {width}")
    page.screenshot(path=str(artifacts / f"ops-items-bulk-{width}.png"), full_page=True)
    page.locator("#bulk-confirm button").click()
    expect(page.locator(".messages")).to_contain_text("Expired 2 items")
    expect(page.locator("#no-items")).to_be_visible()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_bad_filter_says_what_is_wrong(
    new_context: Any, live_server: Any, login: Any, items: list[Any], width: str, console_errors: list[str]
) -> None:
    page = _open(new_context, login, width, "otto")
    page.goto(f"{live_server.url}/ops/items/?since=2026-02-02&until=2026-02-01")
    expect(page.locator("#error-summary")).to_contain_text("must be on or after the start date")
    expect(page.locator("#id_until")).to_have_value("2026-02-01")  # kept, to be fixed in place
    _no_overflow(page, f"bad filter at {width}")
    # The page answers 400, which the browser logs as a failed resource: expected here, and the only one.
    assert len(console_errors) == 1 and "400 (Bad Request)" in console_errors[0], console_errors
    console_errors.clear()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_reviewer_reads_their_history(
    new_context: Any, live_server: Any, login: Any, items: list[Any], width: str, artifacts: Path
) -> None:
    page = _open(new_context, login, width, "rita")
    page.goto(f"{live_server.url}/review/history/")
    expect(page.locator("#items tbody tr")).to_have_count(1)
    expect(page.locator(f"#item-{items[0].pk}")).to_contain_text("logic error")
    _no_overflow(page, f"history at {width}")
    page.screenshot(path=str(artifacts / f"review-history-{width}.png"), full_page=True)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_timeline_shows_renewals_and_an_undone_verdict(
    new_context: Any,
    live_server: Any,
    login: Any,
    admit_item: Any,
    operator: Any,
    reviewer: Any,
    width: str,
    artifacts: Path,
) -> None:
    from reviewqueue import services

    item = admit_item(task_description="Check the renewal dates", producer="alpha").item
    services.claim(reviewer=reviewer)
    for _ in range(4):
        services.renew(item_id=item.pk, reviewer=reviewer)
    services.send_back(item_id=item.pk, reviewer=reviewer, note="Say which calendar the dates use")
    services.undo(reviewer=reviewer)
    services.decide(item_id=item.pk, reviewer=reviewer, approve=False, reason_label="unclear")
    page = _open(new_context, login, width, "otto")
    page.goto(f"{live_server.url}/ops/items/{item.pk}/")
    renewal = page.locator("#timeline .event-renewal")
    expect(renewal).to_have_count(1)
    expect(renewal).to_contain_text("rita renewed the lease")
    expect(renewal).to_contain_text("4 times")
    undone = page.locator("#timeline .event-undone")
    expect(undone).to_have_count(1)
    expect(undone).to_contain_text("rita took back their verdict, sent back with a note")
    expect(undone).to_contain_text("Say which calendar the dates use")
    expect(page.locator("#timeline .event-verdict")).to_contain_text("reject (unclear) by rita")
    for line in (renewal, undone):
        box = line.bounding_box()
        assert box is not None and box["x"] + box["width"] <= WIDTHS[width]["width"], (width, box)
    _no_overflow(page, f"timeline at {width}")
    page.screenshot(path=str(artifacts / f"ops-item-timeline-{width}.png"), full_page=True)
