"""Operators' forms in the browser, at 1280 and 390 px, with no console
error: checkboxes beside their labels, the instructions' Markdown preview,
task kinds chosen from a list, the routing preview naming its rule, date
pickers on the export, and a live what-if starting from today's backlog."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = {"1280": {"width": 1280, "height": 800}, "390": {"width": 390, "height": 844}}
NO_SIDEWAYS = "() => document.documentElement.scrollWidth <= document.documentElement.clientWidth"


@pytest.fixture(autouse=True)
def _no_login_limit(settings: Any) -> None:
    settings.RATELIMIT_ENABLE = False


def _operator_page(new_context: Any, login: Any, width: str) -> Any:
    page = new_context(viewport=WIDTHS[width]).new_page()
    login(page, "otto")
    return page


@pytest.mark.parametrize("width", WIDTHS)
def test_the_policy_form_has_checkboxes_beside_labels_and_previews_the_instructions(
    new_context: Any, live_server: Any, login: Any, operator: Any, width: str, artifacts: Path
) -> None:
    page = _operator_page(new_context, login, width)
    page.goto(f"{live_server.url}/ops/policy/")
    box = page.locator("#id_gold_pause").bounding_box()
    label = page.locator("label[for=id_gold_pause]").bounding_box()
    assert box is not None and label is not None
    assert box["x"] + box["width"] <= label["x"]  # the box first, then its label
    assert abs((box["y"] + box["height"] / 2) - (label["y"] + label["height"] / 2)) < 8  # on one line
    expect(page.locator("#id_escalation_delay_minutes")).to_have_value("60.0")
    page.fill("#id_instructions", "**Approve** only code that runs.\n\n- check the tests")
    preview = page.locator("#instructions-preview")
    expect(preview.locator("strong")).to_have_text("Approve")
    expect(preview.locator("li")).to_have_text("check the tests")
    assert page.evaluate(NO_SIDEWAYS)
    preview.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / f"ops-policy-preview-{width}.png"), full_page=True)


@pytest.mark.parametrize("width", WIDTHS)
def test_routing_offers_the_kinds_seen_and_names_the_rule_that_matched(
    new_context: Any, live_server: Any, login: Any, operator: Any, width: str, artifacts: Path
) -> None:
    from reviewqueue import services
    from reviewqueue.models import RoutingRule

    docs = services.create_queue(user=operator, slug="docs")
    RoutingRule.objects.create(queue=docs, position=0, producer="ci-bot", task_kind="open")
    page = _operator_page(new_context, login, width)
    page.goto(f"{live_server.url}/ops/routing/")
    options = page.locator("#id_task_kind option").all_inner_texts()
    assert options[0] == "any kind" and "open" in options and "verifiable" in options
    page.fill("#preview_producer", "ci-bot")
    page.select_option("#preview_task_kind", "open")
    page.click("#route-preview button[type=submit]")
    expect(page.locator("#route-target")).to_contain_text(
        "matched rule #1: producer=ci-bot, task kind=open → queue docs"
    )
    assert page.evaluate(NO_SIDEWAYS)
    page.screenshot(path=str(artifacts / f"ops-routing-preview-{width}.png"), full_page=True)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_export_picks_days_and_the_live_what_if_starts_from_the_backlog(
    new_context: Any, live_server: Any, login: Any, operator: Any, admit_item: Any, width: str, artifacts: Path
) -> None:
    for _ in range(4):
        admit_item()
    page = _operator_page(new_context, login, width)
    page.goto(f"{live_server.url}/ops/export/")
    assert page.get_attribute("#id_since", "type") == "date"
    assert page.get_attribute("#id_until", "type") == "date"
    page.fill("#id_since", "2026-01-02")
    expect(page.locator("#id_since")).to_have_value("2026-01-02")
    page.screenshot(path=str(artifacts / f"ops-export-dates-{width}.png"), full_page=True)
    page.goto(f"{live_server.url}/ops/whatif/?live=1&window=15m")
    expect(page.locator("#live-backlog")).to_contain_text("4 waiting items")
    expect(page.locator("#id_backpressure")).to_be_checked()
    assert page.evaluate(NO_SIDEWAYS)
    page.screenshot(path=str(artifacts / f"ops-whatif-live-{width}.png"), full_page=True)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_exports_date_pickers_are_as_wide_as_its_other_fields(
    new_context: Any, live_server: Any, login: Any, operator: Any, width: str
) -> None:
    page = _operator_page(new_context, login, width)
    page.goto(f"{live_server.url}/ops/export/")
    label = page.locator("#id_label").bounding_box()
    for field in ("#id_since", "#id_until"):
        box = page.locator(field).bounding_box()
        assert box is not None and label is not None
        assert abs(box["width"] - label["width"]) <= 2, (field, box["width"], label["width"])
        assert box["height"] >= label["height"] - 4, (field, box["height"], label["height"])


# Every select's chosen words against the room the select gives them: a
# select cannot wrap, so longer words are cut off on screen.
CUT_SELECTS = """() => [...document.querySelectorAll('main select')].filter(s => s.offsetParent).map(s => {
  const probe = document.createElement('span');
  const style = getComputedStyle(s);
  probe.style.font = style.font;
  probe.style.whiteSpace = 'pre';
  probe.style.position = 'absolute';
  probe.textContent = s.options[s.selectedIndex] ? s.options[s.selectedIndex].text : '';
  document.body.appendChild(probe);
  const needed = probe.getBoundingClientRect().width;
  probe.remove();
  const room = s.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 20;  // the arrow
  return needed > room ? `${s.id || s.name}: "${probe.textContent}" needs ${Math.round(needed)} px of ${Math.round(room)}` : null;
}).filter(Boolean)"""


@pytest.mark.parametrize("width", WIDTHS)
def test_no_select_on_the_operators_forms_cuts_off_its_words(
    new_context: Any, live_server: Any, login: Any, operator: Any, width: str
) -> None:
    page = _operator_page(new_context, login, width)
    cut = {}
    for path in (
        "/ops/alerts/channels/",
        "/ops/whatif/",
        "/ops/items/",
        "/ops/export/",
        "/ops/policy/",
        "/ops/routing/",
    ):
        page.goto(f"{live_server.url}{path}")
        found = page.evaluate(CUT_SELECTS)
        if found:
            cut[path] = found
    assert cut == {}
