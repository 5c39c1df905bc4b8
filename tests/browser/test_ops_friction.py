"""The operator's daily work in the browser, at 1280 and 390 px: readable
what-ifs with a progress bar, plain policy errors, filter rules previewed
before they are enabled, the dataset export, the API reference, a quiet live
region and a 403 page with the right menu."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from playwright.sync_api import expect

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_login_limit(settings: Any) -> None:
    # These tests sign in more often than the login rate limit allows a person
    # per minute; the limit has its own tests (tests/reviewqueue/security/test_security_login.py).
    settings.RATELIMIT_ENABLE = False


WIDTHS = {"1280": {"width": 1280, "height": 800}, "390": {"width": 390, "height": 844}}
NO_SIDEWAYS = "() => document.documentElement.scrollWidth <= document.documentElement.clientWidth"


def _operator_page(new_context: Any, login: Any, width: str) -> Any:
    page = new_context(viewport=WIDTHS[width]).new_page()
    login(page, "otto")
    return page


@pytest.mark.parametrize("width", WIDTHS)
def test_a_large_what_if_shows_progress_then_a_readable_result(
    new_context: Any, live_server: Any, login: Any, operator: Any, worker_later: Any, width: str, artifacts: Path
) -> None:
    page = _operator_page(new_context, login, width)
    page.goto(f"{live_server.url}/ops/whatif/")
    expect(page.locator("#preset-B-about")).to_contain_text("Overload")
    page.click("button[name=preset][value=B]")
    page.wait_for_load_state("networkidle")
    page.fill("#id_replications", "300")
    page.click("#run-simulation")
    # Queued for the worker: the progress bar shows, then the result replaces it without a reload.
    expect(page.locator("#sim-progress")).to_be_visible()
    expect(page.locator(".overflow-pct")).to_be_visible(timeout=30_000)
    result = page.locator("#result")
    expect(result).to_contain_text("Preset B. Overload")
    expect(result).to_contain_text("backpressure is off, so the queue never changes mode")
    expect(result).to_contain_text("arrivals refused while the queue was full")
    assert page.locator(".step-limit-final").inner_text().isdigit()
    stable = float(page.locator(".stable-rate").inner_text().split()[0])
    assert 0 < stable <= 3.0  # never above preset B's review rate
    expect(result).to_contain_text("For 120 minutes from an empty queue")
    assert page.evaluate(NO_SIDEWAYS)
    page.screenshot(path=str(artifacts / f"ops-whatif-result-{width}.png"), full_page=True)


def test_a_failed_what_if_says_so_in_plain_words(
    new_context: Any, live_server: Any, login: Any, operator: Any, worker_later: Any, monkeypatch: Any
) -> None:
    import simulation

    def crash(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("daemonic processes are not allowed to have children")

    monkeypatch.setattr(simulation, "run_replications", crash)
    page = _operator_page(new_context, login, "1280")
    page.goto(f"{live_server.url}/ops/whatif/?preset=A")
    page.fill("#id_replications", "300")
    page.click("#run-simulation")
    error = page.locator("#run-error")
    expect(error).to_be_visible(timeout=30_000)
    expect(error).to_contain_text("unexpected error")
    assert "daemonic" not in page.content()


@pytest.mark.parametrize("width", WIDTHS)
def test_policy_errors_are_plain_and_summarised_at_the_top(
    new_context: Any,
    live_server: Any,
    login: Any,
    operator: Any,
    width: str,
    artifacts: Path,
    console_errors: list[str],
) -> None:
    page = _operator_page(new_context, login, width)
    page.goto(f"{live_server.url}/ops/policy/")
    page.fill("#id_high_watermark", "1.5")
    page.fill("#id_sampling_rate", "2")
    page.click("main button[type=submit]")
    summary = page.locator("#error-summary")
    expect(summary).to_be_visible()
    expect(summary).to_contain_text("2 things to fix")
    expect(summary).to_contain_text("more than 0 and at most 1")
    assert "(0, 1]" not in page.content()
    summary.locator("a[href='#id_sampling_rate']").click()
    assert page.evaluate("document.activeElement.id") == "id_sampling_rate"
    described = page.get_attribute("#id_sampling_rate", "aria-describedby")
    assert described is not None
    for ref in described.split():
        assert page.locator(f"#{ref}").count() == 1, ref
    expect(page.locator("#id_sampling_rate_error")).to_contain_text("from 0 to 1")
    expect(page.locator("#id_sampling_rate_helptext")).to_contain_text("From 0 to 1")
    assert page.evaluate(NO_SIDEWAYS)
    page.screenshot(path=str(artifacts / f"ops-policy-errors-{width}.png"), full_page=True)
    # The refused form answers 400, which the browser logs as a failed resource: expected here.
    console_errors[:] = [e for e in console_errors if "status of 400" not in e]


@pytest.mark.parametrize("width", WIDTHS)
def test_a_filter_rule_is_previewed_and_confirmed_before_it_is_enabled(
    new_context: Any, live_server: Any, login: Any, operator: Any, admit_item: Any, width: str, artifacts: Path
) -> None:
    from reviewqueue.models import FilterRule

    for output in ("def f(n):\n    return n\n", "def f(n):\n    return (\n", "def g(:\n"):
        admit_item(final_output=output)
    rule = FilterRule.objects.create(label="code_error", gate="python_syntax", description="code output must parse")
    page = _operator_page(new_context, login, width)
    page.goto(f"{live_server.url}/ops/")
    page.locator(f"#rule-{rule.pk} a", has_text="Enable").click()
    expect(page.locator("#rule-preview")).to_contain_text("Of the last 3 items")
    expect(page.locator("#preview-filtered")).to_have_text("2")
    assert page.evaluate(NO_SIDEWAYS)
    page.screenshot(path=str(artifacts / f"ops-rule-preview-{width}.png"), full_page=True)
    rule.refresh_from_db()
    assert rule.status == "proposed"  # seeing the preview enables nothing
    page.click("#confirm-enable")
    expect(page.locator(f"#rule-{rule.pk}")).to_contain_text("enabled by otto")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_export_downloads_a_dataset(
    new_context: Any, live_server: Any, login: Any, operator: Any, admit_item: Any, reviewer: Any, width: str
) -> None:
    from reviewqueue import services

    admit_item(task_description="Write is_even(n)", final_output="def is_even(n):\n    return n % 2 == 0\n")
    item = services.claim(reviewer=reviewer)
    services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    page = _operator_page(new_context, login, width)
    page.goto(f"{live_server.url}/ops/export/")
    page.select_option("#id_format", "jsonl")
    page.check("#id_dataset")
    with page.expect_download() as download:
        page.click("main button[type=submit]")
    assert download.value.suggested_filename.startswith("dataset-")
    rows = [json.loads(line) for line in Path(download.value.path()).read_text().splitlines()]
    assert rows == [rows[0]] and rows[0]["decision"] == "approve"
    assert rows[0]["task_description"] == "Write is_even(n)"
    assert rows[0]["final_output"] == "def is_even(n):\n    return n % 2 == 0\n"


@pytest.mark.parametrize("width", WIDTHS)
def test_the_api_reference_is_interactive_under_the_csp(
    new_context: Any, live_server: Any, login: Any, operator: Any, width: str
) -> None:
    page = _operator_page(new_context, login, width)
    page.goto(f"{live_server.url}/api/docs")
    operation = page.locator(".opblock-summary", has_text="/api/outputs").first
    expect(operation).to_be_visible()
    operation.click()
    expect(page.locator(".opblock-body").first).to_be_visible()
    assert page.evaluate(NO_SIDEWAYS)
    # Served from here, pinned: no request leaves the site.
    assert all(
        src.startswith(live_server.url) for src in page.eval_on_selector_all("script[src]", "s => s.map(e => e.src)")
    )


def test_the_live_region_speaks_only_when_the_mode_changes(
    new_context: Any, live_server: Any, login: Any, operator: Any, admit_item: Any
) -> None:
    from reviewqueue import services

    services.policy_update(user=operator, changes={"capacity": 10})
    page = _operator_page(new_context, login, "1280")
    page.goto(f"{live_server.url}/ops/")
    assert page.get_attribute("#live", "aria-live") is None
    announcer = page.locator("#live-announcer")
    admit_item()
    expect(page.locator("#depth-value")).to_have_text("1", timeout=15_000)  # a poll swapped the tiles...
    assert announcer.inner_text() == ""  # ...and said nothing
    for _ in range(8):  # 9 > 0.8 x 10: draft mode, short of shedding
        admit_item()
    expect(announcer).to_contain_text("Mode: draft", timeout=15_000)


# Operators review by default; this page is about a team that keeps the roles apart.
@override_settings(REVIEWQUEUE_OPERATORS_REVIEW=False)
def test_the_403_page_keeps_the_role_menu(
    new_context: Any, live_server: Any, login: Any, operator: Any, reviewer: Any, console_errors: list[str]
) -> None:
    page = _operator_page(new_context, login, "390")
    page.goto(f"{live_server.url}/review/")
    nav = page.locator("nav[aria-label=Main]")
    for link in ("Dashboard", "Policy", "What-if", "Export", "Review quality", "API reference"):
        expect(nav.get_by_role("link", name=link)).to_be_visible()
    # The reviewer's own link, not the operators' "Review quality".
    expect(nav.get_by_role("link", name="Review", exact=True)).to_have_count(0)
    expect(page.locator("main")).to_contain_text("This page needs the reviewer role")
    assert page.evaluate(NO_SIDEWAYS)
    # The 403 itself is logged by the browser as a failed resource: expected here.
    console_errors[:] = [e for e in console_errors if "403" not in e]


@pytest.mark.parametrize("width", WIDTHS)
def test_the_operator_reads_the_admin_without_errors(
    new_context: Any, live_server: Any, login: Any, operator: Any, admit_item: Any, width: str
) -> None:
    operator.is_staff = True
    operator.save()
    item = admit_item().item
    page = _operator_page(new_context, login, width)
    page.goto(f"{live_server.url}/admin/")
    expect(page.locator("#content-main")).to_contain_text("Review items")
    page.goto(f"{live_server.url}/admin/reviewqueue/reviewitem/{item.pk}/change/")
    expect(page.locator("#content")).to_contain_text("View review item")
    expect(page.locator("input[name=_save]")).to_have_count(0)
