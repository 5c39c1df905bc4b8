"""Walk the URL conf: every route refuses whoever may not use it.

The routes come from the resolver, not from a list kept by hand, so a route
added later without a role check fails here. Only the intentionally public
endpoints are named (docs/SECURITY.md says why each one is public).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from reviewqueue.models import FilterRule, GoldItem, LoopRun, ReviewerStanding, SimulationRun, WebhookDelivery

# name -> why it answers without a session or token
PUBLIC = {
    "login": "the sign-in form itself",
    "admin_login": "the admin's sign-in form (Django's own, rate-limited like the site's)",
    "health": "load-balancer liveness; says only that the database answers",
    "api:openapi-json": "the API contract; describes endpoints, holds no data",
}
# django-ninja's mount point: always 404 (it exists only so ninja can reverse its own paths).
ALWAYS_404 = {"api:api-root"}
# Signing out is open to anyone signed in, whatever their role.
ANY_SIGNED_IN = {"logout"}

LOGIN_REDIRECT = re.compile(r"^/login/\?next=")


@dataclass(frozen=True)
class Route:
    name: str  # "namespace:name"
    route: str  # with <converter:param> placeholders
    namespace: str

    def url(self, values: dict[str, str]) -> str:
        def fill(match: re.Match[str]) -> str:
            param = match.group(2)
            converter = match.group(1) or "str"
            return values.get(param, "1" if converter == "int" else "x")

        return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", fill, self.route)


def _walk(patterns: list[Any], prefix: str = "", namespace: str = "") -> Iterator[Route]:
    for pattern in patterns:
        route = str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            if route.startswith("admin/"):
                # Django's own admin guards its internals; its index stands for it here.
                yield Route("admin:index", prefix + route, "admin")
                continue
            yield from _walk(pattern.url_patterns, prefix + route, pattern.namespace or namespace)
        elif isinstance(pattern, URLPattern):
            name = f"{namespace}:{pattern.name}" if namespace else str(pattern.name)
            yield Route(name, prefix + route, namespace)


ROUTES = sorted(set(_walk(get_resolver().url_patterns)), key=lambda r: r.route)


def _ids(routes: list[Route]) -> list[str]:
    return [r.name for r in routes]


def _in(namespace: str) -> list[Route]:
    return [r for r in ROUTES if r.namespace == namespace]


PROTECTED = [r for r in ROUTES if r.name not in PUBLIC and r.name not in ALWAYS_404]


@pytest.fixture
def values(admit_item: Any, operator: Any, reviewer: Any) -> dict[str, str]:
    """Real objects for every path parameter, so a view reaches its lookups."""
    item = admit_item().item
    gold = GoldItem.objects.create(item=admit_item().item, expected_decision="approve")
    ReviewerStanding.objects.create(reviewer=reviewer)
    rule = FilterRule.objects.create(label="format_issue", gate="parses", description="output must parse")
    run = SimulationRun.objects.create(created_by=operator, name="walk", params={})
    loop = LoopRun.objects.create(run_id="walk-run", task_id="t", task={})
    delivery = WebhookDelivery.objects.create(
        event_id="evt_walk", event_type="item.decided", url="http://127.0.0.1:9/hook", producer="p", body="{}"
    )
    return {
        "delivery_id": str(delivery.pk),
        "gold_id": str(gold.pk),
        "reviewer_id": str(reviewer.pk),
        "item_id": str(item.pk),
        "rule_id": str(rule.pk),
        "action": "enable",
        "run_id": loop.run_id,
        "sim_run_id": str(run.pk),
    }


def _url(route: Route, values: dict[str, str]) -> str:
    # ops' run_id is a simulation, the API's a loop run: same name, different objects.
    if route.namespace == "ops":
        values = {**values, "run_id": values["sim_run_id"]}
    return route.url(values)


def test_the_walk_sees_every_area() -> None:
    names = set(_ids(ROUTES))
    assert {"review:queue", "review:decide", "ops:dashboard", "ops:export_download", "api:push_output"} <= names
    assert {"metrics", "admin:index", "home", "login"} <= names
    # Send back is a review action; an item's page is outside the review
    # namespace (operators read items too) and is walked as a role page.
    assert {"review:send_back", "review_item"} <= names
    # Review quality: the page and each of its POSTs, the Mark as gold form's included.
    assert {"ops:quality", "ops:quality_settle", "ops:quality_reinstate", "ops:gold_retire", "ops:gold_mark"} <= names
    assert "review_item" in _ids(ROLE_PAGES)


@pytest.mark.parametrize("route", PROTECTED, ids=_ids(PROTECTED))
def test_it_refuses_every_protected_url_to_an_anonymous_visitor(
    client: Client, values: dict[str, str], route: Route
) -> None:
    url = _url(route, values)
    answers = {method: getattr(client, method)(url) for method in ("get", "post")}
    for method, response in answers.items():
        assert response.status_code not in range(200, 300), f"{method.upper()} {url} answered {response.status_code}"
        if route.namespace in ("review", "ops", "") and route.name not in ("metrics", "admin:index"):
            assert response.status_code == 302, f"{method.upper()} {url}"
            assert LOGIN_REDIRECT.match(response["Location"]), f"{method.upper()} {url} -> {response['Location']}"
    if route.namespace == "api" or route.name == "metrics":
        # Token endpoints: 401 to whichever method the endpoint serves (405 to the other).
        assert {r.status_code for r in answers.values()} <= {401, 405}
        assert 401 in {r.status_code for r in answers.values()}
    if route.name == "admin:index":
        assert answers["get"].status_code == 302 and "/admin/login/" in answers["get"]["Location"]


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_it_serves_the_public_endpoints_without_a_session(client: Client, db: None, name: str) -> None:
    route = next(r for r in ROUTES if r.name == name)
    assert client.get(route.url({})).status_code == 200


def test_the_ninja_mount_point_answers_404(client: Client, db: None) -> None:
    for name in ALWAYS_404:
        route = next(r for r in ROUTES if r.name == name)
        assert client.get(route.url({})).status_code == 404


def _refused_by_role(client: Client, url: str) -> None:
    """GET and POST are both refused; the method the view serves answers 403
    (the other may be 405, which reaches no view code either)."""
    codes = {method: getattr(client, method)(url).status_code for method in ("get", "post")}
    assert set(codes.values()) <= {403, 405}, f"{url}: {codes}"
    assert 403 in codes.values(), f"{url}: {codes}"


OPS = _in("ops")
REVIEW = _in("review")


@pytest.mark.parametrize("route", OPS, ids=_ids(OPS))
def test_it_refuses_every_operator_url_to_a_reviewer(
    client: Client, reviewer: Any, values: dict[str, str], route: Route
) -> None:
    client.force_login(reviewer)
    _refused_by_role(client, _url(route, values))


@pytest.mark.parametrize("route", REVIEW, ids=_ids(REVIEW))
def test_it_refuses_every_review_url_to_an_operator(
    client: Client, operator: Any, values: dict[str, str], route: Route
) -> None:
    client.force_login(operator)
    _refused_by_role(client, _url(route, values))


ROLE_PAGES = [r for r in PROTECTED if r.name not in ANY_SIGNED_IN and r.namespace != "api" and r.name != "admin:index"]


@pytest.mark.parametrize("route", ROLE_PAGES, ids=_ids(ROLE_PAGES))
def test_it_refuses_every_page_to_a_signed_in_user_without_a_role(
    client: Client, make_user: Any, values: dict[str, str], route: Route
) -> None:
    client.force_login(make_user("nobody"))
    for method in ("get", "post"):
        response = getattr(client, method)(_url(route, values))
        assert response.status_code in (403, 405), f"{method.upper()} {route.name}: {response.status_code}"


def test_it_keeps_the_admin_from_staff_less_operators(client: Client, operator: Any) -> None:
    client.force_login(operator)
    response = client.get("/admin/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
