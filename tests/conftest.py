"""Shared fixtures. Settings overrides for tests live here, not in a second settings file."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

_keys = itertools.count()


@pytest.fixture(autouse=True)
def _test_settings(settings: Any) -> None:
    # Tests talk plain HTTP to localhost; production's HTTPS redirect would get in the way.
    settings.SECURE_SSL_REDIRECT = False
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _fresh_routes() -> None:
    """Each test starts with no queues or routing rules kept in the process:
    a test database flushed between tests makes new rows under the same
    slugs, which the routing's short-lived copy would not know."""
    from reviewqueue.services import routing

    routing.forget()


@pytest.fixture(autouse=True)
def _no_alert_announcements(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mode change asks a worker to evaluate alerts (services.depth). In
    tests nobody consumes those messages, and left in the broker they would
    reach the next test's real worker; the tests of the trigger itself
    watch it in place of sending."""
    monkeypatch.setattr("reviewqueue.services.depth.announce_mode_change", lambda queue_pk: None)


@pytest.fixture(autouse=True)
def _one_review_per_item(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Double review picks a share of items by a hash of their id, and ids
    depend on what ran before (PostgreSQL's sequences outlive a test's
    rollback). A test written for one review per item would then meet a
    second review by chance, so only tests marked ``double_review`` (the
    ones about it) see it; every other test sees one review per item."""
    if request.node.get_closest_marker("double_review") is None:
        monkeypatch.setattr("reviewqueue.policy.selected_for_double_review", lambda item_key, rate: False)


@pytest.fixture
def roles(db: None) -> dict[str, Any]:
    from reviewqueue.access import ensure_groups

    return ensure_groups()


@pytest.fixture
def make_user(roles: dict[str, Any], django_user_model: Any) -> Callable[..., Any]:
    def make(username: str, *role_names: str, password: str = "pw-for-tests-1") -> Any:
        user = django_user_model.objects.create_user(username=username, password=password)
        for role in role_names:
            user.groups.add(roles[role])
        return user

    return make


@pytest.fixture
def reviewer(make_user: Callable[..., Any]) -> Any:
    return make_user("rita", "reviewer")


@pytest.fixture
def operator(make_user: Callable[..., Any]) -> Any:
    return make_user("otto", "operator")


@pytest.fixture
def admit_item(db: None) -> Callable[..., Any]:
    """Admit one cutoff output through the real service; returns the AdmitResult."""
    from reviewqueue import services

    def admit(**overrides: Any) -> Any:
        n = next(_keys)
        fields: dict[str, Any] = {
            "idempotency_key": f"test-{n}",
            "task_description": f"Write is_even (task {n})",
            "final_output": "def is_even(n):\n    return n % 2 == 0\n",
            "cutoff_reason": "step_limit",
            "last_error": "AssertionError:check_2",
            "attempt_count": 5,
            "task_id": f"task-{n}",
        }
        fields.update(overrides)
        return services.admit(**fields)

    return admit
