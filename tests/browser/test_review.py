from __future__ import annotations

import re
import statistics
from datetime import UTC, datetime

import pytest
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from reviewqueue import services
from reviewqueue.models import Queue, ReviewItem, Verdict
from tests.browser.helpers import card_item, start, wait_for_card_change

pytestmark = pytest.mark.usefixtures("transactional_db")

CODE = "def is_even(n):\n    return n % 2 == 0\n"
PROSE = "The capital of France is Paris.\n\nIt has been since the tenth century."
EVIL = (
    "<script>window.pwned = 1; alert('x')</script>\n"
    '<img src="x" onerror="window.pwned = 2; alert(2)">\n'
    '<a href="javascript:alert(3)">click me</a>'
)

# Collected in the page: milliseconds from the Enter keypress to the next card
# being swapped in. Installed by the test, not shipped with the page.
TIMING_PROBE = """
() => {
  window.__decisionMs = [];
  document.addEventListener('keydown', (e) => { if (e.key === 'Enter') window.__t0 = performance.now(); }, true);
  document.addEventListener('htmx:afterSwap', (e) => {
    if (window.__t0 && e.detail.target && e.detail.target.id === 'card') {
      window.__decisionMs.push(performance.now() - window.__t0);
      window.__t0 = null;
    }
  });
}
"""


@pytest.fixture(autouse=True)
def _fresh_login_budget():
    # Every test signs in through the real rate-limited login; the limit
    # counts per address in the cache, and all tests share one address.
    from django.core.cache import cache

    cache.clear()


def server_ms(header, name):
    match = re.search(rf"{name};dur=([\d.]+)", header or "")
    return float(match.group(1)) if match else None


def test_it_lets_a_reviewer_decide_five_items_with_the_keyboard_only(page, login, live_server, make_user, admit_item):
    rita = make_user("rita", "reviewer")
    items = [admit_item(final_output=CODE if n % 2 else PROSE).item for n in range(5)]
    timings: list[str] = []
    page.on(
        "response",
        lambda r: timings.append(r.headers.get("server-timing", "")) if "/decide/" in r.url else None,
    )
    login(page, "rita")
    assert page.url.endswith(reverse("review:queue"))
    page.evaluate(TIMING_PROBE)

    start(page)
    for n in range(5):
        current = card_item(page)
        if n % 2:
            page.keyboard.press("r")
            page.keyboard.press("2")
        else:
            page.keyboard.press("a")
        page.keyboard.press("Enter")
        wait_for_card_change(page, current)

    page.wait_for_selector("text=The queue is empty")
    verdicts = {v.item_id: v for v in Verdict.objects.filter(reviewer=rita)}
    assert set(verdicts) == {item.pk for item in items}
    assert sorted(v.decision for v in verdicts.values()) == ["approve"] * 3 + ["reject"] * 2
    assert {v.reason_label for v in verdicts.values() if v.decision == "reject"} == {"logic_error"}

    browser_ms = page.evaluate("window.__decisionMs")
    assert len(browser_ms) == 5
    totals = [server_ms(h, "total") for h in timings]
    decides = [server_ms(h, "decide") for h in timings]
    assert len(totals) == 5 and None not in totals
    median_browser, median_total = statistics.median(browser_ms), statistics.median(totals)
    print(
        f"\nper decision, median of 5: keypress to next card {median_browser:.1f} ms; "
        f"server {median_total:.1f} ms (verdict {statistics.median(decides):.1f} ms, "
        f"next claim + render {median_total - statistics.median(decides):.1f} ms); "
        f"network, swap and scripts {median_browser - median_total:.1f} ms"
    )


def test_it_never_shows_two_reviewers_the_same_item(new_context, login, make_user, admit_item):
    # One review per item: a double-reviewed item is meant for two reviewers
    # (tests/reviewqueue/views/test_double_review_views.py).
    services.policy_update(user=None, changes={"double_review_rate": 0})
    make_user("rita", "reviewer")
    make_user("ravi", "reviewer")
    all_items = {admit_item().item.pk for _ in range(6)}
    pages = {}
    for name in ("rita", "ravi"):
        pages[name] = new_context().new_page()
        login(pages[name], name)
        start(pages[name])

    seen: dict[str, list[int]] = {"rita": [], "ravi": []}
    done: set[str] = set()
    while len(done) < 2:
        for name, page in pages.items():
            if name in done:
                continue
            current = card_item(page)
            if not current:
                done.add(name)
                continue
            seen[name].append(int(current))
            page.keyboard.press("a")
            page.keyboard.press("Enter")
            wait_for_card_change(page, current)

    assert not set(seen["rita"]) & set(seen["ravi"])
    assert set(seen["rita"]) | set(seen["ravi"]) == all_items
    assert Verdict.objects.count() == 6


def test_it_refuses_an_operator_page_to_a_reviewer(page, login, live_server, make_user, console_errors):
    make_user("rita", "reviewer")
    login(page, "rita")
    response = page.goto(f"{live_server.url}{reverse('ops:dashboard')}")
    assert response.status == 403
    assert page.locator("h1").inner_text() == "Not allowed"
    # Chromium logs every 4xx page load as a console error: this one was asked for.
    expected = [e for e in console_errors if "status of 403" in e]
    assert len(expected) == 1
    console_errors.remove(expected[0])


def test_it_renders_hostile_output_as_inert_text(page, login, make_user, admit_item):
    rita = make_user("rita", "reviewer")
    admit_item(task_description=EVIL, final_output=EVIL, last_error=EVIL)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    login(page, "rita")
    start(page)

    card = page.locator("#card")
    assert card.locator("script, img, a[href^='javascript']").count() == 0
    output = page.locator(".output").inner_text()
    for fragment in ("<script>", "onerror=", "javascript:"):
        assert fragment in output
        assert fragment in page.locator(".task").inner_text()
        assert fragment in page.locator(".last-error").inner_text()
    assert page.evaluate("window.pwned") is None
    assert dialogs == []
    assert ReviewItem.objects.get().lease_holder == rita


@pytest.mark.parametrize("width", [1280, 390])
def test_it_fits_the_review_page_on_wide_and_narrow_screens(
    new_context, login, make_user, admit_item, artifacts, width
):
    make_user("rita", "reviewer")
    admit_item(final_output=CODE * 3 + "# " + "a very long comment line " * 12, draft=True)
    admit_item()
    page = new_context(viewport={"width": width, "height": 900}).new_page()
    login(page, "rita")
    start(page)
    # Only the output box may scroll sideways; the page itself never does.
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.locator("#approve-button").is_visible()
    assert page.locator("label[for=note]").is_visible()
    path = artifacts / f"review-{width}px.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 0


def test_it_keeps_shortcuts_quiet_while_typing_a_note(page, login, make_user, admit_item):
    make_user("rita", "reviewer")
    item = admit_item().item
    login(page, "rita")
    start(page)
    page.focus("#note")
    page.keyboard.type("a rather short answer, see 1 and 2")
    page.keyboard.press("Enter")
    page.keyboard.press("Escape")
    assert not Verdict.objects.exists()
    page.keyboard.press("r")
    page.keyboard.press("3")
    page.keyboard.press("Enter")
    page.wait_for_selector("text=The queue is empty")
    verdict = Verdict.objects.get(item=item)
    assert verdict.reason_label == "format_issue"
    assert verdict.note == "a rather short answer, see 1 and 2\n"


def test_it_asks_for_a_reason_before_rejecting_and_undoes_with_u(page, login, make_user, admit_item):
    make_user("rita", "reviewer")
    item = admit_item().item
    login(page, "rita")
    start(page)
    page.keyboard.press("r")
    page.keyboard.press("Enter")
    assert "needs a reason" in page.locator("#form-error").inner_text()
    assert not Verdict.objects.exists()
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    wait_for_card_change(page, str(item.pk))
    assert Verdict.objects.filter(item=item).exists()
    page.keyboard.press("u")
    page.wait_for_selector(f"#card[data-item='{item.pk}']")
    assert "taken back" in page.locator("#card .notices").inner_text()
    assert not Verdict.objects.exists()


def test_it_notices_new_items_in_an_empty_queue_without_a_reload(page, login, make_user, admit_item):
    make_user("rita", "reviewer")
    login(page, "rita")
    page.wait_for_selector("text=The queue is empty")
    page.evaluate("window.__sameDocument = true")
    admit_item()
    page.wait_for_selector("#next-button", timeout=15_000)
    assert page.evaluate("window.__sameDocument") is True


def test_it_sends_a_timed_out_session_to_login_and_back_to_the_same_item(page, login, make_user, admit_item):
    make_user("rita", "reviewer")
    item = admit_item().item
    login(page, "rita")
    start(page)
    page.focus("#note")
    page.keyboard.type("half-written thought")
    page.keyboard.press("Escape")
    page.context.clear_cookies(name="sessionid")
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/login/\?next="))
    assert not Verdict.objects.exists()
    page.fill("#id_username", "rita")
    page.fill("#id_password", "pw-for-tests-1")
    page.click("button[type=submit]")
    page.wait_for_selector(f"#card[data-item='{item.pk}']")
    expect(page.locator("#note")).to_have_value("half-written thought")


def test_it_works_as_plain_forms_without_javascript(new_context, login, make_user, admit_item):
    make_user("rita", "reviewer")
    item = admit_item().item
    page = new_context(java_script_enabled=False).new_page()
    login(page, "rita")
    page.click("#next-button")
    page.wait_for_selector("#decide-form")
    page.check("#reason-4")
    page.click("#reject-button")
    page.wait_for_selector(f"text=Rejected item #{item.pk} (hallucination)")
    assert Verdict.objects.get(item=item).reason_label == "hallucination"


def test_it_renews_the_lease_only_while_the_reviewer_is_active(page, login, make_user, admit_item):
    make_user("rita", "reviewer")
    item = admit_item().item
    renewals: list[str] = []
    page.on("request", lambda r: renewals.append(r.url) if "/renew/" in r.url else None)
    page.clock.install()
    login(page, "rita")
    start(page)
    first_expiry = ReviewItem.objects.get(pk=item.pk).lease_expires_at
    # The page's time from here on moves only as the test says, so how long the
    # server takes to answer (seconds, on a loaded machine) shifts no deadline.
    now_ms = page.evaluate("Date.now()")
    page.clock.pause_at(datetime.fromtimestamp(now_ms / 1000 + 1, tz=UTC))
    page.keyboard.press("Escape")  # active at this paused moment

    # Active a moment ago: the next two minute-ticks renew, later ones do not.
    for _ in range(2):
        with page.expect_response("**/renew/"):
            page.clock.run_for(60_000)
        page.clock.run_for(100)  # lets htmx settle the swapped-in lease
    for _ in range(3):
        page.clock.run_for(60_000)
    page.evaluate("1")  # one round trip, so any request sent by now has been reported
    assert len(renewals) == 2
    assert ReviewItem.objects.get(pk=item.pk).lease_expires_at > first_expiry

    page.keyboard.press("Escape")  # any key counts as activity again
    with page.expect_response("**/renew/"):
        page.clock.run_for(60_000)
    assert len(renewals) == 3


def test_a_short_lease_is_renewed_in_time_while_the_reviewer_works(page, login, make_user, admit_item):
    """A queue's lease may be as short as 10 s: renewing once a minute let an
    active reviewer's 30 s lease run out under them."""
    make_user("rita", "reviewer")
    Queue.objects.filter(pk=Queue.default().pk).update(lease_seconds=12)
    item = admit_item().item
    login(page, "rita")
    start(page)
    for step in range(9):  # 18 s of reading, the mouse moving: half again the lease
        page.mouse.move(100 + 10 * step, 300)
        page.wait_for_timeout(2000)
    assert ReviewItem.objects.get(pk=item.pk).lease_expires_at > timezone.now()
    assert "expired" not in page.locator("#lease").inner_text()
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    page.wait_for_selector(f"text=Approved item #{item.pk}")
    assert Verdict.objects.get(item=item).decision == "approve"


def test_it_tells_the_second_tab_what_the_first_tab_recorded(new_context, login, make_user, admit_item):
    make_user("rita", "reviewer")
    item = admit_item().item
    admit_item()
    context = new_context()
    first_tab = context.new_page()
    login(first_tab, "rita")
    start(first_tab)
    second_tab = context.new_page()
    second_tab.goto(first_tab.url)
    assert card_item(second_tab) == str(item.pk)  # the same lease, seen twice

    first_tab.keyboard.press("a")
    first_tab.keyboard.press("Enter")
    wait_for_card_change(first_tab, str(item.pk))
    second_tab.keyboard.press("r")
    second_tab.keyboard.press("1")
    second_tab.keyboard.press("Enter")
    second_tab.wait_for_selector("text=by you, in another tab or window")
    notice = second_tab.locator("#card .notices").inner_text()
    assert f"Item #{item.pk} was already approved just now" in notice
    assert "this rejection was not recorded" in notice
    assert Verdict.objects.get(item=item).decision == "approve"
