"""Keys at the wrong moment: no verdict may ever come from a key the reviewer
did not mean as a verdict on the item they see."""

from __future__ import annotations

import pytest

from reviewqueue.models import Verdict
from tests.browser.helpers import card_item, quiet_moment, send_keys, start, wait_for_card_change

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture(autouse=True)
def _fresh_login_budget():
    from django.core.cache import cache

    cache.clear()


def test_it_never_lets_space_approve_the_next_item(page, login, make_user, admit_item):
    make_user("rita", "reviewer")
    first, second, _ = (admit_item().item for _ in range(3))
    login(page, "rita")
    start(page)
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    wait_for_card_change(page, str(first.pk))

    page.keyboard.press(" ")
    quiet_moment(page)
    assert not Verdict.objects.filter(item=second).exists()
    assert card_item(page) == str(second.pk)
    # Focus sits on the item's title, where Space only scrolls.
    assert page.evaluate("document.activeElement.id") == "card-title"


def test_it_never_lets_space_tick_a_reason_on_the_next_item(page, login, make_user, admit_item):
    make_user("rita", "reviewer")
    first, second, third = (admit_item().item for _ in range(3))
    login(page, "rita")
    start(page)
    page.keyboard.press("r")
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    wait_for_card_change(page, str(first.pk))

    page.keyboard.press(" ")
    quiet_moment(page)
    assert page.locator("#decide-form input[type=radio]:checked").count() == 0
    assert page.evaluate("document.activeElement.id") == "card-title"
    # Enter now asks for a choice rather than acting on a ticked reason.
    page.keyboard.press("Enter")
    quiet_moment(page)
    assert "Choose first" in page.locator("#form-error").inner_text()
    assert Verdict.objects.filter(item=first, reason_label="logic_error").exists()
    assert not Verdict.objects.filter(item__in=[second, third]).exists()


def test_it_ignores_and_names_keys_pressed_while_a_verdict_is_in_flight(page, login, make_user, admit_item):
    make_user("rita", "reviewer")
    first, second = (admit_item().item for _ in range(2))
    login(page, "rita")
    start(page)
    page.evaluate("window.__sameDocument = true")
    # Approve, then at once (the request still in flight) reject with a reason.
    send_keys(page, ["a", "Enter", "r", "2", "Enter"])
    wait_for_card_change(page, str(first.pk))
    quiet_moment(page)

    assert Verdict.objects.get(item=first).decision == "approve"
    assert not Verdict.objects.filter(item=second).exists()
    status = page.locator("#key-status")
    assert status.is_visible()
    assert "Ignored r, 2, Enter" in status.inner_text()
    assert page.evaluate("window.__sameDocument") is True
    # Nothing half-applied to the new card: no choice armed, no reason ticked.
    assert page.locator("#decide-form button.armed, #card button.armed").count() == 0
    assert page.locator("#decide-form input[type=radio]:checked").count() == 0


def test_it_ignores_and_names_keys_pressed_just_after_the_next_card_shows(page, login, make_user, admit_item):
    make_user("rita", "reviewer")
    first, second, third = (admit_item().item for _ in range(3))
    login(page, "rita")
    start(page)
    page.evaluate("window.__sameDocument = true")
    # A fast "a Enter" for the next item, 5 ms after its card is swapped in:
    # before anyone could have read it.
    send_keys(page, ["a", "Enter"], when="after-swap", delay_ms=5)
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    wait_for_card_change(page, str(first.pk))
    quiet_moment(page)

    assert page.evaluate("window.__sameDocument") is True, "the page reloaded"
    assert Verdict.objects.filter(item=first).exists()
    assert not Verdict.objects.filter(item__in=[second, third]).exists()
    assert card_item(page) == str(second.pk)
    assert "Ignored a, Enter" in page.locator("#key-status").inner_text()
    assert page.locator("#card button.armed").count() == 0

    # Once ready, the same keys work, and the notice of ignored keys goes.
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    wait_for_card_change(page, str(second.pk))
    assert Verdict.objects.filter(item=second).exists()
    assert page.locator("#key-status").inner_text() == ""


def test_it_lets_undo_through_just_after_the_next_card_shows(page, login, make_user, admit_item):
    make_user("rita", "reviewer")
    first, _ = (admit_item().item for _ in range(2))
    login(page, "rita")
    start(page)
    # Undo concerns the verdict just given, which the reviewer did see.
    send_keys(page, ["u"], when="after-swap", delay_ms=5)
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    page.wait_for_selector("text=taken back")
    assert card_item(page) == str(first.pk)
    assert not Verdict.objects.exists()


def test_it_swaps_cards_without_a_csp_error_after_the_note_was_resized(page, login, make_user, admit_item):
    make_user("rita", "reviewer")
    first, _ = (admit_item().item for _ in range(2))
    login(page, "rita")
    start(page)
    page.evaluate(
        """() => {
          window.__violations = [];
          document.addEventListener('securitypolicyviolation', (e) => window.__violations.push(e.violatedDirective));
        }"""
    )
    # Dragging the textarea's resize handle gives it an inline style, as this does.
    page.locator("#note").evaluate("el => { el.style.height = '120px'; }")
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    wait_for_card_change(page, str(first.pk))
    quiet_moment(page, 200)
    assert page.evaluate("window.__violations") == []
    # The console_errors fixture checks the console as well, at teardown.


def test_it_leaves_the_note_of_a_decided_item_for_the_next_items_title(page, login, make_user, admit_item):
    make_user("rita", "reviewer")
    first, second = (admit_item().item for _ in range(2))
    login(page, "rita")
    start(page)
    page.keyboard.press("r")
    page.keyboard.press("4")
    page.focus("#note")
    page.keyboard.type("made up an API")
    page.keyboard.press("Control+Enter")
    wait_for_card_change(page, str(first.pk))
    assert Verdict.objects.get(item=first).note == "made up an API"
    # Typing on would otherwise land in the next item's note unseen.
    assert page.evaluate("document.activeElement.id") == "card-title"
    assert page.locator("#note").input_value() == ""
    assert not Verdict.objects.filter(item=second).exists()


def test_it_keeps_the_note_focused_when_a_verdict_comes_back_refused(page, login, make_user, admit_item):
    make_user("rita", "reviewer")
    item = admit_item().item
    login(page, "rita")
    start(page)
    page.focus("#note")
    page.keyboard.type("not sure yet")
    # Plain form submit of a rejection without a reason: the server refuses it.
    page.evaluate("document.getElementById('reject-button').click()")
    page.wait_for_selector("text=A rejection needs a reason")
    assert card_item(page) == str(item.pk)
    assert page.locator("#note").input_value() == "not sure yet"
    assert page.evaluate("document.activeElement.id") == "note"
    assert not Verdict.objects.exists()
