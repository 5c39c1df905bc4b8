"""Token scopes, enforced on the server for every endpoint: a token may do
only what it was granted, and a refusal names the scope it lacks."""

from __future__ import annotations

import io
import itertools
import json
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from reviewqueue.models import ApiToken, LoopRun, ReviewItem
from reviewqueue.tokens import issue_token

pytestmark = pytest.mark.django_db

TASK = {"id": "t", "description": "Say hi", "kind": "open"}
ALL_SCOPES = ("outputs", "tasks", "metrics")
SUBSETS = [list(c) for n in range(4) for c in itertools.combinations(ALL_SCOPES, n)]


def _output(key: str) -> dict[str, Any]:
    return {"idempotency_key": key, "task_description": "t", "final_output": "o"}


def _call(client: Client, endpoint: str, plain: str) -> Any:
    headers = {"Authorization": f"Bearer {plain}"}
    if endpoint == "POST /api/outputs":
        return client.post("/api/outputs", json.dumps(_output("k")), content_type="application/json", headers=headers)
    if endpoint == "POST /api/tasks":
        body = json.dumps({"task": TASK, "run_id": "r"})
        return client.post("/api/tasks", body, content_type="application/json", headers=headers)
    if endpoint == "GET /api/tasks/{run_id}":
        return client.get("/api/tasks/r", headers=headers)
    if endpoint == "GET /metrics":
        return client.get("/metrics", headers=headers)
    if endpoint == "GET /api/items/{id}":
        return client.get("/api/items/1", headers=headers)
    assert endpoint == "GET /api/stats"
    return client.get("/api/stats", headers=headers)


# endpoint -> the scopes any one of which lets a token in (empty: any token)
NEEDS = {
    "POST /api/outputs": {"outputs"},
    "POST /api/tasks": {"tasks"},
    "GET /api/tasks/{run_id}": {"tasks"},
    "GET /metrics": {"metrics"},
    "GET /api/items/{id}": {"outputs", "tasks"},
    "GET /api/stats": set(),
}


@pytest.mark.parametrize("scopes", SUBSETS, ids=lambda s: "+".join(s) or "none")
@pytest.mark.parametrize("endpoint", list(NEEDS))
def test_each_endpoint_admits_exactly_the_tokens_with_its_scope(
    client: Client, endpoint: str, scopes: list[str]
) -> None:
    _, plain = issue_token(name="p", scopes=scopes)
    with mock.patch("reviewqueue.tasks.loops.run_loop.delay"):
        response = _call(client, endpoint, plain)
    allowed = not NEEDS[endpoint] or bool(NEEDS[endpoint] & set(scopes))
    if allowed:
        # 404 is the answer for a run or item this producer does not have: it got past the scope check.
        assert response.status_code in (200, 201, 404), response.content
    else:
        assert response.status_code == 403
        body = response.json()
        assert body["error"] == "forbidden"
        assert set(body["missing_scope"].split(" or ")) == NEEDS[endpoint]
        assert all(scope in body["detail"] for scope in NEEDS[endpoint])


def test_a_token_without_the_tasks_scope_stores_and_starts_nothing(client: Client) -> None:
    _, plain = issue_token(name="p", scopes=["outputs", "metrics"])
    with mock.patch("reviewqueue.tasks.loops.run_loop.delay") as delay:
        response = _call(client, "POST /api/tasks", plain)
    assert response.status_code == 403
    assert response.json()["missing_scope"] == "tasks"
    assert not LoopRun.objects.exists()
    assert delay.call_count == 0


def test_the_metrics_refusal_names_the_scope(client: Client) -> None:
    _, plain = issue_token(name="p", scopes=["outputs", "tasks"])
    response = client.get("/metrics", headers={"Authorization": f"Bearer {plain}"})
    assert response.status_code == 403
    assert response.json()["missing_scope"] == "metrics"
    assert "reviewqueue_depth" not in response.content.decode()


def test_a_scope_taken_away_in_the_admin_is_refused_at_once(client: Client) -> None:
    token, plain = issue_token(name="p", scopes=["outputs", "tasks"])
    assert _call(client, "GET /api/tasks/{run_id}", plain).status_code == 404
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-1")
    staff = Client()
    staff.force_login(admin)
    response = staff.post(
        f"/admin/reviewqueue/apitoken/{token.pk}/change/", {"name": "p", "scopes": ["outputs"], "revoked_at": ""}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    token.refresh_from_db()
    assert token.scopes == ["outputs"]
    assert _call(client, "GET /api/tasks/{run_id}", plain).status_code == 403


def test_the_admin_grants_scopes_with_checkboxes_and_refuses_unknown_ones(client: Client) -> None:
    token, _ = issue_token(name="p", scopes=["outputs"])
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-1")
    client.force_login(admin)
    page = client.get(f"/admin/reviewqueue/apitoken/{token.pk}/change/").content.decode()
    assert 'type="checkbox" name="scopes" value="metrics"' in page
    url = f"/admin/reviewqueue/apitoken/{token.pk}/change/"
    assert client.post(url, {"name": "p", "scopes": ["outputs", "metrics"], "revoked_at": ""}).status_code == 302
    token.refresh_from_db()
    assert token.scopes == ["outputs", "metrics"]
    assert client.post(url, {"name": "p", "scopes": ["root"], "revoked_at": ""}).status_code == 200  # form error
    token.refresh_from_db()
    assert token.scopes == ["outputs", "metrics"]


def _create(*args: str) -> ApiToken:
    out = io.StringIO()
    call_command("create_api_token", *args, stdout=out, stderr=io.StringIO())
    return ApiToken.objects.get(prefix=out.getvalue().strip().split("_")[1])


def test_the_command_grants_only_outputs_by_default() -> None:
    assert _create("plain").scopes == ["outputs"]


def test_the_command_grants_the_scopes_asked_for() -> None:
    assert _create("all", "--scopes", "outputs,tasks,metrics").scopes == ["outputs", "tasks", "metrics"]
    assert _create("scraper", "--scopes", "metrics").scopes == ["metrics"]
    assert _create("loops", "--scopes", " tasks , outputs ").scopes == ["outputs", "tasks"]


def test_the_metrics_flag_still_adds_the_metrics_scope() -> None:
    assert _create("ci", "--metrics").scopes == ["outputs", "metrics"]
    assert _create("scrape", "--scopes", "metrics", "--metrics").scopes == ["metrics"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("x", "--scopes", "outputs,admin"), "unknown scope admin"),
        (("x", "--scopes", ","), "at least one scope"),
        (("loop:scripted",), "kept for built-in loop runs"),
        (("x" * 101,), "1 to 100"),
    ],
)
def test_the_command_refuses_bad_scopes_and_names(args: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        _create(*args)
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("scopes", [["outputs", "root"], "outputs", None])
def test_a_token_with_unknown_or_malformed_scopes_does_not_validate(scopes: Any) -> None:
    from django.core.exceptions import ValidationError

    token, _ = issue_token(name="p", scopes=["outputs"])
    token.scopes = scopes
    with pytest.raises(ValidationError, match="scopes"):
        token.clean()
    assert token.has_scope("outputs") is isinstance(scopes, list)  # a string or None grants nothing


@pytest.mark.parametrize("name", ["loop:scripted", "  loop:claude", "loop:"])
def test_a_token_whose_name_was_made_reserved_outside_the_rules_is_refused_everywhere(
    client: Client, name: str
) -> None:
    """A direct database edit (or any other path around ``checked_name``) can
    give a token a built-in loop run's producer name: the API and /metrics
    then answer 403 with a code saying so, and nothing is stored under it."""
    token, plain = issue_token(name="p", scopes=list(ALL_SCOPES))
    ApiToken.objects.filter(pk=token.pk).update(name=name)
    for endpoint in NEEDS:
        response = _call(client, endpoint, plain)
        assert response.status_code == 403, (endpoint, response.status_code)
        assert response.json()["error"] == "reserved_producer_name", endpoint
        assert "loop:" in response.json()["detail"]
    assert not LoopRun.objects.exists()
    assert not ReviewItem.objects.exists()
