"""The number of reason labels is said once, by ReasonLabel: the page renders
it (the radios, the shortcut list and data-reason-labels, which the keyboard
script reads), and no script or sentence carries a number of its own."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from reviewqueue import policy, services
from reviewqueue.models import ReasonLabel

ROOT = Path(__file__).resolve().parents[3]
COUNT = len(ReasonLabel.choices)


def test_the_labels_are_the_policys() -> None:
    assert tuple(ReasonLabel.values) == policy.REASON_LABELS


def test_the_keyboard_script_names_no_number_of_labels() -> None:
    script = (ROOT / "static" / "review" / "review.js").read_text()
    assert "data-reason-labels" in script
    # A range of digits ([1-5], 1-5) would be a second copy of the count.
    assert not re.search(r"\d-\d", script)


def test_the_page_renders_the_number_of_labels(client: Client, reviewer: User, admit_item: Callable[..., Any]) -> None:
    admit_item()
    services.claim(reviewer=reviewer)
    client.force_login(reviewer)
    page = client.get(reverse("review:queue")).content.decode()
    assert f'data-reason-labels="{COUNT}"' in page
    assert f"<kbd>1</kbd>–<kbd>{COUNT}</kbd>" in page
    assert page.count('name="reason_label"') == COUNT
    assert f'id="reason-{COUNT}"' in page and f'id="reason-{COUNT + 1}"' not in page


def test_a_rejection_without_a_label_names_the_rendered_count(
    client: Client, reviewer: User, admit_item: Callable[..., Any]
) -> None:
    item = admit_item().item
    services.claim(reviewer=reviewer)
    client.force_login(reviewer)
    response = client.post(reverse("review:decide", args=[item.pk]), {"decision": "reject"})
    assert f"pick one of the {COUNT} labels" in response.content.decode()
