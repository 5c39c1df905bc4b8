"""/metrics: the queue's numbers in Prometheus format, for a metrics token or a signed-in operator
only."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from reviewqueue import services
from reviewqueue.tokens import issue_token

pytestmark = pytest.mark.django_db


def _samples(body: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


@pytest.fixture
def metrics_token(db: None) -> str:
    return issue_token(name="prometheus", scopes=["metrics"])[1]


def test_it_serves_queue_metrics_to_a_metrics_token(client: Client, metrics_token: str, admit_item: Any) -> None:
    services.policy_update(user=None, changes={"capacity": 2})
    admit_item(priority=3)
    admit_item(priority=3)
    admit_item(priority=0)
    response = client.get("/metrics", headers={"Authorization": f"Bearer {metrics_token}"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    samples = _samples(response.content.decode())
    assert samples[("reviewqueue_depth", ())] == 2
    assert samples[("reviewqueue_capacity", ())] == 2
    assert samples[("reviewqueue_arrivals_total", ())] == 3
    assert samples[("reviewqueue_shed_total", (("priority", "0"),))] == 1
    assert samples[("reviewqueue_mode", (("mode", "normal"),))] == 0
    assert samples[("reviewqueue_step_limit", ())] == 5
    assert ("reviewqueue_lease_expiries_total", ()) in samples
    assert ("reviewqueue_decisions_total", (("decision", "approve"),)) in samples


def test_it_counts_decisions_and_the_approve_rate(
    client: Client, operator: User, reviewer: User, admit_item: Any
) -> None:
    admit_item()
    item = services.claim(reviewer=reviewer)
    services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    client.force_login(operator)
    samples = _samples(client.get("/metrics").content.decode())
    assert samples[("reviewqueue_decisions_total", (("decision", "approve"),))] == 1
    assert samples[("reviewqueue_approve_rate", ())] == 1.0


def test_it_refuses_anonymous_scrapes(client: Client, db: None) -> None:
    response = client.get("/metrics")
    assert response.status_code == 401
    assert "reviewqueue_depth" not in response.content.decode()


def test_it_refuses_a_producer_token_without_the_metrics_right(client: Client, db: None) -> None:
    plain = issue_token(name="producer", scopes=["outputs", "tasks"])[1]
    assert client.get("/metrics", headers={"Authorization": f"Bearer {plain}"}).status_code == 403


def test_it_refuses_a_bad_token(client: Client, db: None) -> None:
    assert client.get("/metrics", headers={"Authorization": "Bearer rq_nope_nope"}).status_code == 401


def test_it_refuses_a_signed_in_reviewer(client: Client, reviewer: User) -> None:
    client.force_login(reviewer)
    assert client.get("/metrics").status_code == 403
