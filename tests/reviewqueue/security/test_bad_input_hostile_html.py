"""Hostile HTML in every stored, displayed field renders as inert text.

Agent output, task metadata, notes, run names, filter rules, audit values and
usernames all come from outside. Each page and fragment that shows them is
parsed, and must hold no script element without ``src``, no ``on*``
attribute, no ``javascript:`` URL and no injected ``<img>``; the
escaped payload must be there, so a page that showed nothing would not pass.
"""

from __future__ import annotations

import csv
import io
from html.parser import HTMLParser
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from reviewqueue.models import (
    CircuitBreakerEntry,
    FilterRule,
    PolicyAudit,
    ReviewItem,
    SimulationRun,
    StepLimitChange,
    Verdict,
)

PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '<a href="javascript:alert(1)">x</a>',
    '"><svg onload=alert(1)>',
]
ALL = "".join(PAYLOADS)  # 107 characters: fits every stored field but the 100-character ones
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
HX = {"HTTP_HX_REQUEST": "true"}


class ActiveMarkup(HTMLParser):
    """Collects whatever in a document could run script."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = {name for name, _ in attrs}
        if tag == "script" and "src" not in names:
            self.found.append("inline <script>")
        # Charts and the admin's icons are real <svg>: an injected one shows by its on* attribute.
        if tag in ("iframe", "object", "embed", "base"):
            self.found.append(f"<{tag}>")
        if tag == "img" and dict(attrs).get("src") == "x":
            self.found.append("injected <img>")
        for name, value in attrs:
            if name.startswith("on"):
                self.found.append(f"<{tag} {name}=...>")
            if name in ("href", "src", "action", "formaction") and (value or "").strip().lower().startswith(
                "javascript:"
            ):
                self.found.append(f"<{tag} {name}=javascript:...>")


def active_markup(html: str) -> list[str]:
    parser = ActiveMarkup()
    parser.feed(html)
    parser.close()
    return parser.found


def assert_inert(response: Any, *, shows_payload: bool = True) -> None:
    assert response.status_code in (200, 286, 400), response.status_code
    html = response.content.decode()
    assert active_markup(html) == [], response.request["PATH_INFO"]
    assert "<script>alert" not in html.lower()
    if shows_payload:
        assert ESCAPED in html, f"{response.request['PATH_INFO']} did not show the hostile field at all"


def test_the_checker_sees_every_payload_when_it_is_not_escaped() -> None:
    for payload in PAYLOADS:
        assert active_markup(f"<p>{payload}</p>"), payload
    assert active_markup(f"<p>{ESCAPED}</p>") == []


@pytest.fixture
def hostile(make_user: Any, admit_item: Any) -> dict[str, Any]:
    """Every kind of stored text set to the payload, shown wherever it can be."""
    users = get_user_model()
    reviewer = make_user(PAYLOADS[0], "reviewer")  # usernames are never validated when made in code
    operator = make_user(PAYLOADS[1], "operator")
    staff = users.objects.create_superuser(PAYLOADS[2], "root@example.com", "pw-for-tests-1")
    fields = {
        "task_description": ALL,
        "final_output": ALL,
        "last_error": ALL,
        "task_id": ALL,
        "producer": ALL,
        "task_kind": PAYLOADS[0][:20],
        "source_run_id": ALL,
    }
    decided = admit_item(**fields).item
    shown = admit_item(**fields).item
    other = admit_item(**fields).item
    reviewer_client = Client()
    reviewer_client.force_login(reviewer)
    # Reject the first with a hostile note; the reviewer then holds the second.
    assert reviewer_client.post("/review/next/").status_code == 302
    reviewer_client.post(
        f"/review/{decided.pk}/decide/", {"decision": "reject", "reason_label": "code_error", "note": ALL}
    )
    CircuitBreakerEntry.objects.create(item=other, priority=1, depth=5, capacity=5, incoming=True)
    ReviewItem.objects.filter(pk=other.pk).update(status=ReviewItem.Status.FILTERED, filter_reason=ALL)
    rule = FilterRule.objects.create(label="code_error", gate=ALL[:50], description=ALL, decided_by=operator)
    PolicyAudit.objects.create(user=operator, changes={ALL: [ALL, ALL]})
    StepLimitChange.objects.create(previous=6, step_limit=7, changed_by=reviewer)
    run = SimulationRun.objects.create(
        created_by=operator, name=ALL[:100], params={}, status=SimulationRun.Status.FAILED, error=ALL
    )
    operator_client = Client()
    operator_client.force_login(operator)
    staff_client = Client()
    staff_client.force_login(staff)
    return {
        "reviewer": reviewer_client,
        "operator": operator_client,
        "staff": staff_client,
        "shown": shown,
        "decided": decided,
        "rule": rule,
        "run": run,
    }


def test_the_review_page_and_its_fragments_render_hostile_fields_inert(hostile: dict[str, Any]) -> None:
    client, item = hostile["reviewer"], hostile["shown"]
    assert is_claimed(item)
    assert_inert(client.get("/review/"))
    assert_inert(client.get("/review/", **HX))
    assert_inert(client.get("/review/waiting/", **HX))
    # A rejection without a label comes back with the typed note kept in the form.
    refused = client.post(f"/review/{item.pk}/decide/", {"decision": "reject", "note": ALL}, **HX)
    assert_inert(refused)
    assert "&lt;script&gt;" in refused.content.decode().split('id="note"')[1][:400]
    assert_inert(client.post(f"/review/{item.pk}/renew/", **HX), shows_payload=False)
    assert_inert(client.post("/review/undo/", {"current": str(item.pk)}, **HX))


def is_claimed(item: ReviewItem) -> bool:
    item.refresh_from_db()
    return item.status == ReviewItem.Status.CLAIMED


def test_the_dashboard_and_its_fragments_render_hostile_fields_inert(hostile: dict[str, Any]) -> None:
    client = hostile["operator"]
    page = client.get("/ops/")
    assert_inert(page)
    html = page.content.decode()
    assert html.count(ESCAPED) >= 2  # the shed item's task id and the filter rule
    assert "&lt;img src=x onerror=alert(1)&gt;" in html  # the operator's name on the rule
    assert_inert(client.get("/ops/", **HX))
    assert_inert(client.get("/ops/", HTTP_HX_TARGET="rules", **HX))
    assert_inert(client.get(f"/ops/rules/{hostile['rule'].pk}/preview/"))
    assert_inert(client.post(f"/ops/rules/{hostile['rule'].pk}/enable/", {"confirm": "1"}, **HX), shows_payload=False)
    # Without htmx the action redirects with a message naming the hostile gate.
    client.post(f"/ops/rules/{hostile['rule'].pk}/dismiss/")
    assert_inert(client.get("/ops/"))


def test_the_policy_page_renders_hostile_audit_values_and_echoed_input_inert(hostile: dict[str, Any]) -> None:
    client = hostile["operator"]
    assert_inert(client.get("/ops/policy/"))
    response = client.post("/ops/policy/", {"capacity": ALL, "high_watermark": ALL, "step_limit": ALL})
    assert response.status_code == 400
    assert_inert(response)


def test_the_what_if_pages_render_hostile_run_names_and_errors_inert(hostile: dict[str, Any]) -> None:
    client, run = hostile["operator"], hostile["run"]
    assert_inert(client.get("/ops/whatif/"))
    assert_inert(client.get(f"/ops/whatif/{run.pk}/"))
    assert_inert(client.get(f"/ops/whatif/{run.pk}/", **HX))
    assert_inert(client.get(f"/ops/whatif/compare/?a={run.pk}&b={run.pk}"), shows_payload=False)
    assert_inert(client.get("/ops/whatif/", {"preset": ALL, "window": ALL, "live": "1"}), shows_payload=False)
    refused = client.post("/ops/whatif/run/", {"name": ALL, "duration_min": ALL})
    assert refused.status_code == 400
    assert_inert(refused)


def test_the_export_page_echoes_bad_filters_inert(hostile: dict[str, Any]) -> None:
    client = hostile["operator"]
    response = client.get("/ops/export/download/", {"format": ALL, "reviewer": ALL, "since": ALL})
    assert response.status_code == 400
    assert_inert(response, shows_payload=False)


def test_the_export_is_a_download_never_a_page(hostile: dict[str, Any]) -> None:
    client = hostile["operator"]
    for fmt, content_type in (("csv", "text/csv"), ("jsonl", "application/x-ndjson")):
        response = client.get("/ops/export/download/", {"format": fmt})
        assert response.status_code == 200
        assert response["Content-Type"].startswith(content_type)
        assert response["Content-Disposition"].startswith("attachment;")
        assert response["X-Content-Type-Options"] == "nosniff"
        body = b"".join(response.streaming_content).decode()
        assert "alert(1)" in body  # the verdict's hostile note and task are in it, as data
    csv_body = b"".join(client.get("/ops/export/download/", {"format": "csv"}).streaming_content).decode()
    for row in csv.reader(io.StringIO(csv_body)):
        for cell in row:
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell


@pytest.mark.parametrize(
    "model", ["reviewitem", "verdict", "simulationrun", "filterrule", "circuitbreakerentry", "policyaudit"]
)
def test_the_admin_changelists_render_hostile_fields_inert(hostile: dict[str, Any], model: str) -> None:
    response = hostile["staff"].get(f"/admin/reviewqueue/{model}/")
    assert response.status_code == 200
    assert_inert(response)


def test_the_admin_change_pages_render_hostile_fields_inert(hostile: dict[str, Any]) -> None:
    client = hostile["staff"]
    verdict = Verdict.objects.get(item=hostile["decided"])
    for url in (
        f"/admin/reviewqueue/reviewitem/{hostile['shown'].pk}/change/",
        f"/admin/reviewqueue/verdict/{verdict.pk}/change/",
        "/admin/auth/user/",
    ):
        response = client.get(url)
        assert response.status_code == 200, url
        assert_inert(response)


def test_the_sign_in_page_renders_a_hostile_next_and_username_inert(client: Client, db: None) -> None:
    page = client.get("/login/", {"next": ALL})
    assert_inert(page, shows_payload=False)
    refused = client.post("/login/", {"username": ALL, "password": "x", "next": ALL})
    assert_inert(refused, shows_payload=False)
