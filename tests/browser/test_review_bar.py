"""The verdict bar on a phone and a desktop: one row of buttons, at most
about 120 px tall on a phone, and the notice of ignored keys part of the
bar rather than laid over the card."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.helpers import send_keys, start, wait_for_card_change

pytestmark = pytest.mark.usefixtures("transactional_db")

WIDTHS = {
    "1280": {"width": 1280, "height": 800},
    "390": {"width": 390, "height": 844},
}


# How many lines a button's words take: the distinct tops of their boxes.
LINES_OF_TEXT = """e => {
  const range = document.createRange();
  range.selectNodeContents(e);
  const tops = [...range.getClientRects()].filter(r => r.width > 0).map(r => r.top).sort((a, b) => a - b);
  return tops.filter((top, i) => i === 0 || top - tops[i - 1] > 8).length;  // a key cap sits a pixel off its line
}"""


@pytest.fixture(autouse=True)
def _fresh_login_budget() -> None:
    from django.core.cache import cache

    cache.clear()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_bar_is_one_row_and_the_ignored_keys_notice_covers_nothing(
    new_context: Any, login: Any, make_user: Any, admit_item: Any, artifacts: Any, width: str
) -> None:
    make_user("rita", "reviewer")
    for _ in range(3):
        admit_item()
    phone = {"is_mobile": True, "has_touch": True} if width != "1280" else {}
    page = new_context(viewport=WIDTHS[width], **phone).new_page()
    login(page, "rita")
    start(page)
    bar = page.locator("#card .action-bar")
    buttons = bar.locator("button:visible")
    tops = {round(b["y"]) for b in (buttons.nth(i).bounding_box() for i in range(buttons.count()))}
    assert len(tops) == 1, f"buttons on {len(tops)} rows at {width} px"
    assert buttons.count() == 7  # approve, reject, edit, send back, skip, undo, help
    for i in range(buttons.count()):  # each a thumb's width, its words inside it
        b = buttons.nth(i)
        assert b.bounding_box()["width"] >= 44 and b.evaluate("e => e.scrollWidth <= e.clientWidth"), i
        assert b.evaluate(LINES_OF_TEXT) == 1, f"{b.inner_text()!r} wraps at {width} px"
    box = bar.bounding_box()
    assert box is not None
    if width != "1280":
        assert box["height"] <= 120, box

    first = page.locator("#card").get_attribute("data-item")
    page.keyboard.press("a")
    send_keys(page, ["Enter"])
    send_keys(page, ["a", "Enter"], when="after-swap", delay_ms=10)
    wait_for_card_change(page, first)
    status = page.locator("#key-status")
    assert "Ignored a, Enter" in status.inner_text()
    notice, bar_box = status.bounding_box(), page.locator("#card .action-bar").bounding_box()
    assert notice is not None and bar_box is not None
    # Inside the bar, above its buttons: nothing of the card is under it.
    assert bar_box["y"] <= notice["y"] and notice["y"] + notice["height"] <= bar_box["y"] + bar_box["height"]
    approve = page.locator("#approve-button").bounding_box()
    assert approve is not None and notice["y"] + notice["height"] <= approve["y"]
    page.screenshot(path=str(artifacts / f"review-bar-ignored-keys-{width}.png"))


def test_a_narrow_window_without_touch_shows_every_buttons_words_whole(
    new_context: Any, login: Any, make_user: Any, admit_item: Any, artifacts: Any
) -> None:
    """A 390 px window with a mouse (a desktop browser made narrow, a
    split screen): no button is squeezed below its words ("Undo" cut to
    "Und"), and the bar stays one row."""
    make_user("rita", "reviewer")
    admit_item()
    page = new_context(viewport=WIDTHS["390"]).new_page()
    login(page, "rita")
    start(page)
    buttons = page.locator("#card .action-bar button:visible")
    assert buttons.count() == 7
    tops = {round(buttons.nth(i).bounding_box()["y"]) for i in range(buttons.count())}
    assert len(tops) == 1, f"buttons on {len(tops)} rows"
    for i in range(buttons.count()):
        b = buttons.nth(i)
        assert b.evaluate("e => e.scrollWidth <= e.clientWidth"), f"{b.inner_text()!r} is cut off"
        assert b.evaluate(LINES_OF_TEXT) == 1, f"{b.inner_text()!r} wraps"
    bar = page.locator("#card .action-bar").bounding_box()
    assert bar is not None and bar["x"] + bar["width"] <= 390
    page.screenshot(path=str(artifacts / "review-bar-390-mouse.png"))
