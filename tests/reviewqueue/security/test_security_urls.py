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
# Public sign-in pages that answer 404 until configured (tests/reviewqueue/security/test_oidc.py walks them on).
OFF_UNLESS_CONFIGURED = {
    "login_password": "the break-glass sign-in form (OIDC_ONLY), rate-limited",
    "oidc_authenticate": "starts the identity provider's sign-in (OIDC_ISSUER)",
    "oidc_callback": "the identity provider's answer to a sign-in (OIDC_ISSUER), rate-limited",
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


PROTECTED = [
    r for r in ROUTES if r.name not in PUBLIC and r.name not in ALWAYS_404 and r.name not in OFF_UNLESS_CONFIGURED
]


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


def test_the_walk_covers_the_item_list(values: dict[str, str]) -> None:
    # The item list, an item's timeline, bulk actions, a reviewer's history and the
    # producers' list are walked like every route: refused to anyone without the role.
    names = set(_ids(ROUTES))
    assert {"ops:items", "ops:item", "ops:items_bulk", "review:history", "api:item_list"} <= names
    assert {"ops:items", "ops:item", "ops:items_bulk", "review:history"} <= set(_ids(ROLE_PAGES))
    assert "ops:item" in _ids(ITEM_ROUTES)


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


def test_the_provider_sign_in_pages_answer_404_until_configured(client: Client, db: None, settings: Any) -> None:
    settings.OIDC_ISSUER = ""
    for name in OFF_UNLESS_CONFIGURED:
        route = next(r for r in ROUTES if r.name == name)
        assert client.get(route.url({})).status_code == 404, name


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
    client: Client, operator: Any, values: dict[str, str], route: Route, settings: Any
) -> None:
    """Where operators are kept from reviewing (REVIEWQUEUE_OPERATORS_REVIEW
    off), an operator without the reviewer role is refused every review URL."""
    settings.REVIEWQUEUE_OPERATORS_REVIEW = False
    client.force_login(operator)
    _refused_by_role(client, _url(route, values))


@pytest.mark.parametrize("route", REVIEW, ids=_ids(REVIEW))
def test_an_operator_reaches_every_review_url_by_default(
    client: Client, operator: Any, values: dict[str, str], route: Route
) -> None:
    client.force_login(operator)
    for method in ("get", "post"):
        response = getattr(client, method)(_url(route, values))
        assert response.status_code != 403, f"{method.upper()} {route.name}: refused to an operator"


def test_an_operator_sees_review_in_the_navigation(client: Client, operator: Any) -> None:
    client.force_login(operator)
    page = client.get("/ops/").content.decode()
    assert 'href="/review/">Review</a>' in page


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


# --- the walls between queues -----------------------------------------------------------------------
# Every route that names an item, requested by a reviewer who does not review
# the item's queue: none shows the item, says more of it than of an item that
# does not exist, or changes it. Operators' and token routes are refused
# whole (above); here they must refuse this reviewer too.

ITEM_ROUTES = [r for r in PROTECTED if re.search(r"<(?:\w+:)?item_id>", r.route)]
WALLED_TEXT = "WALLED-QUEUE-SECRET"


def test_the_walk_finds_the_routes_that_name_an_item() -> None:
    names = set(_ids(ITEM_ROUTES))
    assert {"review_item", "review:decide", "review:skip", "review:renew", "review:send_back"} <= names
    assert {"ops:gold_mark", "ops:quality_settle", "api:item_status"} <= names


@pytest.fixture
def walled_item(make_user: Any, admit_item: Any) -> tuple[Any, dict[str, Any]]:
    """An item of the queue "walled", which only ravi reviews; ravi holds it.
    Returns the item and its row as stored, to compare after each request."""
    from reviewqueue import services
    from reviewqueue.models import Queue, ReviewItem

    ravi = make_user("ravi", "reviewer")
    walled = services.create_queue(user=None, slug="walled", name="Walled")
    walled.members.add(ravi)
    Queue.objects.filter(pk=Queue.default().pk).update(open_to_all=False)
    item = admit_item(queue="walled", task_description=WALLED_TEXT, final_output=WALLED_TEXT).item
    assert services.claim(reviewer=ravi).pk == item.pk
    return item, ReviewItem.objects.values().get(pk=item.pk)


def _notice_texts(body: str) -> list[str]:
    return re.findall(r'<p class="notice notice-\w+">(.*?)</p>', body, re.DOTALL)


@pytest.mark.parametrize("route", ITEM_ROUTES, ids=_ids(ITEM_ROUTES))
@pytest.mark.parametrize("htmx", [False, True], ids=["form", "htmx"])
def test_no_route_shows_an_item_to_a_reviewer_outside_its_queue(
    client: Client,
    reviewer: Any,
    values: dict[str, str],
    walled_item: tuple[Any, dict[str, Any]],
    route: Route,
    htmx: bool,
) -> None:
    from reviewqueue.models import ReviewItem, Verdict

    item, stored = walled_item
    ghost = item.pk + 10_000
    client.force_login(reviewer)
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    form = {"decision": "approve", "note": "n", "expected_decision": "approve", "decision_settled": "approve"}
    for method in ("get", "post"):
        send = getattr(client, method)
        seen = send(_url(route, {**values, "item_id": str(item.pk)}), form, follow=not htmx, **headers)
        missing = send(_url(route, {**values, "item_id": str(ghost)}), form, follow=not htmx, **headers)
        body = seen.content.decode()
        assert WALLED_TEXT not in body, f"{method.upper()} {route.name} showed the item"
        assert seen.status_code == missing.status_code, f"{method.upper()} {route.name}"
        if route.name == "review_item":
            assert seen.status_code == (404 if method == "get" else 405)
        elif route.namespace == "ops":
            assert seen.status_code in (403, 405)
        elif route.namespace == "api":
            assert seen.status_code in (401, 405)
        else:  # the reviewer's actions: the same words as for an item that does not exist
            said = [text.replace(str(ghost), str(item.pk)) for text in _notice_texts(missing.content.decode())]
            assert _notice_texts(body) == said, f"{method.upper()} {route.name}"
    assert ReviewItem.objects.values().get(pk=item.pk) == stored
    assert not Verdict.objects.filter(item=item).exists()
