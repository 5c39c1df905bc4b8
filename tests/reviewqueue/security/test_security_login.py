"""Sign-in is rate-limited per client address (settings.LOGIN_RATE_LIMIT)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client

from ..limits import address_far_from_a_window_edge

LIMIT = 3
ATTACKER = address_far_from_a_window_edge("203.0.113")
BYSTANDER = "198.51.100.9"


@pytest.fixture(autouse=True)
def small_limit(settings: Any, db: None) -> Iterator[None]:  # the counters live in the database cache
    settings.LOGIN_RATE_LIMIT = f"{LIMIT}/h"
    settings.RATELIMIT_ENABLE = True
    cache.clear()  # counters live in the cache; start every test from zero
    yield
    cache.clear()


def _sign_in(client: Client, password: str, address: str) -> Any:
    return client.post("/login/", {"username": "rita", "password": password}, REMOTE_ADDR=address)


def test_it_refuses_attempts_past_the_limit_with_429_and_says_why(client: Client, reviewer: Any) -> None:
    for _ in range(LIMIT):
        assert _sign_in(client, "wrong", ATTACKER).status_code == 200  # the form again, with an error
    response = _sign_in(client, "wrong", ATTACKER)
    assert response.status_code == 429
    assert b"Too many sign-in attempts" in response.content


def test_it_refuses_even_the_right_password_while_limited(client: Client, reviewer: Any) -> None:
    for _ in range(LIMIT + 1):
        _sign_in(client, "wrong", ATTACKER)
    response = _sign_in(client, "pw-for-tests-1", ATTACKER)
    assert response.status_code == 429
    assert "_auth_user_id" not in client.session


def test_it_leaves_other_addresses_alone(client: Client, reviewer: Any) -> None:
    for _ in range(LIMIT + 1):
        _sign_in(client, "wrong", ATTACKER)
    response = _sign_in(Client(), "pw-for-tests-1", BYSTANDER)
    assert response.status_code == 302
    assert response["Location"] == "/"


def test_it_signs_in_below_the_limit(client: Client, reviewer: Any) -> None:
    for _ in range(LIMIT - 1):
        _sign_in(client, "wrong", ATTACKER)
    assert _sign_in(client, "pw-for-tests-1", ATTACKER).status_code == 302
    assert client.session["_auth_user_id"] == str(reviewer.pk)


def test_it_shows_the_sign_in_form_to_a_limited_address(client: Client, reviewer: Any) -> None:
    # Only POSTs count: the page itself stays readable, so the message can be read.
    for _ in range(LIMIT + 1):
        _sign_in(client, "wrong", ATTACKER)
    assert client.get("/login/", REMOTE_ADDR=ATTACKER).status_code == 200


def _admin_sign_in(client: Client, password: str, address: str) -> Any:
    return client.post("/admin/login/?next=/admin/", {"username": "root", "password": password}, REMOTE_ADDR=address)


@pytest.fixture
def superuser(django_user_model: Any) -> Any:
    return django_user_model.objects.create_superuser("root", "root@example.com", "pw-for-tests-1")


def test_the_admin_sign_in_is_limited_too(client: Client, superuser: Any) -> None:
    for _ in range(LIMIT):
        assert _admin_sign_in(client, "wrong", ATTACKER).status_code == 200
    refused = _admin_sign_in(client, "pw-for-tests-1", ATTACKER)
    assert refused.status_code == 429
    assert b"Too many sign-in attempts" in refused.content
    assert "_auth_user_id" not in client.session
    assert _admin_sign_in(Client(), "pw-for-tests-1", BYSTANDER).status_code == 302


def test_the_site_and_the_admin_share_one_count(client: Client, reviewer: Any, superuser: Any) -> None:
    for _ in range(LIMIT):
        _sign_in(client, "wrong", ATTACKER)
    assert _admin_sign_in(client, "pw-for-tests-1", ATTACKER).status_code == 429
