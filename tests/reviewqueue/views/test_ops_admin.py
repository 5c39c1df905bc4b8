"""The operator's admin: every model readable, only the policy writable (through the service)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from reviewqueue.access import OPERATOR_CHANGES, OPERATOR_READS
from reviewqueue.models import PolicyAudit, Queue, ReviewItem

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_operator(operator: User) -> User:
    operator.is_staff = True
    operator.save()
    return operator


def test_the_operator_sees_every_queue_model_in_the_admin(client: Client, staff_operator: User) -> None:
    client.force_login(staff_operator)
    body = client.get("/admin/").content.decode()
    assert "You don’t have permission to view or edit anything" not in body
    for model in (*OPERATOR_READS, *OPERATOR_CHANGES):
        assert f'href="/admin/reviewqueue/{model}/"' in body, model
        assert client.get(f"/admin/reviewqueue/{model}/").status_code == 200, model


def test_the_operator_reads_items_but_cannot_write_them(client: Client, staff_operator: User, admit_item: Any) -> None:
    item = admit_item().item
    client.force_login(staff_operator)
    page = client.get(f"/admin/reviewqueue/reviewitem/{item.pk}/change/")
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()
    client.post(f"/admin/reviewqueue/reviewitem/{item.pk}/change/", {"status": "approved"})
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.PENDING
    assert client.post(f"/admin/reviewqueue/reviewitem/{item.pk}/delete/", {"post": "yes"}).status_code == 403
    assert ReviewItem.objects.filter(pk=item.pk).exists()


def test_the_operator_changes_the_policy_in_the_admin_with_an_audit(client: Client, staff_operator: User) -> None:
    queue = Queue.current()
    client.force_login(staff_operator)
    url = f"/admin/reviewqueue/queue/{queue.pk}/change/"
    form = client.get(url).context["adminform"].form
    data = {name: form.initial[name] for name in Queue.EDITABLE_FIELDS if form.initial.get(name) is not None}
    data.update(name=queue.name, open_to_all="on", capacity=60)
    response = client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Queue.current().capacity == 60
    assert PolicyAudit.objects.filter(user=staff_operator).exists()


def test_the_operator_cannot_see_tokens_or_users(client: Client, staff_operator: User) -> None:
    client.force_login(staff_operator)
    assert client.get("/admin/reviewqueue/apitoken/").status_code == 403
    assert client.get("/admin/auth/user/").status_code == 403
