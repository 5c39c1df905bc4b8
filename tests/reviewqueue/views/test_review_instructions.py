"""The queue's reviewer instructions: written by operators on the policy
page, shown to reviewers."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from reviewqueue.models import PolicyAudit, Queue

pytestmark = pytest.mark.django_db


def _form(**overrides: Any) -> dict[str, Any]:
    data = {k: "" if v is None else v for k, v in Queue.current().snapshot().items()}
    data.update(overrides)
    return data


def test_it_lets_an_operator_write_the_instructions_and_audits_them(client, operator, reviewer):
    client.force_login(operator)
    text = "**Approve** only code you would merge.\n\n<script>alert(1)</script>"
    response = client.post(reverse("ops:policy"), _form(instructions=text))
    assert response.status_code == 302
    assert Queue.current().instructions == text
    assert "instructions" in PolicyAudit.objects.get().changes

    client.force_login(reviewer)
    body = client.get(reverse("review:queue")).content.decode()
    assert "<strong>Approve</strong> only code you would merge." in body
    assert "<script>alert(1)" not in body


def test_it_offers_the_instructions_on_the_policy_form_with_help(client, operator):
    client.force_login(operator)
    body = client.get(reverse("ops:policy")).content.decode()
    assert 'name="instructions"' in body
    assert "Reviewer instructions (Markdown)" in body
    assert "HTML is shown as text" in body


def test_it_refuses_instructions_that_are_too_long_and_keeps_the_old_ones(client, operator):
    client.force_login(operator)
    before = Queue.current().instructions
    response = client.post(reverse("ops:policy"), _form(instructions="x" * 10_001))
    assert response.status_code == 400
    assert "instructions" in response.context["form"].errors
    assert Queue.current().instructions == before
    assert not PolicyAudit.objects.exists()


def test_it_lets_instructions_be_empty(client, operator, reviewer):
    client.force_login(operator)
    assert client.post(reverse("ops:policy"), _form(instructions="")).status_code == 302
    client.force_login(reviewer)
    assert client.get(reverse("review:queue")).status_code == 200


def test_it_records_no_change_when_the_browser_sends_the_same_text_with_crlf(client, operator):
    client.force_login(operator)
    same = Queue.current().instructions.replace("\n", "\r\n")
    assert client.post(reverse("ops:policy"), _form(instructions=same)).status_code == 302
    assert not PolicyAudit.objects.exists()


def test_the_instructions_of_the_cards_queue_are_on_the_page_once(client, reviewer, admit_item):
    Queue.objects.filter(pk=Queue.current().pk).update(instructions="Judge **kindly**.")
    admit_item()
    client.force_login(reviewer)
    client.post(reverse("review:next"))
    body = client.get(reverse("review:queue")).content.decode()
    shortcuts = body.index('id="shortcuts"')
    assert body[:shortcuts].count("Judge <strong>kindly</strong>.") == 1, "the card and the side panel both"
    assert 'id="card-instructions"' in body
