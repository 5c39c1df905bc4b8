"""/metrics: the queue's numbers in Prometheus format, for a metrics token or a signed-in operator
only."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from reviewqueue import services
from reviewqueue.models import Queue
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
    default = ("queue", "default")
    assert samples[("reviewqueue_depth", (default,))] == 2
    assert samples[("reviewqueue_capacity", (default,))] == 2
    assert samples[("reviewqueue_arrivals_total", (default,))] == 3
    assert samples[("reviewqueue_shed_total", (("priority", "0"), default))] == 1
    assert samples[("reviewqueue_mode", (("mode", "normal"), default))] == 0
    assert samples[("reviewqueue_step_limit", (default,))] == 5
    assert ("reviewqueue_lease_expiries_total", (default,)) in samples
    assert ("reviewqueue_decisions_total", (("decision", "approve"), default)) in samples


def test_it_counts_decisions_and_the_approve_rate(
    client: Client, operator: User, reviewer: User, admit_item: Any, settings: Any
) -> None:
    admit_item()
    item = services.claim(reviewer=reviewer)
    services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    settings.REVIEWQUEUE_UNDO_SECONDS = 0  # the verdict is final: it counts
    client.force_login(operator)
    samples = _samples(client.get("/metrics").content.decode())
    default = ("queue", "default")
    assert samples[("reviewqueue_decisions_total", (("decision", "approve"), default))] == 1
    assert samples[("reviewqueue_approve_rate", (default,))] == 1.0


@pytest.mark.parametrize("approve", [True, False])
def test_a_verdict_counts_only_once_final_so_an_undo_takes_no_count_back(
    client: Client, metrics_token: str, reviewer: User, admit_item: Any, settings: Any, approve: bool
) -> None:
    settings.REVIEWQUEUE_UNDO_SECONDS = 60
    admit_item()
    item = services.claim(reviewer=reviewer)
    services.decide(item_id=item.pk, reviewer=reviewer, approve=approve, reason_label="unclear")
    decision, status = ("approve", "approved") if approve else ("reject", "rejected")
    default = ("queue", "default")

    def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        return _samples(client.get("/metrics", headers={"Authorization": f"Bearer {metrics_token}"}).content.decode())

    inside = scrape()
    assert inside[("reviewqueue_decisions_total", (("decision", decision), default))] == 0
    assert inside[("reviewqueue_items", (default, ("status", status)))] == 0
    assert inside[("reviewqueue_items", (default, ("status", "claimed")))] == 1
    assert inside[("reviewqueue_approve_rate", (default,))] != inside[("reviewqueue_approve_rate", (default,))]  # NaN
    services.undo(reviewer=reviewer)
    assert scrape()[("reviewqueue_decisions_total", (("decision", decision), default))] == 0
    services.decide(item_id=item.pk, reviewer=reviewer, approve=approve, reason_label="unclear")
    settings.REVIEWQUEUE_UNDO_SECONDS = 0
    final = scrape()
    assert final[("reviewqueue_decisions_total", (("decision", decision), default))] == 1
    assert final[("reviewqueue_items", (default, ("status", status)))] == 1


def test_it_refuses_anonymous_scrapes(client: Client, db: None) -> None:
    response = client.get("/metrics")
    assert response.status_code == 401
    assert "reviewqueue_depth" not in response.content.decode()
    # JSON in the API's error shape, as every other refusal a producer reads.
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"] == "unauthorized" and response.json()["fields"] == {}


def test_it_refuses_a_producer_token_without_the_metrics_right(client: Client, db: None) -> None:
    plain = issue_token(name="producer", scopes=["outputs", "tasks"])[1]
    assert client.get("/metrics", headers={"Authorization": f"Bearer {plain}"}).status_code == 403


def test_it_refuses_a_bad_token(client: Client, db: None) -> None:
    response = client.get("/metrics", headers={"Authorization": "Bearer rq_nope_nope"})
    assert response.status_code == 401 and response.json()["error"] == "unauthorized"


def test_it_refuses_a_signed_in_reviewer(client: Client, reviewer: User) -> None:
    client.force_login(reviewer)
    assert client.get("/metrics").status_code == 403


def _queue_labels(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str) -> dict[str, float]:
    return {dict(labels)["queue"]: value for (metric, labels), value in samples.items() if metric == name}


def test_each_queue_has_its_own_series(client: Client, operator: User, admit_item: Any) -> None:
    services.create_queue(user=None, slug="team-a", settings={"capacity": 7})
    admit_item(queue="team-a")
    admit_item(queue="team-a")
    admit_item()
    client.force_login(operator)
    samples = _samples(client.get("/metrics").content.decode())
    assert _queue_labels(samples, "reviewqueue_depth") == {"default": 1, "team-a": 2}
    assert _queue_labels(samples, "reviewqueue_capacity") == {"default": 50, "team-a": 7}
    assert samples[("reviewqueue_arrivals_total", (("queue", "team-a"),))] == 2


def test_it_labels_at_most_the_limit_of_queues_and_sums_the_rest(
    client: Client, operator: User, admit_item: Any
) -> None:
    from reviewqueue.selectors.metrics import METRICS_MAX_QUEUES

    for i in range(METRICS_MAX_QUEUES + 3):
        services.create_queue(user=None, slug=f"q{i:03d}", settings={"capacity": 10})
    # The deepest queue sorts last by slug, yet it is labelled: depth comes first.
    services.create_queue(user=None, slug="zz-deep", settings={"capacity": 10})
    admit_item(queue="zz-deep")
    admit_item(queue="zz-deep")
    services.create_queue(user=None, slug="zz-gone", settings={"capacity": 10})
    services.archive_queue(queue=Queue.objects.get(slug="zz-gone"), user=None)
    client.force_login(operator)
    samples = _samples(client.get("/metrics").content.decode())
    depth = _queue_labels(samples, "reviewqueue_depth")
    assert len(depth) == METRICS_MAX_QUEUES + 1  # the labelled queues and _other
    assert depth["zz-deep"] == 2
    assert "zz-gone" not in depth  # archived, nothing waiting
    # default and zz-deep, then q000... by slug: the last five q-queues are summed.
    capacity = _queue_labels(samples, "reviewqueue_capacity")
    assert capacity["_other"] == 5 * 10
    assert "q052" not in capacity and "q047" in capacity
    assert samples[("reviewqueue_mode", (("mode", "normal"), ("queue", "_other")))] == 5
    assert ("reviewqueue_step_limit", (("queue", "_other"),)) not in samples


def test_an_archived_queue_with_waiting_items_keeps_its_series(client: Client, operator: User, admit_item: Any) -> None:
    queue = services.create_queue(user=None, slug="old-team")
    admit_item(queue="old-team")
    services.archive_queue(queue=queue, user=None)
    client.force_login(operator)
    samples = _samples(client.get("/metrics").content.decode())
    assert samples[("reviewqueue_depth", (("queue", "old-team"),))] == 1
