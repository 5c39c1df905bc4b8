"""CSRF on every state-changing page endpoint, the way htmx posts.

htmx sends the token in an ``X-CSRFToken`` header it reads from ``hx-headers``
on ``<body>``. Without it, a signed-in user's POST is refused with 403; with
it, the same POST reaches the view. The endpoints come from the resolver.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from reviewqueue.models import (
    Alert,
    AlertChannel,
    FilterRule,
    GoldItem,
    ReviewerStanding,
    SimulationRun,
    WebhookDelivery,
)

HX = {"HTTP_HX_REQUEST": "true"}
HX_HEADERS = re.compile(r"""<body[^>]*\bhx-headers='([^']*)'""")


def _page_routes(patterns: list[Any], prefix: str = "", namespace: str = "") -> list[tuple[str, str]]:
    """(name, route) for every review: and ops: URL, and signing out."""
    found: list[tuple[str, str]] = []
    for pattern in patterns:
        route = str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            if pattern.namespace in ("review", "ops"):
                found += _page_routes(pattern.url_patterns, prefix + route, pattern.namespace)
        elif isinstance(pattern, URLPattern) and (namespace or pattern.name == "logout"):
            name = f"{namespace}:{pattern.name}" if namespace else str(pattern.name)
            found.append((name, prefix + route))
    return found


ROUTES = _page_routes(get_resolver().url_patterns)


@pytest.fixture
def csrf_client(make_user: Any) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user("both", "reviewer", "operator"))
    return client


@pytest.fixture
def url_for(admit_item: Any, operator: Any, reviewer: Any) -> Any:
    item = admit_item().item
    gold = GoldItem.objects.create(item=admit_item().item, expected_decision="approve")
    ReviewerStanding.objects.create(reviewer=reviewer)
    rule = FilterRule.objects.create(label="format_issue", gate="parses", description="output must parse")
    run = SimulationRun.objects.create(created_by=operator, name="csrf", params={})
    delivery = WebhookDelivery.objects.create(
        event_id="evt_csrf",
        event_type="item.decided",
        url="http://127.0.0.1:9/",
        producer="csrf",
        item=item,
        ordering_key=f"item:{item.pk}",
        body="{}",
    )
    values = {
        "item_id": item.pk,
        "rule_id": rule.pk,
        "action": "enable",
        "run_id": run.pk,
        "delivery_id": delivery.pk,
        "gold_id": gold.pk,
        "reviewer_id": reviewer.pk,
        "slug": "default",
        "direction": "up",
        "alert_id": Alert.objects.create(condition="mode", kind="fired", title="t", body="b").pk,
        "channel_id": AlertChannel.objects.create(name="c", url="json://127.0.0.1:9/").pk,
    }

    def fill(route: str) -> str:
        return "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: str(values[m.group(1)]), route)

    return fill


def _page_token(client: Client) -> str:
    """The token exactly as htmx gets it: from the page's ``hx-headers``."""
    body = client.get("/review/").content.decode()
    match = HX_HEADERS.search(body)
    assert match, "the page carries no hx-headers with a CSRF token"
    return str(json.loads(match.group(1))["X-CSRFToken"])


def test_the_walk_finds_the_state_changing_endpoints() -> None:
    names = {name for name, _ in ROUTES}
    assert {"review:decide", "review:next", "review:skip", "review:renew", "review:undo"} <= names
    assert {"ops:rule_decide", "ops:policy", "ops:whatif_run", "logout"} <= names
    assert {"ops:quality_settle", "ops:quality_reinstate", "ops:gold_retire", "ops:gold_mark"} <= names


@pytest.mark.parametrize(("name", "route"), ROUTES, ids=[name for name, _ in ROUTES])
def test_it_refuses_an_htmx_post_without_the_token_and_takes_it_with_one(
    csrf_client: Client, url_for: Any, name: str, route: str
) -> None:
    url = url_for(route)
    token = _page_token(csrf_client)
    data = {"decision": "approve"}
    # Without the token first: a refused POST changes nothing, so the second one
    # (signing out included) meets the same state.
    without = csrf_client.post(url, data, **HX)
    with_token = csrf_client.post(url, data, HTTP_X_CSRFTOKEN=token, **HX)
    assert without.status_code == 403, f"{name} took a POST without a CSRF token"
    assert b"CSRF" in without.content
    # 405 for the read-only views: they take no POST at all.
    assert with_token.status_code != 403, f"{name} refused a POST that carried the token"


def test_it_refuses_a_forged_token(csrf_client: Client, url_for: Any) -> None:
    csrf_client.get("/review/")
    response = csrf_client.post("/review/next/", HTTP_X_CSRFTOKEN="x" * 64, **HX)
    assert response.status_code == 403


def test_it_refuses_a_sign_in_without_the_token(make_user: Any) -> None:
    make_user("rita", "reviewer")
    client = Client(enforce_csrf_checks=True)
    response = client.post("/login/", {"username": "rita", "password": "pw-for-tests-1"})
    assert response.status_code == 403
    assert "_auth_user_id" not in client.session
