"""Property-based run of the OpenAPI document against the app: no input may
produce a server error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from reviewqueue.tokens import issue_token


@pytest.fixture
def api_schema(db: None) -> Iterator[Any]:
    # Loaded inside a fixture so the test settings (no HTTPS redirect) are in force.
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    from reviewqueue.wsgi import application

    # As Django's own test client does: keep the test's connection (and its
    # transaction) open across requests made through the raw WSGI app.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/openapi.json", application)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def bearer(db: None) -> Iterator[str]:
    _, plain = issue_token(name="fuzzer", scopes=["outputs", "tasks"])
    with mock.patch("reviewqueue.tasks.loops.run_loop.delay"):
        yield plain


@pytest.mark.slow
def test_it_never_answers_with_a_server_error(api_schema: Any, bearer: str) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/api/outputs", "/api/tasks", "/api/stats"}
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def check(case: Any) -> None:
            case.headers = {**(case.headers or {}), "Authorization": f"Bearer {bearer}"}
            case.call_and_validate(checks=[not_a_server_error])

        check()
