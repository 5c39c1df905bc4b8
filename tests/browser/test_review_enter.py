"""Enter on the review page: a focused link or button does what it says; only
a focused card (or nothing focused) takes Enter as "submit the verdict". The
help dialog opens on its Close button, an emptied editor is refused, and a
lost database is named, in a real browser."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import OperationalError
from playwright.sync_api import expect

from reviewqueue import services
from reviewqueue.models import ReviewItem, Verdict
from tests.browser.helpers import card_item, quiet_moment, start, wait_for_card_change

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture(autouse=True)
def _fresh_login_budget() -> None:
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def rita(make_user: Any, admit_item: Any) -> Any:
    """rita reviews the default queue (3 waiting, with instructions holding a
    link) and Docs (1 waiting)."""
    rita = make_user("rita", "reviewer")
    docs = services.create_queue(user=None, slug="docs", name="Docs")
    docs.members.add(rita)
    for _ in range(3):
        admit_item()
    admit_item(queue="docs", task_description="Docs task")
    from reviewqueue.models import Queue

    Queue.objects.filter(pk=Queue.default().pk).update(
        instructions="Read [the style guide](https://example.com/style) first."
    )
    return rita


@pytest.mark.parametrize("armed", [False, True], ids=["unarmed", "after-a"])
def test_enter_on_a_switcher_link_switches_queues_and_never_decides(
    page: Any, login: Any, live_server: Any, rita: Any, armed: bool
) -> None:
    login(page, "rita")
    start(page)
    held = card_item(page)
    if armed:
        page.keyboard.press("a")
    page.keyboard.press("q")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    assert "Docs" in page.evaluate("document.activeElement.textContent")
    page.keyboard.press("Enter")
    page.wait_for_url("**/review/?queue=docs")
    assert not Verdict.objects.exists()
    assert ReviewItem.objects.get(pk=held).status == ReviewItem.Status.CLAIMED


def test_enter_on_the_skip_button_skips_even_with_approve_chosen(page: Any, login: Any, rita: Any) -> None:
    login(page, "rita")
    start(page)
    held = card_item(page)
    page.keyboard.press("a")
    page.locator("#skip-button").focus()
    page.keyboard.press("Enter")
    wait_for_card_change(page, held)
    assert not Verdict.objects.exists()
    assert ReviewItem.objects.get(pk=held).status == ReviewItem.Status.PENDING


def test_enter_on_a_recent_verdict_link_opens_it(page: Any, login: Any, live_server: Any, rita: Any) -> None:
    login(page, "rita")
    start(page)
    first = card_item(page)
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    wait_for_card_change(page, first)
    second = card_item(page)
    page.locator(f'#context .recent a[href$="/{first}/"]').focus()
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/{first}/")
    assert not Verdict.objects.filter(item_id=second).exists()


def test_the_help_dialog_opens_on_close_so_enter_stays_on_the_page(
    page: Any, login: Any, live_server: Any, rita: Any
) -> None:
    login(page, "rita")
    page.goto(f"{live_server.url}/review/?queue=default")  # the dialog carries the instructions of the queue in view
    start(page)
    page.keyboard.press("?")
    expect(page.locator("#shortcuts")).to_be_visible()
    expect(page.locator("#shortcuts .instructions a")).to_have_count(1)
    assert page.evaluate("document.activeElement.closest('a') === null")
    page.keyboard.press("Enter")
    expect(page.locator("#shortcuts")).to_be_hidden()
    assert page.url.startswith(live_server.url) and "/review/" in page.url
    assert not Verdict.objects.exists()


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800}, {"width": 390, "height": 844}], ids=str)
def test_the_help_dialog_opens_at_its_top_with_close_focused(
    new_context: Any, login: Any, live_server: Any, rita: Any, viewport: dict[str, int]
) -> None:
    """Focus on Close (at the end) must not scroll the dialog there: the
    reviewer opens help to read the instructions, which come first."""
    from reviewqueue.models import Queue

    steps = "\n".join(f"{n}. Check point {n} of the output against the task." for n in range(1, 16))
    Queue.objects.filter(pk=Queue.default().pk).update(instructions=f"**Approve** only what you would ship.\n\n{steps}")
    page = new_context(viewport=viewport).new_page()
    login(page, "rita")
    page.goto(f"{live_server.url}/review/?queue=default")
    start(page)
    page.keyboard.press("?")
    dialog = page.locator("#shortcuts")
    expect(dialog).to_be_visible()
    assert dialog.evaluate("d => d.scrollHeight > d.clientHeight"), "the dialog should need scrolling here"
    assert dialog.evaluate("d => d.scrollTop") == 0
    expect(page.locator("#shortcuts-title")).to_be_in_viewport()
    assert page.evaluate("document.activeElement.textContent.trim()") == "Close"
    page.keyboard.press("Enter")
    expect(dialog).to_be_hidden()


def test_an_emptied_editor_is_refused_in_place(page: Any, login: Any, rita: Any) -> None:
    login(page, "rita")
    start(page)
    held = card_item(page)
    page.keyboard.press("e")
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    page.keyboard.press("Control+Enter")
    expect(page.locator("#edit-error")).to_contain_text("The corrected output is empty")
    quiet_moment(page)
    assert card_item(page) == held
    assert not Verdict.objects.exists()


def test_a_verdict_meeting_a_lost_database_says_so_and_keeps_the_card(
    page: Any, login: Any, rita: Any, monkeypatch: pytest.MonkeyPatch, console_errors: list[str]
) -> None:
    login(page, "rita")
    start(page)
    held = card_item(page)

    def lost(**kwargs: Any) -> Any:
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(services, "decide", lost)
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    expect(page.locator("#card .notices")).to_contain_text("The database is unavailable")
    expect(page.locator("#card .notices")).to_contain_text("your verdict was not recorded")
    assert card_item(page) == held
    # The browser logs the refused request itself; nothing else went wrong.
    console_errors[:] = [e for e in console_errors if "503" not in e]
