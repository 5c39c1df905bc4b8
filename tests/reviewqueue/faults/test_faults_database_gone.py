"""Faults: the database is gone for a whole request, not only mid-verdict.

Every query then fails, the first ones already in the middleware (the session
and the signed-in user are looked up before any view runs). Every path still
answers 503 with Retry-After: the 503 page, its partial for htmx, JSON for the
API; with DEBUG on as in the demo, and off.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import OperationalError, connection
from django.test import Client

from reviewqueue import services
from reviewqueue.tokens import issue_token

pytestmark = pytest.mark.django_db

DEBUG = pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])


@pytest.fixture
def database_gone(monkeypatch: pytest.MonkeyPatch) -> Callable[[], Any]:
    """Within the block every query fails as an unreachable server does."""

    @contextmanager
    def gone() -> Iterator[None]:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise OperationalError('connection to server at "127.0.0.1", port 5432 failed: Connection refused')

        with monkeypatch.context() as patch:
            patch.setattr(connection, "cursor", refuse)
            yield

    return gone


@pytest.fixture
def debug_client(settings: Any) -> Callable[[bool], Client]:
    def make(debug: bool) -> Client:
        settings.DEBUG = debug
        client = Client()
        client.raise_request_exception = False  # what a browser sees, not the test's traceback
        return client

    return make


def assert_unavailable_page(response: Any, *, whole: bool) -> None:
    assert response.status_code == 503, response.content[:300]
    assert int(response["Retry-After"]) > 0
    assert b"The database is unavailable" in response.content
    assert (b"<html" in response.content) is whole
    assert b"Traceback" not in response.content
    # The security headers the site's pages carry stay on the 503.
    assert "Content-Security-Policy" in response


@DEBUG
@pytest.mark.parametrize("path", ["/review/", "/ops/", "/review/history/", "/ops/items/", "/ops/quality/", "/admin/"])
def test_a_signed_in_page_answers_503_when_the_database_is_gone(
    debug: bool, path: str, debug_client: Callable[[bool], Client], reviewer: User, operator: User, database_gone: Any
) -> None:
    client = debug_client(debug)
    operator.is_staff = True
    operator.save()
    client.force_login(reviewer if path.startswith("/review/") else operator)
    with database_gone():
        response = client.get(path)
    assert_unavailable_page(response, whole=True)


@DEBUG
def test_an_htmx_verdict_answers_the_503_partial_when_the_database_is_gone(
    debug: bool, debug_client: Callable[[bool], Client], reviewer: User, admit_item: Any, database_gone: Any
) -> None:
    admit_item()
    item = services.claim(reviewer=reviewer)
    assert item is not None
    client = debug_client(debug)
    client.force_login(reviewer)
    with database_gone():
        response = client.post(f"/review/{item.pk}/decide/", {"decision": "approve"}, headers={"HX-Request": "true"})
    assert_unavailable_page(response, whole=False)


@DEBUG
def test_the_api_answers_json_503_with_retry_after_when_the_database_is_gone(
    debug: bool, debug_client: Callable[[bool], Client], database_gone: Any
) -> None:
    _, plain = issue_token(name="producer", scopes=["outputs"])
    client = debug_client(debug)
    payload = {"idempotency_key": "k1", "task_description": "t", "final_output": "o", "cutoff_reason": "step_limit"}
    with database_gone():
        response = client.post(
            "/api/outputs", payload, content_type="application/json", headers={"Authorization": f"Bearer {plain}"}
        )
    assert response.status_code == 503, response.content[:300]
    assert int(response["Retry-After"]) > 0
    assert response.json()["error"] == "database_unavailable"
