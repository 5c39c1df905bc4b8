"""A lost database answers 503 on every page and API, not a 500."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import OperationalError
from django.test import Client

from reviewqueue import services, stats
from reviewqueue.tokens import issue_token

pytestmark = pytest.mark.django_db


def broken(*args: Any, **kwargs: Any) -> Any:
    raise OperationalError("server closed the connection unexpectedly")


def test_it_answers_503_when_claiming_loses_the_database(
    client: Client, reviewer: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    client.force_login(reviewer)
    monkeypatch.setattr(services, "claim", broken)
    response = client.post("/review/next/", HTTP_HX_REQUEST="true")
    assert response.status_code == 503
    assert response["Retry-After"]
    assert b"Nothing was saved" in response.content
    assert b"<html" not in response.content  # the partial, for htmx to put in place of the card


def test_it_answers_503_on_the_dashboard(client: Client, operator: User, monkeypatch: pytest.MonkeyPatch) -> None:
    client.force_login(operator)
    monkeypatch.setattr(stats, "waiting_counts", broken)
    response = client.get("/ops/")
    assert response.status_code == 503
    assert b"Nothing was saved" in response.content
    assert b"<html" in response.content  # a whole page for a plain request


def test_it_answers_json_503_on_the_api(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    _, plain = issue_token(name="producer", scopes=["outputs"])
    monkeypatch.setattr(services, "admit", broken)
    payload = {
        "idempotency_key": "k1",
        "task_description": "t",
        "final_output": "o",
        "cutoff_reason": "step_limit",
    }
    response = client.post(
        "/api/outputs", payload, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {plain}"
    )
    assert response.status_code == 503
    assert response.json()["error"] == "database_unavailable"


def test_it_leaves_other_errors_to_django(client: Client, reviewer: User, monkeypatch: pytest.MonkeyPatch) -> None:
    client.raise_request_exception = False
    client.force_login(reviewer)

    def bug(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError

    monkeypatch.setattr(services, "claim", bug)
    assert client.post("/review/next/").status_code == 500
