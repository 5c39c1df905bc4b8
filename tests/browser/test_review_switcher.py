"""The queue switcher on the review page, in a real browser at 1280 and 390 px:
each queue's waiting count and mode, focusing one queue by mouse and by
keyboard, the focus kept through decisions, the item's queue and its
instructions on the card, and the card still on screen on a phone."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from reviewqueue import services
from reviewqueue.models import Queue, Verdict
from tests.browser.helpers import card_item, start, wait_for_card_change

pytestmark = pytest.mark.usefixtures("transactional_db")

WIDTHS = {"wide": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}


@pytest.fixture(autouse=True)
def _fresh_login_budget() -> None:
    # Every test signs in through the real rate-limited login, from one address.
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def queues(make_user: Any, admit_item: Any) -> Any:
    """rita reviews Billing (2 waiting, draft mode) and Support (1 waiting),
    not the default queue; ravi reviews the default queue, where one item waits."""
    rita = make_user("rita", "reviewer")
    make_user("ravi", "reviewer")
    Queue.objects.filter(pk=Queue.default().pk).update(open_to_all=False)
    billing = services.create_queue(
        user=None, slug="billing", name="Billing", settings={"instructions": "**Billing rule**: check the totals."}
    )
    support = services.create_queue(
        user=None, slug="support", name="Support", settings={"instructions": "**Support rule**: be kind."}
    )
    billing.members.add(rita)
    support.members.add(rita)
    admit_item(queue="billing", priority=1, task_description="Billing task one")
    admit_item(queue="billing", priority=1, task_description="Billing task two")
    admit_item(queue="support", priority=3, task_description="Support task")
    admit_item(task_description="Default task")
    Queue.objects.filter(slug="billing").update(mode="draft")
    return rita


@pytest.mark.parametrize("size", sorted(WIDTHS))
def test_the_switcher_shows_counts_and_modes_and_focuses_by_mouse(
    new_context: Any, login: Any, live_server: Any, artifacts: Any, queues: Any, size: str
) -> None:
    page = new_context(viewport=WIDTHS[size]).new_page()
    login(page, "rita")
    switcher = page.locator("#queue-switcher")
    expect(switcher).to_be_visible()
    billing = switcher.locator('a[data-queue="billing"]')
    expect(billing).to_contain_text("Billing")
    expect(billing.locator(".queue-count")).to_have_text("2")
    expect(billing.locator(".queue-mode")).to_have_text("draft")
    expect(switcher.locator('a[data-queue="support"] .queue-count')).to_have_text("1")
    expect(switcher.locator('a[aria-current="page"]')).to_contain_text("All my queues")
    expect(switcher.locator('a[data-queue="default"]')).to_have_count(0)
    page.screenshot(path=str(artifacts / f"review-switcher-{size}.png"), full_page=True)

    # Across queues the higher priority comes first: Support's item.
    start(page)
    card = page.locator("#card")
    expect(card).to_contain_text("Support task")
    expect(card.locator(".item-queue")).to_have_text("in Support")
    # The item's queue's instructions are on the page once, folded on the
    # card, at every width: the side panel leaves them out.
    expect(page.locator("#context .panel-instructions")).to_have_count(0)
    expect(page.locator("#context")).not_to_contain_text("Support rule: be kind.")
    card.locator("#card-instructions summary").click()
    expect(card.locator("#card-instructions")).to_contain_text("Support rule: be kind.")
    expect(card).not_to_contain_text("Billing rule")
    # On a phone the switcher stays one row: the card starts within the first screen.
    box = card.bounding_box()
    assert box is not None and box["y"] < WIDTHS[size]["height"] / 2
    page.screenshot(path=str(artifacts / f"review-switcher-card-{size}.png"), full_page=False)
    # Skip it: the next item by the rule is Billing's (Support has no other).
    skipped = card_item(page)
    page.keyboard.press("s")
    wait_for_card_change(page, skipped)
    expect(card).to_contain_text("Billing task")

    billing.click()
    page.wait_for_url("**/review/?queue=billing")
    expect(page.locator('#queue-switcher a[aria-current="page"]')).to_contain_text("Billing")
    for _ in range(2):
        expect(page.locator("#card")).to_contain_text("Billing task")
        expect(page.locator("#card .item-queue")).to_have_text("in Billing")
        before = card_item(page)
        page.keyboard.press("a")
        page.keyboard.press("Enter")
        wait_for_card_change(page, before)
    # Focused on Billing: its two items are done, and Support's item waits, unserved here.
    expect(page.locator("#card")).to_contain_text("The queue is empty")
    expect(page.locator("#card")).to_contain_text("Nothing waits in Billing.")
    assert Verdict.objects.filter(reviewer=queues, item__queue__slug="billing").count() == 2
    assert not Verdict.objects.filter(reviewer=queues, item__queue__slug="support").exists()
    page.screenshot(path=str(artifacts / f"review-switcher-focused-{size}.png"), full_page=True)


def test_the_switcher_is_reached_and_used_by_keyboard(
    new_context: Any, login: Any, live_server: Any, artifacts: Any, queues: Any
) -> None:
    page = new_context(viewport=WIDTHS["wide"]).new_page()
    login(page, "rita")
    page.keyboard.press("q")
    focused = page.evaluate("document.activeElement.textContent")
    assert "All my queues" in focused
    # Tab along the row to Billing (the queues are listed by name), then Enter.
    page.keyboard.press("Tab")
    assert "Billing" in page.evaluate("document.activeElement.textContent")
    page.keyboard.press("Enter")
    page.wait_for_url("**/review/?queue=billing")
    # q lands on the queue in view, and n claims from it alone.
    page.keyboard.press("q")
    assert "Billing" in page.evaluate("document.activeElement.textContent")
    page.locator("#card-title").focus()
    start(page)
    expect(page.locator("#card")).to_contain_text("Billing task")
    # The help lists the switcher's key.
    page.keyboard.press("?")
    expect(page.locator("#shortcuts")).to_contain_text("go to the queue switcher")
    page.screenshot(path=str(artifacts / "review-switcher-keys.png"))
    page.keyboard.press("Escape")
