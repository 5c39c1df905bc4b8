"""The policy settings page: a valid change is saved and audited, a broken rule is refused, reviewers
are kept out."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from reviewqueue import services
from reviewqueue.models import PolicyAudit, Queue

pytestmark = pytest.mark.django_db


def _form(**overrides: Any) -> dict[str, Any]:
    data = {k: "" if v is None else v for k, v in Queue.current().snapshot().items()}
    data.update(overrides)
    return data


def test_it_saves_a_valid_change_and_audits_it(client: Client, operator: User) -> None:
    client.force_login(operator)
    response = client.post(reverse("ops:policy"), _form(capacity=80, lease_seconds=600))
    assert response.status_code == 302
    queue = Queue.current()
    assert (queue.capacity, queue.lease_seconds) == (80, 600)
    audit = PolicyAudit.objects.get()
    assert audit.user == operator
    assert audit.changes == {"capacity": [50, 80], "lease_seconds": [300, 600]}


def test_it_shows_the_audit_log_with_before_and_after(client: Client, operator: User) -> None:
    client.force_login(operator)
    client.post(reverse("ops:policy"), _form(sampling_rate=0.25))
    body = client.get(reverse("ops:policy")).content.decode()
    assert 'id="audit-log"' in body
    assert "0.1 → 0.25" in body
    assert "otto" in body


def test_it_refuses_a_low_watermark_above_the_high_one(client: Client, operator: User) -> None:
    client.force_login(operator)
    response = client.post(reverse("ops:policy"), _form(low_watermark=0.9, high_watermark=0.5))
    assert response.status_code == 400
    assert Queue.current().low_watermark == 0.3
    assert not PolicyAudit.objects.exists()
    assert 'class="error"' in response.content.decode()


def test_it_refuses_a_step_limit_outside_the_tuner_bounds(client: Client, operator: User) -> None:
    client.force_login(operator)
    response = client.post(reverse("ops:policy"), _form(step_limit=20))
    assert response.status_code == 400
    assert "step_limit" in response.context["form"].errors
    assert Queue.current().step_limit == 5


def test_it_refuses_a_sampling_rate_above_one(client: Client, operator: User) -> None:
    client.force_login(operator)
    response = client.post(reverse("ops:policy"), _form(sampling_rate=1.5))
    assert response.status_code == 400
    assert "sampling_rate" in response.context["form"].errors


def test_it_refuses_the_policy_page_to_a_reviewer(client: Client, reviewer: User) -> None:
    client.force_login(reviewer)
    assert client.post(reverse("ops:policy"), _form(capacity=1)).status_code == 403
    assert Queue.current().capacity == 50


def test_it_writes_no_audit_when_nothing_changed(client: Client, operator: User) -> None:
    client.force_login(operator)
    assert client.post(reverse("ops:policy"), _form()).status_code == 302
    assert not PolicyAudit.objects.exists()


def test_a_save_names_only_what_changed_not_the_instructions_a_browser_sent_back_as_crlf(
    client: Client, operator: User
) -> None:
    client.force_login(operator)
    as_a_browser_sends = Queue.current().instructions.replace("\n", "\r\n") + "\r\n"
    response = client.post(reverse("ops:policy"), _form(instructions=as_a_browser_sends, capacity=80), follow=True)
    said = [str(m) for m in response.context["messages"]]
    assert said == ["Policy of Default saved; changed: Capacity (items)."]
    response = client.post(reverse("ops:policy"), _form(instructions=as_a_browser_sends), follow=True)
    assert [str(m) for m in response.context["messages"]] == ["Policy of Default saved; nothing changed."]
    assert list(PolicyAudit.objects.values_list("changes", flat=True)) == [{"capacity": [50, 80]}]


def test_it_sets_the_escalation_delay_and_refuses_a_negative_one(client: Client, operator: User) -> None:
    client.force_login(operator)
    page = client.get(reverse("ops:policy")).content.decode()
    assert 'name="escalation_delay_minutes"' in page
    response = client.post(reverse("ops:policy"), _form(escalation_delay_minutes=-5))
    assert response.status_code == 400
    assert "The delay must be 0 minutes or more" in response.content.decode()
    response = client.post(reverse("ops:policy"), _form(escalation_delay_minutes=20))
    assert response.status_code == 302
    assert Queue.current().escalation_delay_minutes == 20
    assert PolicyAudit.objects.get().changes == {"escalation_delay_minutes": [60.0, 20.0]}


def test_a_checkbox_sits_before_its_label_on_one_line(client: Client, operator: User) -> None:
    client.force_login(operator)
    body = client.get(reverse("ops:policy")).content.decode()
    field = body.split('class="field field-check')[1].split("</div>")[0]
    line = field.split('class="check-line">')[1].split("</span>")[0]
    assert line.index('type="checkbox"') < line.index("<label")
    assert 'name="gold_pause"' in line


def test_the_save_message_and_the_change_log_name_fields_in_words(client: Client, operator: User) -> None:
    """Not 'double_review_rate, gold_rate changed': the words of the form's labels."""
    client.force_login(operator)
    response = client.post(reverse("ops:policy"), _form(double_review_rate=0.5, gold_rate=0.1), follow=True)
    said = [str(m) for m in response.context["messages"]]
    assert said == ["Policy of Default saved; changed: Double-review rate, Gold rate."]
    log = response.content.decode().split('id="audit-log"', 1)[1].split("</table>", 1)[0]
    assert 'title="double_review_rate">Double-review rate</span>: 0.1 → 0.5' in log
    assert 'title="gold_rate">Gold rate</span>: 0.02 → 0.1' in log
    assert "double_review_rate</code>" not in log


def test_the_change_log_reads_a_bulk_action_and_a_switch_in_words(
    client: Client, operator: User, admit_item: Any
) -> None:
    from reviewqueue.selectors.items import ItemFilter
    from reviewqueue.services import bulk

    admit_item(task_description="Needle task")
    services.policy_update(user=operator, changes={"gold_pause": True})
    filters = ItemFilter(q="needle", queue=Queue.default())
    bulk.bulk_apply(
        operator=operator, filters=filters, action="reject", seen=1, reason_label="logic_error", target=None
    )
    client.force_login(operator)
    log = client.get(reverse("ops:policy")).content.decode().split('id="audit-log"', 1)[1].split("</table>", 1)[0]
    assert "{&#x27;" not in log and "{'" not in log, log
    assert "matched 16" not in log and "matched 1" in log and "logic error" in log
    assert "Pause flagged reviewers</span>: off → on" in log
