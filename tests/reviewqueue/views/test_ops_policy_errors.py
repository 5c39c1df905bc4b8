"""Policy errors an operator can act on: plain words, a summary at the top,
help text that states the same rule, and ARIA references that resolve."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from reviewqueue.forms import PolicyForm
from reviewqueue.models import Queue

pytestmark = pytest.mark.django_db


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.described_by: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(str(found["id"]))
        if found.get("aria-describedby"):
            self.described_by.extend(str(found["aria-describedby"]).split())


def _dangling_references(html: str) -> list[str]:
    parser = _Ids()
    parser.feed(html)
    assert parser.described_by, "the page has described fields"
    return [ref for ref in parser.described_by if ref not in parser.ids]


def _form(**overrides: Any) -> dict[str, Any]:
    data = {k: "" if v is None else v for k, v in Queue.current().snapshot().items()}
    data.update(overrides)
    return data


@pytest.mark.parametrize("url", ["ops:policy", "ops:export", "ops:whatif"])
def test_every_aria_describedby_points_at_an_element(client: Client, operator: User, url: str) -> None:
    client.force_login(operator)
    assert _dangling_references(client.get(reverse(url)).content.decode()) == []


def test_every_aria_describedby_resolves_on_a_form_with_errors(client: Client, operator: User) -> None:
    client.force_login(operator)
    response = client.post(reverse("ops:policy"), _form(high_watermark=1.5, capacity=0))
    assert response.status_code == 400
    assert _dangling_references(response.content.decode()) == []


# Interval notation and field names are the code's words, not the operator's.
TECHNICAL = re.compile(r"[\(\[]\s*[\d.]+\s*,\s*[\d.]+\s*[\)\]]|_|<=|>=")


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"high_watermark": 1.5}, "high_watermark"),
        ({"high_watermark": 0}, "high_watermark"),
        ({"low_watermark": 0.9, "high_watermark": 0.5}, "low_watermark"),
        ({"step_limit": 20}, "step_limit"),
        ({"min_step_limit": 9, "max_step_limit": 4, "step_limit": 5}, "max_step_limit"),
        ({"approve_low": 0.9, "approve_high": 0.5}, "approve_low"),
        ({"approve_high": 1.2}, "approve_high"),
        ({"sampling_rate": 1.5}, "sampling_rate"),
        ({"lease_seconds": 5}, "lease_seconds"),
        ({"capacity": 0}, "capacity"),
        ({"capacity": "lots"}, "capacity"),
    ],
)
def test_it_explains_each_broken_rule_in_plain_words(
    client: Client, operator: User, overrides: dict[str, Any], field: str
) -> None:
    client.force_login(operator)
    response = client.post(reverse("ops:policy"), _form(**overrides))
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert list(errors) == [field], errors
    (message,) = errors[field]
    assert message.endswith(".") and message[0].isupper()
    assert not TECHNICAL.search(message), message
    body = response.content.decode()
    summary = body.split('id="error-summary"')[1].split("</div>")[0]
    assert f'href="#id_{field}"' in summary
    assert message.replace("'", "&#x27;") in summary


def test_the_help_text_states_the_rule_the_error_enforces() -> None:
    help_texts = PolicyForm.Meta.help_texts
    shared_words = {
        "high_watermark": ("more than 0", "at most 1"),
        "low_watermark": ("below the high watermark",),
        "step_limit": ("from the lowest", "to the highest"),
        "approve_low": ("below the upper rate",),
        "sampling_rate": ("from 0 to 1",),
        "lease_seconds": ("10 seconds",),
    }
    bad = {
        "high_watermark": {"high_watermark": 2},
        "low_watermark": {"low_watermark": 0.9, "high_watermark": 0.5},
        "step_limit": {"step_limit": 20, "min_step_limit": 3, "max_step_limit": 15},
        "approve_low": {"approve_low": 0.9, "approve_high": 0.5},
        "sampling_rate": {"sampling_rate": 2},
        "lease_seconds": {"lease_seconds": 1},
    }
    for field, words in shared_words.items():
        message = PolicyForm.rule_errors(bad[field])[field]
        for word in words:
            assert word in help_texts[field].lower(), (field, word)
            assert word in message.lower(), (field, word)


def test_the_summary_comes_first_in_the_form(client: Client, operator: User) -> None:
    client.force_login(operator)
    body = client.post(reverse("ops:policy"), _form(capacity=0)).content.decode()
    form = body.split('class="card policy-form"')[1]
    assert form.index('id="error-summary"') < form.index("Watermarks are shares of capacity")
    assert form.count('id="error-summary"') == 1
