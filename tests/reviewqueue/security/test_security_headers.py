"""Response headers and markup that keep injected text from running, and the
deployment check under production settings."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from reviewqueue.models import SimulationRun

ROOT = Path(__file__).resolve().parents[3]
TEMPLATES = ROOT / "templates"

COMMENT = re.compile(r"\{#.*?#\}|\{% comment %\}.*?\{% endcomment %\}|<!--.*?-->", re.DOTALL)
TAG = re.compile(r"<[a-zA-Z][^>]*>", re.DOTALL)
INLINE_SCRIPT = re.compile(r"<script\b(?![^>]*\bsrc\s*=)[^>]*>", re.IGNORECASE)
STYLE_ELEMENT = re.compile(r"<style\b", re.IGNORECASE)
EVENT_ATTR = re.compile(r"\son[a-z]+\s*=", re.IGNORECASE)
STYLE_ATTR = re.compile(r"\sstyle\s*=", re.IGNORECASE)
JS_URL = re.compile(r"""\b(?:href|src|action|formaction)\s*=\s*["']?\s*javascript:""", re.IGNORECASE)


def inline_code(html: str) -> list[str]:
    """Every piece of markup the CSP would block or that runs script inline."""
    html = COMMENT.sub("", html)
    found = INLINE_SCRIPT.findall(html) + STYLE_ELEMENT.findall(html)
    for tag in TAG.findall(html):
        if EVENT_ATTR.search(tag) or STYLE_ATTR.search(tag) or JS_URL.search(tag):
            found.append(tag)
    return found


def csp_directives(header: str) -> dict[str, list[str]]:
    directives: dict[str, list[str]] = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            directives[words[0].lower()] = [w.lower() for w in words[1:]]
    return directives


def test_the_markup_scan_catches_each_kind_of_inline_code() -> None:
    # The scan is only worth something if it sees what it looks for.
    assert inline_code("<script>alert(1)</script>")
    assert inline_code('<button onclick="go()">')
    assert inline_code('<div style="color:red">')
    assert inline_code("<style>p{}</style>")
    assert inline_code('<a href="javascript:go()">')
    assert not inline_code('<script src="/static/x.js" defer></script><form action="/x/" class="c">')
    assert not inline_code("{# an inline <script> is forbidden #}<p>on=1 style: x</p>")


TEMPLATE_FILES = sorted(TEMPLATES.rglob("*.html"))


@pytest.mark.parametrize("path", TEMPLATE_FILES, ids=[str(p.relative_to(TEMPLATES)) for p in TEMPLATE_FILES])
def test_no_template_holds_inline_script_or_style(path: Path) -> None:
    assert inline_code(path.read_text()) == []


def test_every_static_script_is_a_file_served_from_self() -> None:
    assert TEMPLATE_FILES, "no templates found"
    for path in TEMPLATE_FILES:
        for src in re.findall(r"<script\b[^>]*\bsrc\s*=\s*[\"']([^\"']+)", path.read_text()):
            assert src.startswith("{% static"), f"{path.name} loads script from {src}"


@pytest.fixture
def pages(make_user: Any, admit_item: Any, operator: Any) -> dict[str, Client]:
    """A signed-in client per area, each with something on its page."""
    admit_item()
    run = SimulationRun.objects.create(created_by=operator, name="csp", params={})
    reviewer_client = Client()
    reviewer_client.force_login(make_user("rita", "reviewer"))
    reviewer_client.post("/review/next/")
    operator_client = Client()
    operator_client.force_login(operator)
    return {
        "/login/": Client(),
        "/review/": reviewer_client,
        "/ops/": operator_client,
        "/ops/policy/": operator_client,
        "/ops/whatif/": operator_client,
        f"/ops/whatif/{run.pk}/": operator_client,
        "/ops/export/": operator_client,
    }


def test_every_area_sends_a_csp_that_allows_no_inline_script(pages: dict[str, Client]) -> None:
    for url, client in pages.items():
        response = client.get(url)
        assert response.status_code == 200, url
        header = response.headers.get("Content-Security-Policy")
        assert header, f"{url} has no Content-Security-Policy"
        directives = csp_directives(header)
        script_src = directives.get("script-src", directives.get("default-src"))
        assert script_src, f"{url}: no script-src nor default-src"
        assert "'unsafe-inline'" not in script_src and "'unsafe-eval'" not in script_src, url
        assert "*" not in script_src and "data:" not in script_src, url
        assert "'unsafe-inline'" not in directives.get("style-src", directives["default-src"]), url
        assert directives.get("object-src") == ["'none'"], url
        assert directives.get("frame-ancestors") == ["'none'"], url
        assert directives.get("base-uri") == ["'none'"], url


def test_every_rendered_area_is_free_of_inline_script(pages: dict[str, Client]) -> None:
    for url, client in pages.items():
        html = client.get(url).content.decode()
        assert inline_code(html) == [], url


def test_the_htmx_fragments_are_free_of_inline_script(pages: dict[str, Client]) -> None:
    hx = {"HTTP_HX_REQUEST": "true"}
    fragments = [
        pages["/review/"].get("/review/waiting/", **hx),
        pages["/ops/"].get("/ops/", **hx),
        pages["/ops/"].get("/ops/", HTTP_HX_TARGET="rules", **hx),
    ]
    for response in fragments:
        assert response.status_code == 200
        assert inline_code(response.content.decode()) == []


def test_pages_refuse_framing_and_sniffing(pages: dict[str, Client]) -> None:
    response = pages["/review/"].get("/review/")
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"


def _deploy_check(**overrides: str) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        # DJANGO_ALLOW_ASYNC_UNSAFE is set for Playwright in the browser tests'
        # process; a production process never has it (the deploy check warns).
        if not key.startswith(
            ("SECURE_", "SESSION_", "CSRF_", "DEBUG", "ALLOWED_HOSTS", "SECRET_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE")
        )
    }
    env.update(
        {
            "DEBUG": "0",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "ALLOWED_HOSTS": "reviewqueue.example.com",
            "DJANGO_SETTINGS_MODULE": "reviewqueue.settings",
            **overrides,
        }
    )
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        check=False,  # the exit status is what the tests assert
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_deploy_check_passes_under_production_settings() -> None:
    result = _deploy_check()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_the_deploy_check_fails_when_debug_is_left_on() -> None:
    # Proves the check above has teeth: one production default relaxed, and it fails.
    result = _deploy_check(DEBUG="1")
    assert result.returncode != 0
    assert "security.W018" in result.stdout + result.stderr
