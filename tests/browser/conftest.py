"""Playwright driving Debian's Chromium against Django's live server.

Every test in this folder carries the ``browser`` marker, so
``pytest -m "not browser"`` is the fast suite.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("REVIEWQUEUE_ARTIFACTS", Path(__file__).resolve().parents[2] / "artifacts"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

# Playwright's sync API runs an event loop; Django's async-safety check would
# otherwise refuse ORM calls made from test code in the same thread.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session", autouse=True)
def _plain_http_live_server() -> None:
    # The live server builds its middleware once, when the session starts it,
    # before the per-test settings override runs: without this the security
    # middleware would redirect the browser to HTTPS the server cannot speak.
    from django.conf import settings

    settings.SECURE_SSL_REDIRECT = False
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"browser tests need Chromium at {CHROMIUM} (apt-get install chromium), or run -m 'not browser'")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def console_errors() -> list[str]:
    """Every console error and uncaught page error of the test's pages.

    A test that provokes an error on purpose (a 403 page, say) removes what it
    expected from this list; anything left fails the test at teardown.
    """
    return []


@pytest.fixture
def new_context(browser: Any, console_errors: list[str]) -> Iterator[Callable[..., Any]]:
    contexts: list[Any] = []

    def watch(page: Any) -> None:
        page.on("console", lambda msg: msg.type == "error" and console_errors.append(f"{page.url}: {msg.text}"))
        page.on("pageerror", lambda exc: console_errors.append(f"{page.url}: uncaught {exc}"))

    def make(**kwargs: Any) -> Any:
        kwargs.setdefault("viewport", {"width": 1280, "height": 900})
        context = browser.new_context(**kwargs)
        context.set_default_timeout(10_000)
        context.on("page", watch)
        contexts.append(context)
        return context

    yield make
    for context in contexts:
        context.close()
    assert console_errors == [], "console errors in the browser:\n" + "\n".join(console_errors)


@pytest.fixture
def page(new_context: Callable[..., Any]) -> Any:
    return new_context().new_page()


@pytest.fixture
def login(live_server: Any) -> Callable[[Any, str, str], None]:
    def do_login(page: Any, username: str, password: str = "pw-for-tests-1") -> None:
        page.goto(f"{live_server.url}/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", password)
        page.click("button[type=submit]")
        page.wait_for_load_state("networkidle")

    return do_login


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def worker_later(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[threading.Thread]]:
    """Stands in for the Celery worker: runs a queued what-if in a thread a
    moment later (long enough for the page to show the queued run)."""
    from reviewqueue.services.simulations import execute_simulation

    threads: list[threading.Thread] = []

    def delay(run_id: int) -> None:
        def work() -> None:
            from django.db import connection

            time.sleep(1.5)
            try:
                execute_simulation(run_id)
            finally:
                connection.close()

        thread = threading.Thread(target=work)
        threads.append(thread)
        thread.start()

    monkeypatch.setattr("reviewqueue.services.simulations.dispatch", delay)
    yield threads
    for thread in threads:
        thread.join(timeout=180)
