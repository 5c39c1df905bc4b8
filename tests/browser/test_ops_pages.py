"""Every operator page in the browser, at a desktop and a phone width: no
sideways scrolling, no console error (the conftest fails the test on any),
ARIA references that resolve, and screenshots for the record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_login_limit(settings: Any) -> None:
    # These tests sign in more often than the login rate limit allows a person
    # per minute; the limit has its own tests (tests/reviewqueue/security/test_security_login.py).
    settings.RATELIMIT_ENABLE = False


WIDTHS = {"1280": {"width": 1280, "height": 800}, "390": {"width": 390, "height": 844}}
# path -> screenshot name
PAGES = {
    "/ops/": "ops-dashboard",
    "/ops/policy/": "ops-policy",
    "/ops/whatif/": "ops-whatif",
    "/ops/export/": "ops-export",
    "/ops/rules/{rule}/preview/": "ops-rule-preview",
    "/ops/whatif/{run_a}/": "ops-whatif-run",
    "/ops/whatif/compare/?a={run_a}&b={run_b}": "ops-whatif-compare",
    "/api/docs": "api-docs",
}

OVERFLOW = """() => {
  const doc = document.documentElement;
  const wide = [...document.querySelectorAll('body *')]
    .filter(el => el.getBoundingClientRect().right > doc.clientWidth + 1 && el.getClientRects().length)
    .filter(el => !el.closest('.table-scroll, .chart-svg'))
    .slice(0, 5).map(el => el.tagName + (el.id ? '#' + el.id : '') + '.' + el.className);
  return {scroll: doc.scrollWidth, client: doc.clientWidth, wide};
}"""

CUT_CELLS = """(selector) => {
  const width = document.documentElement.clientWidth;
  const cells = [...document.querySelectorAll(selector)];
  return {count: cells.length,
          cut: cells.filter(td => td.getBoundingClientRect().right > width + 1).map(td => td.textContent.trim())};
}"""

DANGLING = """() => [...document.querySelectorAll('[aria-describedby]')]
  .flatMap(el => el.getAttribute('aria-describedby').split(/\\s+/))
  .filter(id => !document.getElementById(id))"""


@pytest.fixture
def busy_queue(admit_item: Any, operator: Any) -> dict[str, int]:
    """Enough on the dashboard to fill its tables: a shed item, a proposed rule, a step-limit change;
    and two finished what-if runs to compare."""
    from dataclasses import replace

    from reviewqueue import services
    from reviewqueue.models import FilterRule, Queue, SimulationRun
    from reviewqueue.services.simulations import execute_simulation
    from simulation import PRESETS

    services.policy_update(user=operator, changes={"capacity": 4, "step_limit": 6})
    for i in range(6):
        admit_item(priority=i % 3, task_id=f"a-rather-long-task-identifier-{i}-that-does-not-wrap")
    rule = FilterRule.objects.create(
        label="format_issue", gate="well_formed", description="output must be non-empty, printable text"
    )
    assert Queue.current().capacity == 4
    runs = []
    for scenario in (PRESETS["B"], replace(PRESETS["B"], backpressure=True)):
        run = SimulationRun.objects.create(
            name="a what-if", params={"scenario": scenario.to_dict(), "replications": 3, "target_overflow_pct": 1.0}
        )
        assert execute_simulation(run.pk) == "done"
        runs.append(run.pk)
    return {"rule": rule.pk, "run_a": runs[0], "run_b": runs[1]}


def _open_as_operator(new_context: Any, live_server: Any, login: Any, width: str) -> Any:
    page = new_context(viewport=WIDTHS[width]).new_page()
    login(page, "otto")
    return page


@pytest.mark.parametrize("width", WIDTHS)
def test_no_operator_page_scrolls_sideways(
    new_context: Any,
    live_server: Any,
    login: Any,
    operator: Any,
    busy_queue: dict[str, int],
    width: str,
    artifacts: Path,
) -> None:
    page = _open_as_operator(new_context, live_server, login, width)
    for template, name in PAGES.items():
        path = template.format(**busy_queue)
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
        if path == "/api/docs":
            expect(page.locator(".opblock").first).to_be_visible()
        found = page.evaluate(OVERFLOW)
        assert found["scroll"] <= found["client"], f"{path} at {width}: {found}"
        assert page.evaluate(DANGLING) == [], path
        if path == "/ops/":  # the circuit-breaker log's rows are whole on screen, not scrolled in their box
            cells = page.evaluate(CUT_CELLS, "#breaker-log td")
            assert cells["count"] >= 5 and cells["cut"] == [], f"{path} at {width}: {cells}"
        page.screenshot(path=str(artifacts / f"{name}-{width}.png"), full_page=True)
