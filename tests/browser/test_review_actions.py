"""Edit and approve (e) and send back (b) in a real browser: the editor and
the note field take every key as text, Esc closes them keeping the text,
Ctrl+Enter submits once, buttons do the same on a phone, the item's page
shows the edit as a diff, and a later version shows its history."""

from __future__ import annotations

import pytest

from reviewqueue import services
from reviewqueue.models import ReviewItem, Verdict
from tests.browser.helpers import card_item, quiet_moment, start, wait_for_card_change

pytestmark = pytest.mark.usefixtures("transactional_db")

WRONG = "def is_even(n):\n    return n % 2 == 1\n"
RIGHT = "def is_even(n):\n    return n % 2 == 0\n"


@pytest.fixture(autouse=True)
def _fresh_login_budget():
    from django.core.cache import cache

    cache.clear()


def _no_page_scroll_sideways(page, width):
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_edit_and_approve_with_keys_and_the_diff_on_the_item_page(
    new_context, login, make_user, admit_item, live_server, artifacts
):
    make_user("rita", "reviewer")
    first = admit_item(final_output=WRONG).item
    second = admit_item().item
    page = new_context(viewport={"width": 1280, "height": 900}).new_page()
    login(page, "rita")
    start(page)
    page.keyboard.press("e")
    editor = page.locator("#edited-output")
    assert editor.is_visible()
    assert page.evaluate("document.activeElement.id") == "edited-output"
    assert editor.input_value() == WRONG
    # Every shortcut key, typed in the editor, is text: no verdict, no skip, no help.
    page.keyboard.press("Control+End")
    page.keyboard.type("# a r s u n b e 1 2 ? ")
    page.keyboard.press("Enter")
    quiet_moment(page, 300)
    assert not Verdict.objects.exists()
    assert ReviewItem.objects.get(pk=first.pk).status == "claimed"
    assert not page.locator("#shortcuts").is_visible()
    assert editor.input_value().endswith("# a r s u n b e 1 2 ? \n")
    # Esc closes the editor, keeps the card and what was typed.
    page.keyboard.press("Escape")
    assert not editor.is_visible() and card_item(page) == str(first.pk)
    page.keyboard.press("e")
    assert "# a r s u n b e 1 2 ?" in editor.input_value()
    editor.fill(RIGHT)
    page.screenshot(path=str(artifacts / "review-edit-1280px.png"), full_page=True)
    # Ctrl+Enter twice, fast: one verdict, and nothing done to the next item.
    page.keyboard.press("Control+Enter")
    page.keyboard.press("Control+Enter")
    wait_for_card_change(page, str(first.pk))
    quiet_moment(page)
    verdict = Verdict.objects.get(item=first)
    assert verdict.decision == "edit" and verdict.edited_output == RIGHT
    assert not Verdict.objects.filter(item=second).exists()
    assert "Approved with your edits" in page.locator("#card .notices").inner_text()

    page.click(f"#context a[href='/review/items/{first.pk}/']")
    page.wait_for_load_state("networkidle")
    assert page.locator(".diff .del").inner_text() == "-    return n % 2 == 1"
    assert page.locator(".diff .add").inner_text() == "+    return n % 2 == 0"
    assert page.locator(".diff").is_visible()
    page.screenshot(path=str(artifacts / "review-item-diff-1280px.png"), full_page=True)


def test_edit_and_approve_with_buttons_on_a_phone(new_context, login, make_user, admit_item, artifacts):
    make_user("rita", "reviewer")
    first = admit_item(final_output=WRONG).item
    admit_item()
    page = new_context(viewport={"width": 390, "height": 844}).new_page()
    login(page, "rita")
    start(page)
    page.click("#edit-button")
    editor = page.locator("#edited-output")
    assert editor.is_visible()
    editor.fill(RIGHT)
    _no_page_scroll_sideways(page, 390)
    page.screenshot(path=str(artifacts / "review-edit-390px.png"), full_page=True)
    page.click("#edit-submit")
    wait_for_card_change(page, str(first.pk))
    assert Verdict.objects.get(item=first).decision == "edit"
    page.goto(page.url.split("/review/")[0] + f"/review/items/{first.pk}/")
    assert page.locator(".diff .add").is_visible()
    _no_page_scroll_sideways(page, 390)
    page.screenshot(path=str(artifacts / "review-item-diff-390px.png"), full_page=True)


@pytest.mark.parametrize("width", [1280, 390])
def test_send_back_with_b_needs_a_note_and_keeps_it_through_esc(
    new_context, login, make_user, admit_item, artifacts, width
):
    make_user("rita", "reviewer")
    first = admit_item().item
    second = admit_item().item
    page = new_context(viewport={"width": width, "height": 900}).new_page()
    login(page, "rita")
    start(page)
    page.keyboard.press("b")
    note = page.locator("#send-back-note")
    assert note.is_visible() and page.evaluate("document.activeElement.id") == "send-back-note"
    # Ctrl+Enter with no note: said in place, nothing sent.
    page.keyboard.press("Control+Enter")
    quiet_moment(page, 300)
    assert "needs a note" in page.locator("#send-back-error").inner_text()
    assert not Verdict.objects.exists()
    page.keyboard.type("Handle zero; a then r is text here.")
    assert page.locator("#send-back-error").inner_text() == ""  # answered by typing
    page.keyboard.press("Escape")
    assert not note.is_visible() and card_item(page) == str(first.pk)
    page.keyboard.press("b")
    assert note.input_value() == "Handle zero; a then r is text here."
    _no_page_scroll_sideways(page, width)
    page.screenshot(path=str(artifacts / f"review-send-back-{width}px.png"), full_page=True)
    page.keyboard.press("Control+Enter")
    wait_for_card_change(page, str(first.pk))
    quiet_moment(page)
    verdict = Verdict.objects.get(item=first)
    assert verdict.decision == "send_back" and verdict.note == "Handle zero; a then r is text here."
    assert ReviewItem.objects.get(pk=first.pk).status == "sent_back"
    assert card_item(page) == str(second.pk) and not Verdict.objects.filter(item=second).exists()
    assert f"Sent back item #{first.pk}" in page.locator("#card .notices").inner_text()


def test_a_later_version_shows_its_history_collapsed(new_context, login, make_user, admit_item, artifacts, settings):
    settings.REVIEWQUEUE_UNDO_SECONDS = 0  # the send-back is final at once, so its revision may follow
    rita = make_user("rita", "reviewer")
    v1 = admit_item(final_output="first try output").item
    services.claim(reviewer=rita)
    services.send_back(item_id=v1.pk, reviewer=rita, note="Please name the upgrade step.")
    v2 = admit_item(final_output="second try output", previous_version=v1).item
    page = new_context(viewport={"width": 1280, "height": 900}).new_page()
    login(page, "rita")
    start(page)
    assert card_item(page) == str(v2.pk)
    history = page.locator("#history")
    assert history.is_visible() and history.get_attribute("open") is None
    assert not page.get_by_text("first try output").first.is_visible()
    page.click("#history > summary")
    assert page.get_by_text("first try output").first.is_visible()
    assert "Please name the upgrade step." in page.locator(".version-note").inner_text()
    page.screenshot(path=str(artifacts / "review-history-1280px.png"), full_page=True)


def test_u_takes_back_an_edit_and_a_send_back(page, login, make_user, admit_item):
    make_user("rita", "reviewer")
    first = admit_item(final_output=WRONG).item
    second = admit_item().item
    login(page, "rita")
    start(page)
    page.keyboard.press("e")
    page.locator("#edited-output").fill(RIGHT)
    page.keyboard.press("Control+Enter")
    wait_for_card_change(page, str(first.pk))
    page.keyboard.press("u")
    wait_for_card_change(page, str(second.pk))
    assert card_item(page) == str(first.pk) and not Verdict.objects.filter(item=first).exists()
    assert "taken back" in page.locator("#card .notices").inner_text()
    page.keyboard.press("b")
    page.keyboard.type("Say why n % 2 == 0.")
    page.keyboard.press("Control+Enter")
    wait_for_card_change(page, str(first.pk))
    page.keyboard.press("u")
    wait_for_card_change(page, str(second.pk))
    assert card_item(page) == str(first.pk)
    assert ReviewItem.objects.get(pk=first.pk).status == "claimed"
    assert not Verdict.objects.exists()
