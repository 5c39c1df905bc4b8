"""An operator watches the dashboard move as the queue fills, then runs preset B."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_updates_the_dashboard_and_runs_a_what_if(
    live_server: Any, page: Any, login: Any, operator: Any, admit_item: Any, artifacts: Path
) -> None:
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    login(page, "otto")
    page.goto(f"{live_server.url}/ops/")
    depth = page.locator("#depth-value")
    assert depth.inner_text() == "0"

    for _ in range(6):
        admit_item()
    # No reload: the live region polls every few seconds and swaps itself.
    expect(depth).to_have_text("6", timeout=15_000)
    assert page.locator("#live svg polyline").count() == 1
    page.screenshot(path=str(artifacts / "ops-dashboard.png"), full_page=True)

    page.goto(f"{live_server.url}/ops/whatif/")
    page.click("button[name=preset][value=B]")
    page.wait_for_load_state("networkidle")
    assert page.input_value("#id_production_per_min") == "5.0"
    page.fill("#id_replications", "5")
    page.click("#run-simulation")
    page.wait_for_selector(".overflow-pct")
    overflow = page.locator(".overflow-pct").first.inner_text()
    assert overflow.endswith("%") and float(overflow.rstrip(" %")) > 0
    assert page.locator("#result svg polyline").count() == 1
    assert "unsustainable" not in page.locator(".ratio-rule").inner_text()
    page.screenshot(path=str(artifacts / "ops-whatif-preset-b.png"), full_page=True)
    assert not [e for e in errors if "Content Security Policy" in e]
