"""The site's own 404 and 500: a styled page with the way back for a person,
JSON for the API, and never Django's bare "Server Error (500)"."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.decorators import login_not_required
from django.test import Client
from django.urls import path

from reviewqueue import urls as site_urls

pytestmark = pytest.mark.django_db


@login_not_required
def broken(request: Any) -> Any:
    raise RuntimeError("a bug")


urlpatterns = [
    *site_urls.urlpatterns,
    path("broken/", broken),
    path("api/broken", broken),
]
handler404 = site_urls.handler404
handler500 = site_urls.handler500


def test_an_unknown_page_is_the_site_styled_404_with_the_menu(client: Client, reviewer: Any) -> None:
    client.force_login(reviewer)
    response = client.get("/no/such/<page>/")
    assert response.status_code == 404
    body = response.content.decode()
    assert "<h1>Page not found</h1>" in body
    assert "<code>/no/such/%3Cpage%3E/</code>" in body
    assert 'href="/review/"' in body  # the reviewer's own menu
    assert "css/base" in body


def test_an_unknown_api_path_answers_json(client: Client) -> None:
    response = client.get("/api/no-such-endpoint")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


@pytest.mark.urls(__name__)
def test_a_server_error_is_the_site_styled_500(client: Client, reviewer: Any) -> None:
    client.raise_request_exception = False
    client.force_login(reviewer)
    response = client.get("/broken/")
    assert response.status_code == 500
    body = response.content.decode()
    assert "Something went wrong on the server" in body
    assert "css/base" in body
    assert "a bug" not in body


@pytest.mark.urls(__name__)
def test_a_server_error_in_the_api_answers_json(client: Client) -> None:
    client.raise_request_exception = False
    response = client.get("/api/broken")
    assert response.status_code == 500
    assert response.json()["error"] == "server_error"
