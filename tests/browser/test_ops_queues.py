"""The queues overview, the queue switcher and creating a queue, in the
browser at a desktop and a phone width: no sideways scrolling, no console
error (the conftest fails the test on any), rows that stack on a phone, and
screenshots for the record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.django_db(transaction=True)

from tests.browser.test_ops_pages import OVERFLOW, WIDTHS


@pytest.fixture(autouse=True)
def _no_login_limit(settings: Any) -> None:
    # These tests sign in more often than the login rate limit allows a person
    # per minute; the limit has its own tests.
    settings.RATELIMIT_ENABLE = False


@pytest.fixture
def queues(admit_item: Any, operator: Any) -> None:
    """Four queues: default, one in draft mode, one quiet, one archived with history."""
    from reviewqueue import services
    from reviewqueue.models import Queue

    services.create_queue(user=operator, slug="team-a", name="Team A (code review)", settings={"capacity": 10})
    services.create_queue(user=operator, slug="team-b", name="Team B", settings={"capacity": 40})
    services.create_queue(user=operator, slug="old-fleet", name="Old fleet")
    for i in range(9):  # above team-a's high watermark: draft mode
        admit_item(queue="team-a", priority=i % 3)
    admit_item(queue="team-b")
    admit_item()
    services.archive_queue(queue=Queue.objects.get(slug="old-fleet"), user=operator)
    assert Queue.objects.get(slug="team-a").mode == "draft"


def _open(new_context: Any, login: Any, width: str) -> Any:
    page = new_context(viewport=WIDTHS[width]).new_page()
    login(page, "otto")
    return page


@pytest.mark.parametrize("width", WIDTHS)
def test_the_overview_shows_every_queue_at_both_widths(
    new_context: Any, live_server: Any, login: Any, queues: None, width: str, artifacts: Path
) -> None:
    page = _open(new_context, login, width)
    page.goto(f"{live_server.url}/ops/queues/")
    rows = page.locator("#queues-active tbody tr")
    expect(rows).to_have_count(3)
    team_a = page.locator("#queue-team-a")
    expect(team_a).to_contain_text("9 / 10")
    expect(team_a).to_contain_text("draft")
    expect(page.locator("#queues-archived")).to_be_hidden()  # folded away until asked for
    found = page.evaluate(OVERFLOW)
    assert found["scroll"] <= found["client"], f"overview at {width}: {found}"
    display = team_a.locator("td").first.evaluate("td => getComputedStyle(td).display")
    assert display == ("block" if width == "390" else "table-cell")  # rows stack on a phone
    page.screenshot(path=str(artifacts / f"ops-queues-{width}.png"), full_page=True)
    page.locator("#archived-queues summary").click()
    expect(page.locator("#queue-old-fleet")).to_be_visible()
    expect(page.locator("#queue-old-fleet")).to_contain_text("Restore")
    page.screenshot(path=str(artifacts / f"ops-queues-archived-{width}.png"), full_page=True)
    page.locator("#queue-team-a a", has_text="Team A").click()
    expect(page).to_have_url(f"{live_server.url}/ops/?queue=team-a")
    expect(page.locator("h1")).to_contain_text("Team A")
    expect(page.locator("#depth-value")).to_have_text("9")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_switcher_moves_a_page_to_another_queue_by_keyboard(
    new_context: Any, live_server: Any, login: Any, queues: None, width: str, artifacts: Path
) -> None:
    page = _open(new_context, login, width)
    page.goto(f"{live_server.url}/ops/policy/?queue=team-a")
    switcher = page.locator("#queue-switch")
    expect(switcher).to_have_value("team-a")
    expect(page.locator("#queue-switch option")).to_have_count(3)  # active queues only
    found = page.evaluate(OVERFLOW)
    assert found["scroll"] <= found["client"], f"policy at {width}: {found}"
    page.screenshot(path=str(artifacts / f"ops-switcher-{width}.png"), full_page=False)
    switcher.focus()
    switcher.select_option("team-b")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{live_server.url}/ops/policy/?queue=team-b")
    expect(page.locator("h1")).to_contain_text("Team B")
    expect(page.locator("#id_capacity")).to_have_value("40")


@pytest.mark.parametrize("width", WIDTHS)
def test_an_operator_creates_a_queue_with_the_form(
    new_context: Any,
    live_server: Any,
    login: Any,
    queues: None,
    width: str,
    artifacts: Path,
    console_errors: list[str],
) -> None:
    from reviewqueue.models import Queue

    page = _open(new_context, login, width)
    page.goto(f"{live_server.url}/ops/queues/")
    form = page.locator("#create-queue")
    form.locator("#id_slug").fill("Not A Slug")
    form.locator("#id_name").fill("Night shift")
    form.locator("#id_capacity").fill("15")
    form.locator("button[type=submit]").click()
    expect(page.locator("#id_slug_error")).to_be_visible()
    expect(page.locator("#id_name")).to_have_value("Night shift")  # nothing typed is lost
    # The refused form answers 400, which the browser logs; that one was expected.
    refused = f"{live_server.url}/ops/queues/: Failed to load resource: the server responded with a status of 400"
    assert [e for e in console_errors if e.startswith(refused)] == [console_errors[0]]
    console_errors.clear()
    page.screenshot(path=str(artifacts / f"ops-queue-create-error-{width}.png"), full_page=True)
    page.locator("#id_slug").fill(f"night-{width}")
    page.locator("#id_copy_from").select_option("team-a")
    page.locator("#create-queue button[type=submit]").click()
    expect(page).to_have_url(f"{live_server.url}/ops/queues/night-{width}/")
    expect(page.locator("h1")).to_contain_text("Night shift")
    found = page.evaluate(OVERFLOW)
    assert found["scroll"] <= found["client"], f"queue page at {width}: {found}"
    page.screenshot(path=str(artifacts / f"ops-queue-created-{width}.png"), full_page=True)
    queue = Queue.objects.get(slug=f"night-{width}")
    assert (queue.name, queue.capacity) == ("Night shift", 15)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_queue_routing_and_archive_pages_fit_both_widths(
    new_context: Any, live_server: Any, login: Any, queues: None, width: str, artifacts: Path
) -> None:
    from reviewqueue.models import Queue, RoutingRule

    RoutingRule.objects.create(queue=Queue.objects.get(slug="team-a"), position=0, producer="ci-bot", min_priority=3)
    second = RoutingRule.objects.create(
        queue=Queue.objects.get(slug="team-b"), position=1, task_id_prefix="nightly-a-rather-long-prefix-"
    )
    page = _open(new_context, login, width)
    for path, name in (
        ("/ops/queues/team-a/", "ops-queue-reviewers"),
        ("/ops/queues/team-b/archive/", "ops-queue-archive"),
        ("/ops/routing/?producer=ci-bot&task_kind=&priority=5&task_id=x", "ops-routing"),
    ):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
        found = page.evaluate(OVERFLOW)
        assert found["scroll"] <= found["client"], f"{path} at {width}: {found}"
        page.screenshot(path=str(artifacts / f"{name}-{width}.png"), full_page=True)
    expect(page.locator("#route-target")).to_contain_text("team-a")
    page.locator(f"#route-{second.pk} button[aria-label='Move rule 2 up']").click()
    expect(page.locator("#routing-rules tbody tr").first).to_have_id(f"route-{second.pk}")


def _fill_added(page: Any, *, hours: str, replications: str) -> None:
    page.locator("#id_review_per_min").fill("3")
    page.locator("#id_slug").fill("new-fleet")
    page.locator("#id_production_per_min").fill("2")
    page.locator("#id_capacity").fill("30")
    page.locator("#id_hours").fill(hours)
    page.locator("#id_replications").fill(replications)


@pytest.mark.parametrize("width", WIDTHS)
def test_if_we_add_a_queue_from_the_overview_at_both_widths(
    new_context: Any, live_server: Any, login: Any, queues: None, width: str, artifacts: Path
) -> None:
    page = _open(new_context, login, width)
    page.goto(f"{live_server.url}/ops/queues/")
    page.locator("#add-queue-whatif").click()
    expect(page.locator("h1")).to_have_text("If we add a queue")
    # Every active queue, prefilled from live data: team-a had 9 arrivals in the last hour.
    expect(page.locator("#existing-queues tbody tr")).to_have_count(3)
    expect(page.locator("#id_rate__team-a")).to_have_value("0.15")
    expect(page.locator("#id_capacity__team-a")).to_have_value("10")
    expect(page.locator("#waiting-team-a")).to_have_text("9 items")  # the run starts from them
    expect(page.locator("#live-measured")).to_contain_text("enter the team's review rate by hand")
    found = page.evaluate(OVERFLOW)
    assert found["scroll"] <= found["client"], f"add-queue form at {width}: {found}"
    page.screenshot(path=str(artifacts / f"ops-add-queue-form-{width}.png"), full_page=True)
    _fill_added(page, hours="2", replications="4")
    page.locator("#id_replications").press("Enter")  # the keyboard submits the form
    result = page.locator("#added-changes")
    expect(result).to_be_visible(timeout=30_000)
    expect(page.locator("#change-team-a")).to_contain_text("→")
    expect(page.locator("#result")).to_contain_text("from today's backlog (1 waiting in default, 9 waiting in team-a")
    expect(page.locator("#utilisation")).to_contain_text("%")
    expect(page.locator(".pair-chart svg")).to_have_count(2)
    display = page.locator("#change-team-a td").first.evaluate("td => getComputedStyle(td).display")
    assert display == ("block" if width == "390" else "table-cell")  # the table stacks on a phone
    found = page.evaluate(OVERFLOW)
    assert found["scroll"] <= found["client"], f"add-queue result at {width}: {found}"
    page.screenshot(path=str(artifacts / f"ops-add-queue-result-{width}.png"), full_page=True)


def test_the_largest_add_queue_run_shows_progress_then_its_result(
    new_context: Any,
    live_server: Any,
    login: Any,
    queues: None,
    worker_later: Any,
    artifacts: Path,
    console_errors: list[str],
) -> None:
    import re

    page = _open(new_context, login, "1280")
    page.goto(f"{live_server.url}/ops/whatif/add-queue/")
    _fill_added(page, hours="8", replications="500")
    page.locator("#run-add-queue").click()
    error = page.locator("#id_replications_error")
    expect(error).to_contain_text("too large to finish in time")
    # The refused form answers 400, which the browser logs; that one was expected.
    assert len(console_errors) == 1 and "status of 400" in console_errors[0]
    console_errors.clear()
    largest = re.search(r"Use at most (\d+) replications", error.inner_text())
    assert largest is not None
    page.locator("#id_replications").fill(largest.group(1))
    page.locator("#run-add-queue").click()
    expect(page.locator("#sim-progress")).to_be_visible()
    expect(page.locator("#result")).to_contain_text("Runs done (without and with new-fleet)")
    page.screenshot(path=str(artifacts / "ops-add-queue-progress-1280.png"), full_page=True)
    expect(page.locator("#added-changes")).to_be_visible(timeout=150_000)
    expect(page.locator("#result")).to_contain_text(f"{largest.group(1)} replications each")
    page.screenshot(path=str(artifacts / "ops-add-queue-largest-1280.png"), full_page=True)


def test_the_add_queue_results_notes_read_as_lines_on_a_phone(
    new_context: Any, live_server: Any, login: Any, queues: None
) -> None:
    """Each note is its term then its words, on one line that wraps like a
    sentence: not a term broken in two beside words starting at a
    different place on every row."""
    page = _open(new_context, login, "390")
    page.goto(f"{live_server.url}/ops/whatif/add-queue/")
    _fill_added(page, hours="2", replications="4")
    page.locator("#id_replications").press("Enter")
    expect(page.locator("#added-changes")).to_be_visible(timeout=30_000)
    # The tops and lefts of the lines a note's text takes, read from a range over it.
    lines = """e => {
      const range = document.createRange();
      range.selectNodeContents(e);
      return [...range.getClientRects()].filter(r => r.width > 0).map(r => [Math.round(r.top), Math.round(r.left)]);
    }"""
    notes = page.locator(".compared-notes > div")
    assert notes.count() >= 4
    for i in range(notes.count()):
        term = notes.nth(i).locator("dt")
        said = notes.nth(i).evaluate(lines)
        tops = sorted({top for top, _ in said})
        term_lines = {top for top, _ in term.evaluate(lines)}
        assert len(term_lines) == 1, f"{term.inner_text()!r} breaks over {len(term_lines)} lines"
        start = min(left for _, left in said)
        for top in tops[1:]:  # every further line starts where the first did, under the term
            assert min(left for t, left in said if t == top) <= start + 1, f"{term.inner_text()!r}: {said}"
