"""callback_url on POST /api/outputs and /api/tasks, the token's default
webhook, and the commands that issue and rotate a signing secret."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from loops.spec import builtin_suite
from reviewqueue.models import ApiToken, LoopRun, ReviewItem
from reviewqueue.tokens import issue_token

pytestmark = pytest.mark.django_db

HOOK = "http://127.0.0.1:8999/hook"


@pytest.fixture(autouse=True)
def _allowed(settings: Any) -> None:
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1:8999"]


def post(client: Client, url: str, body: dict[str, Any], token: str) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    return client.post(url, data=json.dumps(body), content_type="application/json", headers=headers)


def output(**extra: Any) -> dict[str, Any]:
    return {"idempotency_key": "k-1", "task_description": "t", "final_output": "o", **extra}


def task(**extra: Any) -> dict[str, Any]:
    return {"task": builtin_suite()[0].to_dict(), "run_id": "r-1", **extra}


@pytest.fixture
def signed() -> str:
    return issue_token(name="acme", scopes=["outputs", "tasks"], webhook_url=HOOK)[1]


@pytest.fixture
def unsigned() -> str:
    return issue_token(name="plain", scopes=["outputs", "tasks"])[1]


def test_an_allowed_callback_url_is_stored_on_the_item(client: Client, signed: str) -> None:
    other = "http://127.0.0.1:8999/other"
    assert post(client, "/api/outputs", output(callback_url=other), signed).status_code == 201
    assert ReviewItem.objects.get().callback_url == other


def test_without_one_the_tokens_default_webhook_applies(client: Client, signed: str, unsigned: str) -> None:
    assert post(client, "/api/outputs", output(), signed).status_code == 201
    assert post(client, "/api/outputs", output(), unsigned).status_code == 201
    assert dict(ReviewItem.objects.values_list("producer", "callback_url")) == {"acme": HOOK, "plain": ""}


@pytest.mark.parametrize("endpoint", ["/api/outputs", "/api/tasks"])
@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("http://10.0.0.5/hook", "callback_url_not_allowed"),
        ("http://127.0.0.1:8998/hook", "callback_url_not_allowed"),
        ("http://localhost:8999/hook", "callback_url_not_allowed"),
        ("http://x:y@127.0.0.1:8999/hook", "callback_url_invalid"),
        ("gopher://127.0.0.1:8999/", "callback_url_invalid"),
    ],
)
def test_a_disallowed_callback_url_is_refused_with_400_naming_the_host(
    client: Client, signed: str, endpoint: str, url: str, code: str
) -> None:
    body = output(callback_url=url) if endpoint == "/api/outputs" else task(callback_url=url)
    response = post(client, endpoint, body, signed)
    assert response.status_code == 400
    assert response.json()["error"] == code
    assert "callback_url" in response.json()["fields"]
    if code == "callback_url_not_allowed":
        assert url.split("/")[2].split(":")[0] in response.json()["detail"]
    assert ReviewItem.objects.count() == 0 and LoopRun.objects.count() == 0


def test_a_producer_without_a_secret_cannot_name_a_callback(client: Client, unsigned: str) -> None:
    response = post(client, "/api/outputs", output(callback_url=HOOK), unsigned)
    assert response.status_code == 400 and response.json()["error"] == "callback_url_needs_secret"


def test_a_task_carries_its_callback_url_to_the_run(client: Client, signed: str) -> None:
    # the test's transaction never commits, so nothing is published
    response = post(client, "/api/tasks", task(callback_url="http://127.0.0.1:8999/runs"), signed)
    assert response.status_code == 201
    assert LoopRun.objects.get().callback_url == "http://127.0.0.1:8999/runs"


def test_create_api_token_with_a_webhook_prints_the_token_then_the_secret_once() -> None:
    out, err = io.StringIO(), io.StringIO()
    call_command("create_api_token", "hooked", "--webhook", HOOK, stdout=out, stderr=err)
    token_line, secret_line = out.getvalue().split()
    token = ApiToken.objects.get(name="hooked")
    assert token_line.startswith("rq_") and secret_line == token.webhook_secret
    assert secret_line.startswith("whsec_") and len(secret_line) > 40
    assert token.webhook_url == HOOK
    assert "not shown again" in err.getvalue()


def test_create_api_token_refuses_a_webhook_host_not_allowed() -> None:
    with pytest.raises(CommandError, match="not allowed"):
        call_command("create_api_token", "hooked", "--webhook", "http://169.254.169.254/", stdout=io.StringIO())
    assert not ApiToken.objects.exists()


def test_without_webhook_only_the_token_is_printed() -> None:
    out = io.StringIO()
    call_command("create_api_token", "plain", stdout=out, stderr=io.StringIO())
    assert out.getvalue().split() == [out.getvalue().strip()] and ApiToken.objects.get().webhook_secret == ""


def test_rotate_webhook_secret_replaces_it_and_prints_the_new_one(signed: str) -> None:
    old = ApiToken.objects.get(name="acme").webhook_secret
    out = io.StringIO()
    call_command("rotate_webhook_secret", "acme", stdout=out, stderr=io.StringIO())
    new = ApiToken.objects.get(name="acme").webhook_secret
    assert out.getvalue().strip() == new and new != old and new.startswith("whsec_")
    with pytest.raises(CommandError, match="no active token"):
        call_command("rotate_webhook_secret", "nobody", stdout=io.StringIO(), stderr=io.StringIO())
