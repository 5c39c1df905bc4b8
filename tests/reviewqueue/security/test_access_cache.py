"""Cached permissions: a request reads them without the two permission
queries, and every way a role changes takes effect on the user's very next
request."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from reviewqueue.access import generation_cache_key, permissions_cache_key

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(reviewer: Any, client: Any) -> Any:
    cache.delete(permissions_cache_key(reviewer.pk))
    client.force_login(reviewer)
    assert client.get("/review/").status_code == 200  # the permissions are cached now
    return client


def permission_queries(client: Any) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get("/review/").status_code == 200
    return sum("auth_permission" in q["sql"] for q in captured.captured_queries)


def test_a_request_with_cached_permissions_sends_no_permission_query(signed_in: Any) -> None:
    assert permission_queries(signed_in) == 0


def test_a_role_removed_in_the_admin_takes_effect_on_the_next_request(
    signed_in: Any, operator: Any, roles: dict[str, Group], client: Any, django_user_model: Any
) -> None:
    admin = django_user_model.objects.create_superuser("root", password="pw-for-tests-1")
    from django.test import Client

    staff = Client()
    staff.force_login(admin)
    group = roles["reviewer"]
    answer = staff.post(f"/admin/auth/group/{group.pk}/change/", {"name": group.name, "permissions": []})
    assert answer.status_code == 302, answer.content[:500]
    assert signed_in.get("/review/").status_code == 403


def test_leaving_the_group_takes_effect_on_the_next_request(
    signed_in: Any, reviewer: Any, roles: dict[str, Group]
) -> None:
    reviewer.groups.remove(roles["reviewer"])
    assert signed_in.get("/review/").status_code == 403


def test_the_group_emptied_from_its_side_takes_effect(signed_in: Any, roles: dict[str, Group]) -> None:
    roles["reviewer"].user_set.clear()
    assert signed_in.get("/review/").status_code == 403


def test_a_deleted_group_takes_effect_on_the_next_request(signed_in: Any, roles: dict[str, Group]) -> None:
    roles["reviewer"].delete()
    assert signed_in.get("/review/").status_code == 403


def test_a_permission_taken_from_the_group_takes_effect(signed_in: Any, roles: dict[str, Group]) -> None:
    roles["reviewer"].permissions.remove(Permission.objects.get(codename="review"))
    assert signed_in.get("/review/").status_code == 403


def test_a_direct_permission_given_and_taken_takes_effect(
    signed_in: Any, reviewer: Any, roles: dict[str, Group]
) -> None:
    reviewer.groups.clear()
    assert signed_in.get("/review/").status_code == 403
    review = Permission.objects.get(codename="review")
    reviewer.user_permissions.add(review)
    assert signed_in.get("/review/").status_code == 200
    review.user_set.remove(reviewer)
    assert signed_in.get("/review/").status_code == 403


def test_a_deactivated_user_is_refused_at_once(signed_in: Any, reviewer: Any) -> None:
    reviewer.is_active = False
    reviewer.save()
    assert signed_in.get("/review/").status_code != 200


def test_superuser_taken_away_takes_effect(client: Any, django_user_model: Any) -> None:
    root = django_user_model.objects.create_superuser("root2", password="pw-for-tests-1")
    client.force_login(root)
    assert client.get("/review/").status_code == 200
    root.is_superuser = False
    root.save()
    assert client.get("/review/").status_code == 403


def test_an_entry_for_another_row_with_the_same_id_is_ignored(signed_in: Any, reviewer: Any, roles: Any) -> None:
    reviewer.groups.clear()
    generation = cache.get(generation_cache_key(reviewer.pk))
    cache.set(permissions_cache_key(reviewer.pk), ("another row", generation, frozenset({"reviewqueue.review"})))
    assert signed_in.get("/review/").status_code == 403


def test_permissions_read_before_a_change_and_cached_after_it_are_stale(
    signed_in: Any, reviewer: Any, roles: dict[str, Group]
) -> None:
    # A request reads the generation and the old permissions; the role is
    # removed and its invalidation runs; then that request writes what it read.
    generation = cache.get(generation_cache_key(reviewer.pk))
    stamp = str(reviewer.date_joined)
    reviewer.groups.remove(roles["reviewer"])
    cache.set(permissions_cache_key(reviewer.pk), (stamp, generation, frozenset({"reviewqueue.review"})))
    assert signed_in.get("/review/").status_code == 403


def test_an_unreachable_cache_reads_the_database(signed_in: Any, reviewer: Any, monkeypatch: Any) -> None:
    def down(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("cache down")

    for name in ("get", "get_many", "set", "set_many", "delete_many"):
        monkeypatch.setattr(cache, name, down)
    assert signed_in.get("/review/").status_code == 200
    reviewer.groups.clear()
    assert signed_in.get("/review/").status_code == 403


@pytest.fixture
def cached_sessions(settings: Any) -> None:
    settings.SESSION_ENGINE = "reviewqueue.sessions"


@pytest.mark.usefixtures("cached_sessions")
def test_a_signed_in_session_survives_a_flushed_cache(client: Any, reviewer: Any) -> None:
    assert client.post("/login/", {"username": reviewer.username, "password": "pw-for-tests-1"}).status_code == 302
    assert client.get("/review/").status_code == 200
    cache.clear()
    assert client.get("/review/").status_code == 200
    assert client.get("/review/").status_code == 200  # read back into the cache, then from it


@pytest.mark.usefixtures("cached_sessions")
def test_sign_in_and_out_work_with_the_cache_down(client: Any, reviewer: Any, monkeypatch: Any) -> None:
    def down(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("cache down")

    for method in ("get", "set", "add", "delete", "delete_many", "has_key", "incr", "get_many", "set_many"):
        monkeypatch.setattr(cache, method, down)
    assert client.post("/login/", {"username": reviewer.username, "password": "pw-for-tests-1"}).status_code == 302
    assert client.get("/review/").status_code == 200
    assert client.post("/logout/").status_code == 302
    assert client.get("/review/").status_code == 302
