"""Filter rules: seen before enabled, confirmed, and proposed only where a gate fits."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from reviewqueue import services
from reviewqueue.models import FilterRule, LabelCount, Queue, ReasonLabel, ReviewItem
from reviewqueue.policy import FILTER_GATES, proposed_filter_rules
from reviewqueue.stats import gate_preview

pytestmark = pytest.mark.django_db


@pytest.fixture
def mixed_outputs(admit_item: Any, reviewer: User) -> list[ReviewItem]:
    good = "def f(n):\n    return n + 1\n"
    broken = "def f(n):\n    return n +\n"
    items = [admit_item(final_output=out).item for out in (good, broken, good, broken, broken)]
    # The reviewer approved the first broken one: a gate would have lost it.
    services.claim(reviewer=reviewer)
    first = ReviewItem.objects.filter(status=ReviewItem.Status.CLAIMED).get()
    assert first.pk == items[0].pk
    services.decide(item_id=first.pk, reviewer=reviewer, approve=True)
    services.claim(reviewer=reviewer)
    second = ReviewItem.objects.filter(status=ReviewItem.Status.CLAIMED).get()
    services.decide(item_id=second.pk, reviewer=reviewer, approve=True)
    return items


def test_the_preview_counts_what_the_gate_would_have_filtered(mixed_outputs: list[ReviewItem]) -> None:
    preview = gate_preview("python_syntax")
    assert (preview.checked, preview.filtered) == (5, 3)
    assert preview.filtered_approved == 1
    assert [pk for pk, _, _ in preview.examples] == [mixed_outputs[4].pk, mixed_outputs[3].pk, mixed_outputs[1].pk]


def test_the_preview_reads_only_the_newest_items(mixed_outputs: list[ReviewItem]) -> None:
    assert gate_preview("python_syntax", limit=2).checked == 2


def test_enabling_without_confirmation_shows_the_preview_instead(
    client: Client, operator: User, mixed_outputs: list[ReviewItem]
) -> None:
    rule = FilterRule.objects.create(label="code_error", gate="python_syntax", description="code must parse")
    client.force_login(operator)
    response = client.post(reverse("ops:rule_decide", args=[rule.pk, "enable"]))
    assert response.status_code == 302
    assert response["Location"] == reverse("ops:rule_preview", args=[rule.pk])
    rule.refresh_from_db()
    assert rule.status == FilterRule.Status.PROPOSED
    body = client.get(response["Location"]).content.decode()
    assert "Of the last <strong>5</strong> items that reached the queue" in body
    assert '<strong id="preview-filtered">3</strong>' in body
    assert "1 of them was approved by a reviewer" in body


def test_enabling_with_confirmation_enables(client: Client, operator: User) -> None:
    rule = FilterRule.objects.create(label="code_error", gate="python_syntax", description="code must parse")
    client.force_login(operator)
    response = client.post(reverse("ops:rule_decide", args=[rule.pk, "enable"]), {"confirm": "1"})
    assert response.status_code == 302
    rule.refresh_from_db()
    assert (rule.status, rule.decided_by) == (FilterRule.Status.ENABLED, operator)


def test_the_preview_page_is_for_operators_only(client: Client, reviewer: User) -> None:
    rule = FilterRule.objects.create(label="code_error", gate="python_syntax", description="code must parse")
    client.force_login(reviewer)
    assert client.get(reverse("ops:rule_preview", args=[rule.pk])).status_code == 403


def test_a_logic_error_proposes_no_todo_gate() -> None:
    assert "logic_error" not in FILTER_GATES
    assert all(gate != "no_todo" for gate, _ in FILTER_GATES.values())
    assert proposed_filter_rules({"logic_error": 9, "code_error": 9}, threshold=3) == ["code_error"]


def test_the_dashboard_says_why_a_counted_label_has_no_rule(client: Client, operator: User) -> None:
    LabelCount.objects.create(label="logic_error", count=5)
    client.force_login(operator)
    body = client.get(reverse("ops:dashboard")).content.decode()
    assert 'id="labels-without-gate"' in body
    assert "Logic errors need a demand red line" in body


def test_a_rule_with_an_unknown_gate_cannot_be_enabled(client: Client, operator: User) -> None:
    rule = FilterRule.objects.create(label="code_error", gate="no_such_gate", description="?")
    client.force_login(operator)
    page = client.get(reverse("ops:rule_preview", args=[rule.pk])).content.decode()
    assert 'id="unknown-gate"' in page and 'id="confirm-enable"' not in page
    response = client.post(reverse("ops:rule_decide", args=[rule.pk, "enable"]), {"confirm": "1"})
    assert response.status_code == 400
    rule.refresh_from_db()
    assert rule.status == FilterRule.Status.PROPOSED


# --- enabling and dismissing from the dashboard ----------------------------------------------


def test_it_enables_a_proposed_filter_rule(client: Client, operator: User) -> None:
    rule = FilterRule.objects.create(label="format_issue", gate="well_formed", description="output is well formed")
    client.force_login(operator)
    response = client.post(
        reverse("ops:rule_decide", args=[rule.pk, "enable"]),
        {"confirm": "1"},
        headers={"HX-Request": "true", "HX-Target": "rules"},
    )
    assert response.status_code == 200
    rule.refresh_from_db()
    assert rule.status == FilterRule.Status.ENABLED
    assert rule.decided_by == operator
    assert 'id="rules"' in response.content.decode()


def test_it_dismisses_a_rule_without_htmx_and_redirects(client: Client, operator: User) -> None:
    rule = FilterRule.objects.create(label="unclear", gate="nonempty", description="x")
    client.force_login(operator)
    response = client.post(reverse("ops:rule_decide", args=[rule.pk, "dismiss"]))
    assert response.status_code == 302
    rule.refresh_from_db()
    assert rule.status == FilterRule.Status.DISMISSED


def test_it_refuses_an_unknown_rule_action(client: Client, operator: User) -> None:
    rule = FilterRule.objects.create(label="unclear", gate="nonempty", description="x")
    client.force_login(operator)
    assert client.post(reverse("ops:rule_decide", args=[rule.pk, "delete"])).status_code == 400
    rule.refresh_from_db()
    assert rule.status == FilterRule.Status.PROPOSED


def test_it_never_changes_a_rule_on_get(client: Client, operator: User) -> None:
    rule = FilterRule.objects.create(label="unclear", gate="nonempty", description="x")
    client.force_login(operator)
    assert client.get(reverse("ops:rule_decide", args=[rule.pk, "enable"])).status_code == 405
    rule.refresh_from_db()
    assert rule.status == FilterRule.Status.PROPOSED


def test_the_dashboard_names_labels_in_words_and_shows_no_zero_count(client: Client, operator: User) -> None:
    LabelCount.objects.create(label="logic_error", count=5)
    LabelCount.objects.create(label="format_issue", count=0)
    client.force_login(operator)
    body = client.get(reverse("ops:dashboard")).content.decode()
    words = dict(ReasonLabel.choices)
    assert f'<span class="badge">{words["logic_error"]}: 5</span>' in body
    assert "logic_error" not in body.split('id="labels-without-gate"')[1].split("</p>")[0]
    assert words["format_issue"] + ": 0" not in body and "format_issue: 0" not in body


def test_the_dashboard_names_labels_in_words_and_shows_no_empty_count(client: Client, operator: User) -> None:
    FilterRule.objects.create(
        queue=Queue.default(), label="code_error", gate="python_syntax", description="code must parse"
    )
    LabelCount.objects.create(queue=Queue.default(), label="code_error", count=3)
    LabelCount.objects.create(queue=Queue.default(), label="format_issue", count=0)
    client.force_login(operator)
    body = client.get("/ops/").content.decode()
    section = body.split("Rejection labels and proposed filter rules")[1]
    assert "code_error" not in section and "format_issue" not in section
    assert "code error: 3" in section and "format issue" not in section
