"""The review-quality page and the dashboard's quality panel in the browser:
both widths without sideways scrolling or console errors, screenshots for
the record, and the Reinstate, settle and retire buttons from the keyboard
and the mouse."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.utils import timezone
from playwright.sync_api import expect

from tests.browser.test_ops_pages import DANGLING, OVERFLOW, WIDTHS

pytestmark = [pytest.mark.double_review, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _no_login_limit(settings: Any) -> None:
    # Each test signs in; the login rate limit has its own tests.
    settings.RATELIMIT_ENABLE = False


@pytest.fixture
def quality_data(admit_item: Any, make_user: Any, operator: Any) -> dict[str, Any]:
    """A flagged and paused reviewer with wrong gold answers, a gold item with
    its copies, and two disagreements: one for a third reviewer, one for an operator."""
    from reviewqueue import agreement, services
    from reviewqueue.models import GoldItem, Judgement, Queue, ReviewerStanding, ReviewItem

    Queue.objects.filter(pk=Queue.current().pk).update(double_review_rate=0, gold_rate=0, gold_pause=True)
    cache.delete(agreement.CACHE_KEY)  # a report cached by an earlier test would name other reviewers
    paula = make_user("paula-with-a-rather-long-username", "reviewer")
    gina = make_user("gina", "reviewer")
    rob = make_user("rob", "reviewer")

    source = admit_item(task_id="gold-source").item
    services.claim(reviewer=gina)
    services.decide(item_id=source.pk, reviewer=gina, approve=True)
    gold = GoldItem.objects.create(item=source, expected_decision="approve", created_by=operator)
    for n, (who, right) in enumerate([(paula, False)] * 6 + [(paula, True)] * 2 + [(gina, True)] * 4):
        copy = admit_item(task_id=f"copy-{n}").item
        ReviewItem.objects.filter(pk=copy.pk).update(gold=gold, status=ReviewItem.Status.GOLD)
        Judgement.objects.create(
            item=copy,
            reviewer=who,
            kind=Judgement.Kind.GOLD,
            decision="approve" if right else "reject",
            reason_label="" if right else "logic_error",
            correct=right,
        )
    now = timezone.now()
    ReviewerStanding.objects.create(reviewer=paula, flagged_at=now, paused_at=now)

    items = {}
    for round_, answers in (
        (
            4,
            [(gina, "approve", "", ""), (rob, "reject", "code_error", ""), (paula, "send_back", "", "Try again " * 20)],
        ),
        (3, [(gina, "approve", "", ""), (rob, "reject", "logic_error", "")]),
    ):
        item = admit_item(task_id=f"a-rather-long-task-identifier-round-{round_}-that-does-not-wrap").item
        ReviewItem.objects.filter(pk=item.pk).update(review_round=round_)
        for n, (who, decision, label, note) in enumerate(answers, start=1):
            Judgement.objects.create(
                item=item,
                reviewer=who,
                kind=Judgement.Kind.REVIEW,
                round=n,
                decision=decision,
                reason_label=label,
                note=note,
            )
        items[round_] = item.pk
    return {"paula": paula.pk, "gold": gold.pk, "operator_item": items[4], "third_item": items[3]}


def _open(new_context: Any, login: Any, width: str) -> Any:
    page = new_context(viewport=WIDTHS[width]).new_page()
    login(page, "otto")
    return page


@pytest.mark.parametrize("width", WIDTHS)
def test_the_quality_page_and_panel_fit_the_screen(
    new_context: Any, live_server: Any, login: Any, quality_data: dict[str, Any], width: str, artifacts: Path
) -> None:
    page = _open(new_context, login, width)
    page.goto(f"{live_server.url}/ops/quality/")
    page.wait_for_load_state("networkidle")
    expect(page.locator(f"#disagreement-{quality_data['operator_item']} .judgement")).to_have_count(3)
    expect(page.locator(f"#reviewer-{quality_data['paula']} .badge")).to_have_text(["paused", "flagged"])
    expect(page.locator(f"#gold-{quality_data['gold']}")).to_be_visible()
    found = page.evaluate(OVERFLOW)
    assert found["scroll"] <= found["client"], f"/ops/quality/ at {width}: {found}"
    assert page.evaluate(DANGLING) == []
    page.screenshot(path=str(artifacts / f"ops-quality-{width}.png"), full_page=True)

    page.goto(f"{live_server.url}/ops/")
    page.wait_for_load_state("networkidle")
    panel = page.locator("#quality-panel")
    expect(panel.locator("#quality-waiting")).to_have_text("2")
    expect(panel.locator("#quality-flagged")).to_have_text("1")
    found = page.evaluate(OVERFLOW)
    assert found["scroll"] <= found["client"], f"/ops/ at {width}: {found}"
    panel.screenshot(path=str(artifacts / f"ops-quality-panel-{width}.png"))
    panel.get_by_role("link", name="Review quality").first.click()
    expect(page).to_have_url(f"{live_server.url}/ops/quality/")


def test_reinstate_and_settle_from_the_keyboard(
    new_context: Any,
    live_server: Any,
    login: Any,
    quality_data: dict[str, Any],
    artifacts: Path,
    console_errors: list[str],
) -> None:
    from reviewqueue.models import ReviewerStanding, Verdict

    page = _open(new_context, login, "1280")
    page.goto(f"{live_server.url}/ops/quality/")
    reinstate = page.locator(f"#reviewer-{quality_data['paula']} button.reinstate")
    reinstate.focus()
    page.keyboard.press("Enter")
    expect(page.locator(f"#reviewer-{quality_data['paula']} .standing")).to_contain_text("reinstated")
    standing = ReviewerStanding.objects.get(reviewer_id=quality_data["paula"])
    assert standing.flagged_at is None and standing.paused_at is None

    item = quality_data["operator_item"]
    block = page.locator(f"#disagreement-{item}")
    # Reject without a label: refused beside the form, the note kept, the keyboard on the label.
    block.locator("input[value=reject]").focus()
    page.keyboard.press("Space")
    block.locator("textarea").focus()
    page.keyboard.type("kept while the label is missing")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(block.locator(".has-error .error")).to_have_text("A rejection needs a reason label.")
    expect(block.locator("textarea")).to_have_value("kept while the label is missing")
    expect(block.locator("select")).to_be_focused()
    page.screenshot(path=str(artifacts / "ops-quality-settle-error.png"), full_page=True)
    page.keyboard.press("ArrowDown")  # the first label: code error
    block.locator("button[type=submit]").focus()
    page.keyboard.press("Enter")
    expect(block).to_contain_text("settled")
    verdict = Verdict.objects.get(item_id=item)
    assert (verdict.decision, verdict.reason_label, verdict.settled_by) == ("reject", "code_error", "operator")
    # The refused form answers 400, which the browser logs as a failed resource: expected here.
    console_errors[:] = [e for e in console_errors if "status of 400" not in e]


def test_settle_and_retire_with_the_mouse(
    new_context: Any, live_server: Any, login: Any, quality_data: dict[str, Any]
) -> None:
    from reviewqueue.models import GoldItem, Verdict

    page = _open(new_context, login, "390")
    page.goto(f"{live_server.url}/ops/quality/")
    item = quality_data["third_item"]
    block = page.locator(f"#disagreement-{item}")
    block.get_by_label("Approve").click()
    block.get_by_role("button", name=f"Settle item #{item}").click()
    expect(block).to_contain_text("settled")
    assert Verdict.objects.get(item_id=item).decision == "approve"

    row = page.locator(f"#gold-{quality_data['gold']}")
    row.get_by_role("button", name="Retire").click()
    expect(row).to_contain_text("retired")
    assert GoldItem.objects.get(pk=quality_data["gold"]).retired_at is not None


@pytest.mark.parametrize("width", WIDTHS)
def test_an_operator_marks_a_decided_item_as_gold_from_its_page(
    new_context: Any, live_server: Any, login: Any, quality_data: dict[str, Any], width: str, artifacts: Path
) -> None:
    from reviewqueue.models import GoldItem, ReviewItem

    source = ReviewItem.objects.get(task_id="gold-source")
    GoldItem.objects.filter(item=source).delete()
    page = _open(new_context, login, width)
    page.goto(f"{live_server.url}/review/items/{source.pk}/")
    form = page.locator("#gold-form")
    expect(form.get_by_role("radio", name="Approve")).to_be_checked()  # prefilled from the verdict
    form.get_by_role("radio", name="Reject").click()
    form.get_by_label("Expected label (reject only)").select_option("hallucination")
    form.get_by_role("button", name="Mark as gold").click()
    expect(page.locator("#gold-current")).to_contain_text("Reject")
    gold = GoldItem.objects.get(item=source)
    assert (gold.expected_decision, gold.expected_label) == ("reject", "hallucination")
    found = page.evaluate(OVERFLOW)
    assert found["scroll"] <= found["client"], f"item page at {width}: {found}"
    page.screenshot(path=str(artifacts / f"item-gold-{width}.png"), full_page=True)


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
def test_settle_with_no_choice_is_refused_in_place_and_the_page_stays(
    new_context: Any,
    live_server: Any,
    login: Any,
    quality_data: dict[str, Any],
    console_errors: list[str],
    settings: Any,
    debug: bool,
) -> None:
    from reviewqueue.models import Verdict

    settings.DEBUG = debug  # as in the demo: DEBUG must not change how a refusal shows
    page = _open(new_context, login, "1280")
    page.goto(f"{live_server.url}/ops/quality/")
    item = quality_data["operator_item"]
    block = page.locator(f"#disagreement-{item}")
    block.get_by_role("button", name=f"Settle item #{item}").click()
    expect(block.locator(".settle-decision .error")).to_be_visible()
    # Still the whole page: its stylesheet, its navigation, the other sections.
    expect(page.locator("link[rel=stylesheet]")).not_to_have_count(0)
    expect(page.locator("#quality h1")).to_have_text("Review quality")
    expect(page.locator("#gold")).to_be_visible()
    assert page.url == f"{live_server.url}/ops/quality/"
    assert page.evaluate("document.activeElement.tagName") != "BODY"
    # The next try goes through htmx again and settles in place.
    block.locator("input[value=approve]").check()
    block.get_by_role("button", name=f"Settle item #{item}").click()
    expect(block).to_contain_text("settled")
    assert page.url == f"{live_server.url}/ops/quality/"
    assert Verdict.objects.get(item_id=item).decision == "approve"
    console_errors[:] = [e for e in console_errors if "status of 400" not in e]
