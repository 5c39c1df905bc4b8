"""What operators see of webhooks: the deliveries page (filters, pagination,
redeliver over htmx with CSRF), failing endpoints on the dashboard, the
admin's redeliver action, the /metrics series, and a reviewer refused."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from reviewqueue.models import WebhookDelivery

pytestmark = pytest.mark.django_db

GOOD = "https://good.example.com/hook"
BAD = "https://bad.example.com/hook"


def delivery(n: int, url: str = GOOD, **fields: Any) -> WebhookDelivery:
    now = timezone.now()
    defaults: dict[str, Any] = {
        "event_id": f"evt_{n:04d}",
        "event_type": "item.decided",
        "url": url,
        "producer": "acme",
        "ordering_key": f"item:{n}",
        "body": "{}",
        "created_at": now - timedelta(seconds=n),
    }
    return WebhookDelivery.objects.create(**{**defaults, **fields})


@pytest.fixture
def signed_in(client: Client, operator: Any) -> Client:
    client.force_login(operator)
    return client


@pytest.fixture
def announced(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sent: list[int] = []
    monkeypatch.setattr("reviewqueue.webhooks.announce", sent.append)
    return sent


def test_the_page_lists_deliveries_and_filters_by_status_and_url(signed_in: Client) -> None:
    delivery(1, status="delivered", attempts=1, last_status_code=204)
    delivery(2, url=BAD, status="failed", attempts=30, last_status_code=500, last_error="HTTP 500: boom")
    delivery(3, url=BAD, attempts=2, last_error="ConnectError: refused")
    page = signed_in.get(reverse("ops:deliveries")).content.decode()
    assert all(f"evt_000{n}" in page for n in (1, 2, 3))
    failed = signed_in.get(reverse("ops:deliveries"), {"status": "failed"}).content.decode()
    assert "evt_0002" in failed and "evt_0001" not in failed and "evt_0003" not in failed
    assert "HTTP 500" in failed and "boom" in failed and "gave up" in failed
    bad = signed_in.get(reverse("ops:deliveries"), {"url": BAD}).content.decode()
    assert "evt_0002" in bad and "evt_0003" in bad and "evt_0001" not in bad
    assert "ConnectError: refused" in bad


def test_the_page_paginates_keeping_the_filter(signed_in: Client) -> None:
    for n in range(1, 56):
        delivery(n, url=BAD)
    delivery(99, url=GOOD)
    first = signed_in.get(reverse("ops:deliveries"), {"url": BAD}).content.decode()
    assert "page 1 of 2" in first and "evt_0001" in first and "evt_0055" not in first
    assert "url=https%3A%2F%2Fbad.example.com%2Fhook&amp;page=2" in first
    second = signed_in.get(reverse("ops:deliveries"), {"url": BAD, "page": 2}).content.decode()
    assert "evt_0055" in second and "evt_0099" not in second


def test_redeliver_over_htmx_sends_the_same_event_again(signed_in: Client, announced: list[int]) -> None:
    row = delivery(1, url=BAD, status="failed", attempts=30)
    url = reverse("ops:delivery_redeliver", args=[row.pk])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("django.db.transaction.on_commit", lambda fn, *a, **k: fn())
        response = signed_in.post(url, headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    assert f'id="delivery-{row.pk}"' in html and "queued" in html and "<html" not in html
    row.refresh_from_db()
    assert (row.status, row.event_id, row.attempts) == ("pending", "evt_0001", 30)
    assert announced == [row.pk]


def test_redeliver_needs_csrf(operator: Any) -> None:
    row = delivery(1, status="delivered")
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.post(reverse("ops:delivery_redeliver", args=[row.pk])).status_code == 403
    assert WebhookDelivery.objects.get(pk=row.pk).status == "delivered"


def test_a_reviewer_is_refused_the_page_and_redeliver(client: Client, reviewer: Any, announced: list[int]) -> None:
    row = delivery(1, url=BAD, status="failed", attempts=30, last_error="HTTP 500: boom")
    client.force_login(reviewer)
    page = client.get(reverse("ops:deliveries"))
    assert page.status_code == 403 and "evt_0001" not in page.content.decode()
    url = reverse("ops:delivery_redeliver", args=[row.pk])
    assert client.post(url).status_code == 403
    assert client.post(url, headers={"HX-Request": "true"}).status_code == 403
    assert WebhookDelivery.objects.get(pk=row.pk).status == "failed"
    assert announced == []


def test_the_dashboard_names_failing_endpoints_with_a_link_to_their_deliveries(signed_in: Client) -> None:
    delivery(1, status="delivered", attempts=1)
    delivery(2, url=BAD, status="failed", attempts=30, last_attempt_at=timezone.now(), last_error="HTTP 500: boom")
    delivery(3, url=BAD, attempts=3, last_attempt_at=timezone.now() - timedelta(minutes=1))
    page = signed_in.get(reverse("ops:dashboard")).content.decode()
    section = page.split('id="failing-endpoints"')[1].split("</div>\n  <p")[0]
    assert BAD in section and GOOD not in section
    assert "?url=https%3A//bad.example.com/hook" in section or "?url=https%3A%2F%2Fbad.example.com%2Fhook" in section
    assert "boom" in section


def test_an_old_give_up_is_no_longer_failing(signed_in: Client) -> None:
    delivery(2, url=BAD, status="failed", attempts=30, last_attempt_at=timezone.now() - timedelta(days=2))
    page = signed_in.get(reverse("ops:dashboard")).content.decode()
    assert "Every webhook endpoint is answering" in page


def test_metrics_count_deliveries_by_outcome_and_their_latency(signed_in: Client) -> None:
    now = timezone.now()
    delivery(1, status="delivered", created_at=now - timedelta(seconds=10), delivered_at=now - timedelta(seconds=9.8))
    delivery(2, status="delivered", created_at=now - timedelta(seconds=100), delivered_at=now - timedelta(seconds=50))
    delivery(3, status="failed", attempts=3)
    delivery(4, attempts=2)
    body = signed_in.get("/metrics").content.decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }
    assert samples[("reviewqueue_webhook_deliveries", (("status", "delivered"),))] == 2
    assert samples[("reviewqueue_webhook_deliveries", (("status", "failed"),))] == 1
    assert samples[("reviewqueue_webhook_deliveries", (("status", "pending"),))] == 1
    assert samples[("reviewqueue_webhook_attempts_total", ())] == 5
    assert samples[("reviewqueue_webhook_delivery_seconds_bucket", (("le", "0.25"),))] == 1
    assert samples[("reviewqueue_webhook_delivery_seconds_bucket", (("le", "30"),))] == 1
    assert samples[("reviewqueue_webhook_delivery_seconds_bucket", (("le", "60"),))] == 2
    assert samples[("reviewqueue_webhook_delivery_seconds_count", ())] == 2
    assert samples[("reviewqueue_webhook_delivery_seconds_sum", ())] == pytest.approx(50.2, abs=0.01)


def test_the_admin_lists_deliveries_read_only_and_redelivers_with_its_action(
    client: Client, make_user: Any, announced: list[int]
) -> None:
    staff = make_user("ada", "operator")
    staff.is_staff = True
    staff.save()
    client.force_login(staff)
    row = delivery(1, status="failed", attempts=30)
    changelist = reverse("admin:reviewqueue_webhookdelivery_changelist")
    assert "evt_0001" in client.get(changelist).content.decode()
    assert client.get(reverse("admin:reviewqueue_webhookdelivery_add")).status_code == 403
    response = client.post(changelist, {"action": "redeliver", "_selected_action": [row.pk]}, follow=True)
    assert "1 event(s) will be sent again" in response.content.decode()
    assert WebhookDelivery.objects.get(pk=row.pk).status == "pending"


def test_the_token_admin_refuses_a_webhook_host_not_allowed(client: Client, admin_user: Any, settings: Any) -> None:
    from reviewqueue.tokens import issue_token

    settings.WEBHOOK_ALLOWED_HOSTS = ["hooks.example.com"]
    token, _ = issue_token(name="acme", scopes=["outputs"])
    client.force_login(admin_user)
    url = reverse("admin:reviewqueue_apitoken_change", args=[token.pk])
    form = {"name": "acme", "scopes": ["outputs"], "webhook_url": "http://169.254.169.254/latest"}
    assert "are not allowed" in client.post(url, form).content.decode()
    form["webhook_url"] = "https://hooks.example.com/rq"
    assert client.post(url, form).status_code == 302
    token.refresh_from_db()
    assert token.webhook_url == "https://hooks.example.com/rq"


def test_a_delivery_names_its_item_as_everything_else_does(signed_in: Client, admit_item: Any) -> None:
    item = admit_item().item
    delivery(1, item=item)
    body = signed_in.get(reverse("ops:deliveries")).content.decode()
    assert f"item #{item.pk}" in body
    assert f"item {item.pk}<" not in body
