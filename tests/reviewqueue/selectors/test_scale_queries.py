"""The hot paths send a fixed number of queries, whatever the history holds.

Latency at scale is measured in bench/bench_scale.py; these pin the query
counts so a loop over rows (an N+1) cannot slip in unnoticed. Each count is
taken with decided history present, so a query per history row would show.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reviewqueue import services
from reviewqueue.services import routing

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(reviewer: Any, admit_item: Callable[..., Any]) -> None:
    """Twelve decided items (some sampled, some rejected) and five pending."""
    for i in range(12):
        admit_item(label="sampled" if i % 3 == 0 else "unverified")
        item = services.claim(reviewer=reviewer)
        approve = i % 4 != 0
        services.decide(item_id=item.pk, reviewer=reviewer, approve=approve, reason_label="" if approve else "unclear")
    for _ in range(5):
        admit_item()


def test_it_claims_in_a_fixed_number_of_queries(
    history: None, reviewer: Any, django_assert_max_num_queries: Any
) -> None:
    with django_assert_max_num_queries(8):
        assert services.claim(reviewer=reviewer) is not None


def test_it_decides_in_a_fixed_number_of_queries(
    history: None, reviewer: Any, django_assert_max_num_queries: Any
) -> None:
    item = services.claim(reviewer=reviewer)
    with django_assert_max_num_queries(12):
        services.decide(item_id=item.pk, reviewer=reviewer, approve=True)


def test_it_admits_in_a_fixed_number_of_queries(
    history: None, admit_item: Callable[..., Any], django_assert_max_num_queries: Any
) -> None:
    routing.resolve(None, producer="", task_kind="", priority=1, task_id="")  # kept per process, as in steady flow
    with django_assert_max_num_queries(8):
        assert admit_item().outcome == "enqueued"


def test_it_renders_the_review_page_in_a_fixed_number_of_queries(
    history: None, reviewer: Any, client: Any, django_assert_max_num_queries: Any
) -> None:
    services.claim(reviewer=reviewer)
    client.force_login(reviewer)
    with django_assert_max_num_queries(12):
        assert client.get("/review/").status_code == 200


def test_it_renders_the_dashboard_in_a_fixed_number_of_queries(
    history: None, operator: Any, client: Any, django_assert_max_num_queries: Any
) -> None:
    client.force_login(operator)
    # Up to 40 for the dashboard itself; the review-quality panel reads the
    # cached report (one query), and on a miss also makes the report's own
    # fixed set of queries (reviewqueue/agreement.py) and writes it back.
    with django_assert_max_num_queries(55):
        assert client.get("/ops/").status_code == 200
