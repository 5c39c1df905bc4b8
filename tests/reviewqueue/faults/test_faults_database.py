"""Faults: the database connection drops in the middle of a decide POST.

The reviewer gets a clean 503 saying nothing was saved, the database holds no
half-written verdict (the item is still theirs, undecided), and repeating the
POST records the verdict once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import OperationalError, connection
from django.test import Client

from reviewqueue import services
from reviewqueue.models import ReviewItem, Verdict

pytestmark = pytest.mark.django_db(transaction=True)


def terminate_own_backend() -> None:
    """From a second connection, end the PostgreSQL backend serving this
    thread's connection, and wait until it is gone."""
    import psycopg

    pid = connection.connection.info.backend_pid
    db = connection.settings_dict
    with psycopg.connect(
        host=db.get("HOST") or "127.0.0.1", port=db.get("PORT") or 5432, user=db["USER"], dbname=db["NAME"]
    ) as other:
        assert other.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,)).fetchone() == (True,)


def raise_operational_error() -> None:
    """What a dropped connection looks like to Django on any backend."""
    raise OperationalError("server closed the connection unexpectedly")


# Two points inside decide()'s transaction: just before the verdict INSERT,
# and between the verdict INSERT and the item UPDATE.
POINTS = {"before the verdict insert": Verdict, "between verdict and item update": ReviewItem}


@pytest.fixture
def fault_at(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[type, Callable[[], None]], None]]:
    def arm(model: type, fault: Callable[[], None]) -> None:
        original = model.save
        fired = []

        def save(self: Any, *args: Any, **kwargs: Any) -> None:
            if not fired:
                fired.append(True)
                fault()
            original(self, *args, **kwargs)

        monkeypatch.setattr(model, "save", save)

    yield arm


@pytest.fixture
def held_item(admit_item: Callable[..., Any], reviewer: User) -> ReviewItem:
    admit_item()
    item = services.claim(reviewer=reviewer)
    assert item is not None
    return item


def assert_untouched(item: ReviewItem, reviewer: User) -> None:
    item.refresh_from_db()
    assert not Verdict.objects.filter(item=item).exists()
    assert item.status == ReviewItem.Status.CLAIMED
    assert item.lease_holder_id == reviewer.pk
    assert item.decided_at is None


def decide(client: Client, item: ReviewItem, **headers: str) -> Any:
    return client.post(f"/review/{item.pk}/decide/", {"decision": "approve"}, headers=headers)


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="pg_terminate_backend needs PostgreSQL")
def test_it_answers_503_and_writes_nothing_when_postgres_drops_the_connection(
    point: str, client: Client, reviewer: User, held_item: ReviewItem, fault_at: Any
) -> None:
    client.force_login(reviewer)
    fault_at(POINTS[point], terminate_own_backend)
    response = decide(client, held_item)
    assert response.status_code == 503
    assert response["Retry-After"]
    assert b"nothing was saved" in response.content
    assert b"Traceback" not in response.content
    assert_untouched(held_item, reviewer)

    retried = decide(client, held_item)
    assert retried.status_code == 302
    held_item.refresh_from_db()
    assert held_item.status == ReviewItem.Status.APPROVED
    assert Verdict.objects.filter(item=held_item).count() == 1


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("htmx", [False, True])
def test_it_answers_503_and_writes_nothing_on_a_database_error_mid_decide(
    point: str, htmx: bool, client: Client, reviewer: User, held_item: ReviewItem, fault_at: Any
) -> None:
    client.force_login(reviewer)
    fault_at(POINTS[point], raise_operational_error)
    headers = {"HX-Request": "true"} if htmx else {}
    response = decide(client, held_item, **headers)
    assert response.status_code == 503
    assert b"your verdict was not recorded" in response.content
    assert_untouched(held_item, reviewer)

    retried = decide(client, held_item, **headers)
    assert retried.status_code == (200 if htmx else 302)
    held_item.refresh_from_db()
    assert held_item.status == ReviewItem.Status.APPROVED
    assert Verdict.objects.filter(item=held_item).count() == 1
