"""POST /api/outputs: a producer pushes a cutoff output into the queue; tokens, field errors, limits
and the schema."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from reviewqueue import services
from reviewqueue.api_guard import API_MAX_BODY_BYTES
from reviewqueue.models import ApiToken, ReviewItem
from reviewqueue.tokens import hash_token, issue_token

pytestmark = pytest.mark.django_db

URL = "/api/outputs"


@pytest.fixture
def token(db: None) -> str:
    _, plain = issue_token(name="producer-a", scopes=["outputs"])
    return plain


def _post(client: Client, body: Any, token: str | None, **kwargs: Any) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return client.post(URL, data=data, content_type="application/json", headers=headers, **kwargs)


def _output(**overrides: Any) -> dict[str, Any]:
    body = {
        "idempotency_key": "k-1",
        "task_description": "Summarise the incident",
        "final_output": "The incident began at 10:02.",
        "cutoff_reason": "step_limit",
        "attempt_count": 3,
    }
    body.update(overrides)
    return body


def test_it_stores_only_a_hash_of_the_token(token: str) -> None:
    stored = ApiToken.objects.get()
    assert stored.token_hash == hash_token(token)
    assert token not in (stored.token_hash, stored.prefix, stored.name)
    assert token.startswith(f"rq_{stored.prefix}_")


def test_it_enqueues_a_pushed_output(client: Client, token: str) -> None:
    response = _post(client, _output(), token)
    assert response.status_code == 201
    data = response.json()
    assert data["outcome"] == "enqueued"
    assert data["mode"] == "normal"
    assert data["backoff"] is False
    item = ReviewItem.objects.get(pk=data["item_id"])
    assert item.producer == "producer-a"
    assert item.status == ReviewItem.Status.PENDING


def test_it_answers_duplicate_for_a_repeated_key(client: Client, token: str) -> None:
    first = _post(client, _output(), token).json()
    second = _post(client, _output(final_output="something else"), token)
    assert second.status_code == 200
    assert second.json()["outcome"] == "duplicate"
    assert second.json()["item_id"] == first["item_id"]
    assert ReviewItem.objects.count() == 1


def test_it_tells_the_producer_to_back_off_when_shedding(client: Client, token: str) -> None:
    services.policy_update(user=None, changes={"capacity": 2})
    _post(client, _output(idempotency_key="a", priority=5), token)
    _post(client, _output(idempotency_key="b", priority=5), token)
    response = _post(client, _output(idempotency_key="c", priority=0), token)
    data = response.json()
    assert data["outcome"] == "shed"
    assert data["backoff"] is True
    assert data["mode"] != "normal"


def test_it_requires_a_token(client: Client, db: None) -> None:
    response = _post(client, _output(), None)
    assert response.status_code == 401
    assert not ReviewItem.objects.exists()


def test_it_refuses_a_revoked_token(client: Client, token: str) -> None:
    from django.utils import timezone

    ApiToken.objects.update(revoked_at=timezone.now())
    assert _post(client, _output(), token).status_code == 401


def test_it_refuses_a_forged_token_with_a_real_prefix(client: Client, token: str) -> None:
    forged = token[:-4] + "AAAA"
    assert _post(client, _output(), forged).status_code == 401


def test_it_names_the_missing_idempotency_key(client: Client, token: str) -> None:
    body = _output()
    del body["idempotency_key"]
    response = _post(client, body, token)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid"
    assert "idempotency_key" in response.json()["fields"]


def test_it_names_a_bad_cutoff_reason(client: Client, token: str) -> None:
    response = _post(client, _output(cutoff_reason="bored"), token)
    assert response.status_code == 400
    assert "cutoff_reason" in response.json()["fields"]


def test_it_names_a_wrongly_typed_field(client: Client, token: str) -> None:
    response = _post(client, _output(final_output={"not": "text"}), token)
    assert response.status_code == 400
    assert "final_output" in response.json()["fields"]


def test_it_answers_400_to_malformed_json(client: Client, token: str) -> None:
    response = _post(client, "{not json", token)
    assert response.status_code == 400


def test_it_truncates_a_ten_megabyte_output_with_a_marker(client: Client, token: str) -> None:
    response = _post(client, _output(final_output="x" * (10 * 1024 * 1024)), token)
    assert response.status_code == 201
    assert response.json()["truncated"] is True
    item = ReviewItem.objects.get()
    assert "[reviewqueue: output truncated" in item.final_output
    assert len(item.final_output) < 600_000


def test_it_refuses_a_body_over_the_limit_with_413(client: Client, token: str) -> None:
    response = _post(client, _output(final_output="x" * (API_MAX_BODY_BYTES + 10)), token)
    assert response.status_code == 413
    assert response.json()["error"] == "payload_too_large"
    assert not ReviewItem.objects.exists()


def test_it_cleans_invalid_unicode_in_an_output(client: Client, token: str) -> None:
    body = json.dumps(_output(final_output="bad \ud800 surrogate \x00 nul"))
    response = _post(client, body, token)
    assert response.status_code == 201
    stored = ReviewItem.objects.get().final_output
    assert "\x00" not in stored
    assert "\ufffd" in stored


def test_it_needs_no_csrf_token(token: str) -> None:
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    assert _post(strict, _output(), token).status_code == 201


def test_it_serves_an_openapi_document(client: Client, db: None) -> None:
    response = client.get(reverse("api:openapi-json"))
    assert response.status_code == 200
    doc = response.json()
    assert "/api/outputs" in doc["paths"]
    assert "/api/stats" in doc["paths"]


def test_it_takes_the_reviewed_attempt_its_grade_and_failing_checks(client: Client, token: str) -> None:
    body = _output(
        cutoff_reason="regression",
        attempt_count=5,
        reviewed_attempt=3,
        checks_passed=4,
        checks_total=5,
        failing_checks=[{"id": "check_5", "about": "handles n = 0"}, {"id": "check_6"}],
    )
    response = _post(client, body, token)
    assert response.status_code == 201
    item = ReviewItem.objects.get()
    assert (item.cutoff_reason, item.reviewed_attempt, item.checks_passed, item.checks_total) == ("regression", 3, 4, 5)
    assert item.failing_check_list() == [{"id": "check_5", "about": "handles n = 0"}, {"id": "check_6", "about": ""}]


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"reviewed_attempt": 4}, "reviewed_attempt"),  # beyond attempt_count (3)
        ({"checks_passed": 2}, "checks_passed"),  # without checks_total
        ({"checks_passed": 6, "checks_total": 5}, "checks_passed"),
        ({"failing_checks": [{"about": "no id"}]}, "failing_checks"),
        ({"failing_checks": [{"id": "c", "about": "x" * 201}]}, "failing_checks"),
    ],
)
def test_it_names_a_grade_that_does_not_add_up_and_stores_nothing(
    client: Client, token: str, fields: dict[str, Any], named: str
) -> None:
    response = _post(client, _output(**fields), token)
    assert response.status_code == 400
    assert any(key.startswith(named) for key in response.json()["fields"]), response.json()
    assert not ReviewItem.objects.exists()
