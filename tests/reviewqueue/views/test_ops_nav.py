"""The menu shows what the signed-in role may open, on every page, the 403 page included."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import reverse

pytestmark = pytest.mark.django_db

OPERATOR_LINKS = [
    "/ops/",
    "/ops/queues/",
    "/ops/items/",
    "/ops/policy/",
    "/ops/whatif/",
    "/ops/export/",
    "/ops/routing/",
    "/ops/quality/",
    "/ops/deliveries/",
    "/ops/alerts/",
    "/api/docs",
]
REVIEWER_LINKS = ["/review/", "/review/history/"]


def _menu(html: str) -> list[str]:
    nav = html.split('<nav aria-label="Main">')[1].split("</nav>")[0]
    return re.findall(r'href="([^"]+)"', nav)


def test_the_operator_menu_is_the_same_on_every_operator_page(client: Client, operator: User) -> None:
    client.force_login(operator)
    for url in (
        "ops:dashboard",
        "ops:queues",
        "ops:items",
        "ops:policy",
        "ops:whatif",
        "ops:export",
        "ops:routing",
        "ops:quality",
        "ops:deliveries",
        "ops:alerts",
        "ops:alert_channels",
    ):
        # Operators review too by default (REVIEWQUEUE_OPERATORS_REVIEW), so their menu has both.
        assert _menu(client.get(reverse(url)).content.decode()) == REVIEWER_LINKS + OPERATOR_LINKS, url


def test_the_403_page_shows_a_reviewer_the_reviewer_menu(client: Client, reviewer: User) -> None:
    client.force_login(reviewer)
    response = client.get(reverse("ops:dashboard"))
    assert response.status_code == 403
    assert _menu(response.content.decode()) == REVIEWER_LINKS


def test_the_403_page_shows_an_operator_the_operator_menu(client: Client, operator: User) -> None:
    client.force_login(operator)
    with override_settings(REVIEWQUEUE_OPERATORS_REVIEW=False):
        response = client.get(reverse("review:queue"))
    assert response.status_code == 403
    assert _menu(response.content.decode()) == OPERATOR_LINKS


def test_the_403_page_says_which_role_the_user_has(client: Client, reviewer: User) -> None:
    client.force_login(reviewer)
    body = client.get(reverse("ops:policy")).content.decode()
    assert "signed in as rita (reviewer)" in body
    assert "needs the operator role" in body
