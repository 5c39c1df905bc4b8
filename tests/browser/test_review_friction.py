"""The review page at a desk (1280 px, keyboard) and on a phone (390 px,
touch): skip goes on, the verdict stays on screen, the instructions are at
hand, the small print reads plainly. Screenshots of every state go to
``artifacts/``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from reviewqueue.models import Queue, ReviewItem, Verdict
from tests.browser.helpers import card_item, send_keys, start, wait_for_card_change

pytestmark = pytest.mark.usefixtures("transactional_db")

DESK = {"viewport": {"width": 1280, "height": 800}}
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
SCREENS = {1280: DESK, 390: PHONE}

LONG_TASK = "# Goal\n\nWrite `is_even(n)` for every integer.\n\n" + "\n".join(
    f"- requirement {n}: handles case {n} *exactly* as the spec says" for n in range(25)
)
LONG_OUTPUT = (
    "def is_even(n):\n"
    + "".join(f"    # step {n} of the reasoning, kept\n" for n in range(60))
    + "    return n % 2 == 0\n"
)


@pytest.fixture(autouse=True)
def _fresh_login_budget():
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(params=[1280, 390], ids=["1280px", "390px"])
def width(request: Any) -> int:
    return request.param


@pytest.fixture
def screen(new_context: Any, width: int) -> Any:
    return new_context(**SCREENS[width]).new_page()


def act(page: Any, width: int, key: str, button: str) -> None:
    """What a reviewer does: a key at the desk, a tap on the phone."""
    if width == 390:
        page.locator(button).tap()
    else:
        page.keyboard.press(key)


def on_screen(page: Any, selector: str) -> bool:
    box = page.locator(selector).bounding_box()
    viewport = page.viewport_size
    return (
        box is not None
        and box["y"] >= 0
        and box["y"] + box["height"] <= viewport["height"]
        and box["x"] >= 0
        and box["x"] + box["width"] <= viewport["width"]
    )


def draft_mode() -> None:
    """The banner's state; set after admitting, which recomputes the mode from depth."""
    Queue.current()
    Queue.objects.filter(pk=Queue.default().pk).update(mode="draft")


def test_it_goes_straight_on_to_the_next_item_after_a_skip(screen, width, login, make_user, admit_item):
    make_user("rita", "reviewer")
    first, second, _ = (admit_item().item for _ in range(3))
    login(screen, "rita")
    start(screen)
    act(screen, width, "s", "#skip-button")
    wait_for_card_change(screen, str(first.pk))
    assert card_item(screen) == str(second.pk)
    assert f"Skipped item #{first.pk}" in screen.locator("#card .notices").inner_text()
    assert ReviewItem.objects.get(pk=first.pk).status == ReviewItem.Status.PENDING


def test_it_keeps_the_verdict_on_screen_with_a_banner_and_a_long_item(
    screen, width, login, make_user, admit_item, artifacts
):
    make_user("rita", "reviewer")
    item = admit_item(task_description=LONG_TASK, final_output=LONG_OUTPUT, draft=True).item
    admit_item()
    draft_mode()
    login(screen, "rita")
    start(screen)
    assert screen.locator(".banner.draft").is_visible()
    for where in ("top", "middle", "bottom"):
        screen.evaluate(
            "where => window.scrollTo(0, {top: 0, middle: document.body.scrollHeight / 2, "
            "bottom: document.body.scrollHeight}[where])",
            where,
        )
        for button in ("#approve-button", "#reject-button"):
            assert on_screen(screen, button), f"{button} off screen at the {where} of the page"
    assert screen.evaluate("document.documentElement.scrollWidth") <= width
    screen.evaluate("window.scrollTo(0, document.body.scrollHeight / 3)")
    screen.screenshot(path=str(artifacts / f"review-sticky-verdict-{width}px.png"))

    if width == 390:
        # No keyboard on a phone: no key hints, and buttons a thumb can hit.
        assert screen.locator("#card kbd:visible").count() == 0
        for button in ("#approve-button", "#reject-button", "#skip-button", "#undo-button"):
            box = screen.locator(button).bounding_box()
            assert box["height"] >= 44 and box["width"] >= 44, button
        screen.locator("#approve-button").tap()
    else:
        assert screen.locator("#approve-button kbd").is_visible()
        screen.keyboard.press("a")
        screen.keyboard.press("Enter")
    wait_for_card_change(screen, str(item.pk))
    assert Verdict.objects.get(item=item).decision == "approve"


def test_it_rejects_with_a_reason_by_tap_or_key(screen, width, login, make_user, admit_item):
    make_user("rita", "reviewer")
    item = admit_item().item
    login(screen, "rita")
    start(screen)
    if width == 390:
        screen.locator("label[for=reason-5]").tap()
        screen.locator("#reject-button").tap()
    else:
        screen.keyboard.press("5")
        screen.keyboard.press("Enter")
    screen.wait_for_selector("text=The queue is empty")
    assert Verdict.objects.get(item=item).reason_label == "unclear"


def test_it_shows_the_instructions_on_the_page_and_in_help(screen, width, login, make_user, admit_item, artifacts):
    make_user("rita", "reviewer")
    Queue.current()
    Queue.objects.filter(pk=Queue.default().pk).update(
        instructions="**Approve** only code you would merge today.\n\n"
        "- tests are hidden from the agent, not from you\n"
        '- <img src=x onerror="window.pwned = 1"> [odd link](javascript:window.pwned=2)'
    )
    admit_item()
    login(screen, "rita")
    start(screen)
    # Once on the page, folded on the card at every width; not in the side panel too.
    assert screen.locator("#context .instructions").count() == 0
    summary = screen.locator("#card-instructions summary")
    summary.tap() if width == 390 else summary.click()
    on_page = screen.locator("#card-instructions .instructions")
    on_page.scroll_into_view_if_needed()
    assert on_page.is_visible()
    assert on_page.locator("strong").first.inner_text() == "Approve"

    act(screen, width, "?", "#card .help-button")
    dialog = screen.locator("#shortcuts")
    assert dialog.is_visible()
    assert "only code you would merge today" in dialog.locator(".instructions").inner_text()
    # The keyboard table is for keyboards.
    assert dialog.locator("table").is_visible() == (width == 1280)
    assert dialog.locator("img, a[href^='javascript']").count() == 0
    assert screen.evaluate("window.pwned") is None
    screen.screenshot(path=str(artifacts / f"review-help-{width}px.png"))
    if width == 390:
        dialog.locator("button", has_text="Close").tap()
    else:
        screen.keyboard.press("Escape")
    assert not dialog.is_visible()


def test_it_reads_plainly_before_and_after_the_first_verdict(screen, width, login, make_user, admit_item):
    make_user("rita", "reviewer")
    item = admit_item(draft=True).item
    admit_item()
    login(screen, "rita")
    start(screen)
    context = screen.locator("#context")
    assert "median" not in context.inner_text()
    assert "No verdicts yet" in context.inner_text()
    explained = screen.locator(".about-badges")
    assert explained.is_visible()
    assert "ran once, without its fix loop" in explained.inner_text()

    act(screen, width, "a", "#approve-button")
    if width == 1280:
        screen.keyboard.press("Enter")
    wait_for_card_change(screen, str(item.pk))
    recent = context.locator(".recent").inner_text()
    assert "just now" in recent
    assert "0 minutes" not in recent and "0\xa0minutes" not in recent


def test_it_photographs_every_state_of_the_review_page(
    screen, width, login, make_user, admit_item, artifacts, console_errors
):
    """Empty queue, items waiting, an item (draft banner, long task), keys
    ignored while loading, a lapsed lease, the second tab's conflict."""
    rita = make_user("rita", "reviewer")
    login(screen, "rita")
    screen.wait_for_selector("text=The queue is empty")
    screen.screenshot(path=str(artifacts / f"review-empty-{width}px.png"), full_page=width == 1280)

    first = admit_item(task_description=LONG_TASK, final_output=LONG_OUTPUT, draft=True).item
    second = admit_item().item
    third = admit_item().item
    draft_mode()
    screen.reload()
    screen.wait_for_selector("#next-button")
    screen.screenshot(path=str(artifacts / f"review-waiting-{width}px.png"), full_page=width == 1280)

    start(screen)
    screen.screenshot(path=str(artifacts / f"review-{width}px-item.png"), full_page=width == 1280)

    send_keys(screen, ["a", "Enter", "r", "Enter"])
    wait_for_card_change(screen, str(first.pk))
    assert "Ignored r, Enter" in screen.locator("#key-status").inner_text()
    screen.screenshot(path=str(artifacts / f"review-ignored-keys-{width}px.png"))

    ReviewItem.objects.filter(pk=second.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    act(screen, width, "a", "#approve-button")
    if width == 1280:
        screen.keyboard.press("Enter")
    screen.wait_for_selector("text=yours again under a new lease")
    assert card_item(screen) == str(second.pk)
    screen.screenshot(path=str(artifacts / f"review-lease-ran-out-{width}px.png"), full_page=width == 1280)

    # A second tab on the same item: the first tab's verdict comes first.
    from reviewqueue import services

    services.decide(item_id=second.pk, reviewer=rita, approve=False, reason_label="code_error")
    wait_for_card_change(screen, "")  # the page is ready for keys again
    act(screen, width, "a", "#approve-button")
    if width == 1280:
        screen.keyboard.press("Enter")
    screen.wait_for_selector("text=by you, in another tab or window")
    assert card_item(screen) == str(third.pk)
    screen.screenshot(path=str(artifacts / f"review-conflict-{width}px.png"), full_page=width == 1280)
    assert Verdict.objects.get(item=second).decision == "reject"
