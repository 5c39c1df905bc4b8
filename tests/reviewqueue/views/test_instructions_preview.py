"""The queue instructions editor's Markdown preview: rendered and sanitised
as reviewers see them, for operators only, behind CSRF."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
SOURCE = "**Approve** when it runs.\n\n- one\n- two\n\n<script>alert(1)</script> [x](javascript:alert(1))"


def test_it_renders_the_markdown_sanitised_as_reviewers_see_it(client: Client, operator: User) -> None:
    client.force_login(operator)
    response = client.post(reverse("ops:instructions_preview"), {"instructions": SOURCE}, **HX)
    assert response.status_code == 200
    body = response.content.decode()
    assert "<strong>Approve</strong>" in body and "<li>one</li>" in body
    assert "<script>" not in body and 'href="javascript' not in body
    assert "<html" not in body  # the fragment only


def test_without_htmx_it_is_a_page_of_its_own(client: Client, operator: User) -> None:
    client.force_login(operator)
    body = client.post(reverse("ops:instructions_preview"), {"instructions": "*hi*"}).content.decode()
    assert "<em>hi</em>" in body and "<html" in body


def test_empty_instructions_say_so(client: Client, operator: User) -> None:
    client.force_login(operator)
    body = client.post(reverse("ops:instructions_preview"), {"instructions": "  "}, **HX).content.decode()
    assert "reviewers see none" in body


def test_reviewers_get_403_and_get_is_refused(client: Client, reviewer: User, operator: User) -> None:
    client.force_login(reviewer)
    assert client.post(reverse("ops:instructions_preview"), {"instructions": "x"}, **HX).status_code == 403
    client.force_login(operator)
    assert client.get(reverse("ops:instructions_preview")).status_code == 405


def test_it_needs_the_csrf_token(operator: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.post(reverse("ops:instructions_preview"), {"instructions": "x"}, **HX).status_code == 403


def test_the_policy_page_offers_the_preview_beside_the_instructions(client: Client, operator: User) -> None:
    client.force_login(operator)
    body = client.get(reverse("ops:policy")).content.decode()
    assert f'hx-post="{reverse("ops:instructions_preview")}"' in body
    assert body.index('name="instructions"') < body.index('id="instructions-preview"')
