"""/ops/alerts/ and its channels page: operators only, secrets masked, a
bad channel refused with a 400 naming the field, a test sent to a real SMTP
server, an acknowledgement recorded once."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from reviewqueue.models import Alert, AlertChannel, PolicyAudit

pytestmark = pytest.mark.django_db


def test_reviewers_are_kept_out(client: Client, reviewer: User) -> None:
    client.force_login(reviewer)
    assert client.get("/ops/alerts/").status_code == 403
    assert client.get("/ops/alerts/channels/").status_code == 403


def test_it_adds_a_channel_masks_its_secret_and_audits_it(client: Client, operator: User) -> None:
    client.force_login(operator)
    url = "json://bot:hunter2secret@127.0.0.1:9/hook"
    response = client.post("/ops/alerts/channels/", {"name": "ops chat", "kind": "apprise", "url": url})
    assert response.status_code == 302
    page = client.get("/ops/alerts/channels/").content.decode()
    assert "ops chat" in page and "hunter2secret" not in page
    assert AlertChannel.objects.get().url == url
    assert PolicyAudit.objects.get().user == operator
    assert "hunter2secret" not in client.get("/ops/policy/").content.decode()


def test_a_bad_channel_is_a_400_naming_the_field(client: Client, operator: User) -> None:
    client.force_login(operator)
    response = client.post("/ops/alerts/channels/", {"name": "x", "kind": "apprise", "url": "nonsense"})
    assert response.status_code == 400
    assert "url" in response.context["form"].errors
    response = client.post("/ops/alerts/channels/", {"name": "x", "kind": "webhook", "producer": "nobody"})
    assert response.status_code == 400 and "producer" in response.context["form"].errors
    assert not AlertChannel.objects.exists()


def test_send_a_test_reaches_the_smtp_server(client: Client, operator: User, mailbox: Any) -> None:
    client.force_login(operator)
    client.post("/ops/alerts/channels/", {"name": "mail", "kind": "apprise", "url": mailbox.apprise_url})
    channel = AlertChannel.objects.get()
    response = client.post(f"/ops/alerts/channels/{channel.pk}/test/", follow=True)
    assert "Test sent to mail" in response.content.decode()
    assert len(mailbox.messages) == 1 and "A test of the alert channel mail" in mailbox.messages[0]
    test = Alert.objects.get(kind="test")
    assert test.deliveries[0]["ok"] is True
    assert "mail (apprise): sent" in client.get("/ops/alerts/").content.decode()


def test_an_alert_is_acknowledged_once(client: Client, operator: User, make_user: Any) -> None:
    alert = Alert.objects.create(condition="mode", kind="fired", title="t", body="mode draft.")
    client.force_login(operator)
    page = client.get("/ops/alerts/").content.decode()
    assert f'id="alert-{alert.pk}"' in page and "Acknowledge" in page
    response = client.post(f"/ops/alerts/{alert.pk}/acknowledge/", headers={"HX-Request": "true"})
    assert response.status_code == 200 and "otto" in response.content.decode()
    other = make_user("olga", "operator")
    client.force_login(other)
    client.post(f"/ops/alerts/{alert.pk}/acknowledge/")
    alert.refresh_from_db()
    assert alert.acknowledged_by == operator
    assert client.get("/ops/alerts/acknowledge/").status_code == 404
    assert client.get(f"/ops/alerts/{alert.pk}/acknowledge/").status_code == 405
