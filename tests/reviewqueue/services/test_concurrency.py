"""Invariants under real concurrency: threads, each with its own database
connection, against the configured database (PostgreSQL in CI's main run,
the SQLite file on the embedded defaults)."""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from reviewqueue import services
from reviewqueue.models import CircuitBreakerEntry, Judgement, Queue, ReviewItem, Verdict

from .threads import in_threads, row_locked

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def seed_items(n: int) -> None:
    now = timezone.now()
    ReviewItem.objects.bulk_create(
        ReviewItem(
            idempotency_key=f"seed-{i}",
            task_description="t",
            final_output="o",
            cutoff_reason="step_limit",
            priority=i % 4,
            created_at=now - timedelta(seconds=n - i),
        )
        for i in range(n)
    )
    assert services.reconcile_depth() == n  # loaded behind the services' back


def test_twenty_claimers_over_500_items_never_claim_the_same_item(make_user: Any) -> None:
    # One review per item here; double review's claims are tested in test_quality_services.
    services.policy_update(user=None, changes={"capacity": 1000, "double_review_rate": 0})
    seed_items(500)
    reviewers = [make_user(f"r{i}", "reviewer") for i in range(20)]

    def drain(i: int) -> list[int]:
        mine = []
        while (item := services.claim(reviewer=reviewers[i])) is not None:
            mine.append(item.pk)
            services.decide(item_id=item.pk, reviewer=reviewers[i], approve=i % 2 == 0, reason_label="unclear")
        return mine

    per_reviewer = in_threads(20, drain)
    claimed = [pk for mine in per_reviewer for pk in mine]
    doubles = [pk for pk, n in Counter(claimed).items() if n > 1]
    print(f"\n{connection.vendor}: 20 claimers, {len(claimed)} claims, {len(doubles)} double claims")
    assert doubles == []
    assert len(claimed) == 500
    assert Verdict.objects.count() == 500
    assert ReviewItem.objects.filter(status__in=ReviewItem.WAITING).count() == 0
    # the claims were spread over the reviewers, not serialised onto one thread
    assert sum(1 for mine in per_reviewer if mine) > 10


@pytest.mark.double_review
def test_ten_reviewers_double_reviewing_200_items_each_answer_an_item_once(make_user: Any) -> None:
    services.policy_update(user=None, changes={"capacity": 1000, "double_review_rate": 1.0, "gold_rate": 0})
    seed_items(200)
    reviewers = [make_user(f"d{i}", "reviewer") for i in range(10)]

    def drain(i: int) -> int:
        # An answered item comes back for its next round while others still
        # decide, so a reviewer with nothing to claim waits a while for more
        # before leaving (until nothing waits, or 10 s without work).
        answered = idle = 0
        while idle < 500:
            item = services.claim(reviewer=reviewers[i])
            if item is None:
                if not ReviewItem.objects.filter(status__in=ReviewItem.WAITING).exists():
                    break
                idle += 1
                time.sleep(0.02)
                continue
            idle = 0
            # reviewers 0-4 approve everything, 5-9 reject: pairs agree or a third settles
            services.decide(item_id=item.pk, reviewer=reviewers[i], approve=i < 5, reason_label="unclear")
            answered += 1
        return answered

    answered = sum(in_threads(10, drain))
    per_item = Counter(Judgement.objects.values_list("item_id", flat=True))
    pairs = Counter(Judgement.objects.values_list("item_id", "reviewer_id"))
    assert max(pairs.values()) == 1  # no reviewer answered an item twice
    assert answered == Judgement.objects.count() == sum(per_item.values())
    assert set(per_item.values()) <= {2, 3}  # two who agree, or a third to break the tie
    assert Verdict.objects.count() == 200  # with two categories, three answers always settle
    assert set(Verdict.objects.values_list("settled_by", flat=True)) <= {"agreement", "tiebreak"}
    assert ReviewItem.objects.filter(status__in=ReviewItem.WAITING).count() == 0
    assert Queue.current().depth == 0


def test_concurrent_producers_account_for_every_output(db: None) -> None:
    services.policy_update(user=None, changes={"capacity": 40})
    keys = [f"k{i}" for i in range(300)]

    def produce(i: int) -> list[str]:
        # each of 10 producers sends 60 outputs; every key is sent twice overall
        return [
            services.admit(
                idempotency_key=keys[(i * 30 + j) % 300],
                task_description="t",
                final_output="o",
                cutoff_reason="step_limit",
                priority=(i + j) % 3,
            ).outcome
            for j in range(60)
        ]

    outcomes = Counter(o for batch in in_threads(10, produce) for o in batch)
    items = ReviewItem.objects
    print(f"\n{connection.vendor}: {dict(outcomes)}")
    assert outcomes["duplicate"] == 300  # produced = enqueued + shed + duplicates refused
    assert outcomes["enqueued"] + outcomes["shed"] == 300 == items.count()
    assert items.filter(status__in=ReviewItem.WAITING).count() == 40
    # every shed item is in the circuit-breaker log exactly once, and only those
    shed = set(items.filter(status=ReviewItem.Status.SHED).values_list("pk", flat=True))
    logged = list(CircuitBreakerEntry.objects.values_list("item_id", flat=True))
    assert len(shed) == 260 and sorted(logged) == sorted(shed)
    assert Queue.current().mode == "shedding"


def test_every_item_is_in_exactly_one_state_after_mixed_concurrent_work(make_user: Any) -> None:
    services.policy_update(user=None, changes={"capacity": 30})
    reviewers = [make_user(f"m{i}", "reviewer") for i in range(4)]

    def work(i: int) -> None:
        if i < 4:
            for j in range(50):
                services.admit(
                    idempotency_key=f"w{i}-{j}",
                    task_description="t",
                    final_output="o",
                    cutoff_reason="stuck",
                    priority=j % 5,
                )
        else:
            reviewer = reviewers[i - 4]
            for _ in range(30):
                item = services.claim(reviewer=reviewer)
                if item is not None:
                    services.decide(item_id=item.pk, reviewer=reviewer, approve=True)

    in_threads(8, work)
    statuses = Counter(ReviewItem.objects.values_list("status", flat=True))
    assert sum(statuses.values()) == 200
    assert set(statuses) <= {"pending", "claimed", "approved", "shed"}
    assert statuses["approved"] == Verdict.objects.count()
    assert statuses["pending"] + statuses["claimed"] <= 30


def test_shedding_passes_over_an_item_another_transaction_has_locked(admit_item: Any) -> None:
    # decide locks its item before the policy row; admission holds the policy
    # row when it picks what to shed. Were it to wait for an item lock, the two
    # could deadlock: it skips a locked item and sheds the next lowest instead.
    if not connection.features.has_select_for_update_skip_locked:
        pytest.skip("row locks are PostgreSQL's; SQLite serialises writers")
    services.policy_update(user=None, changes={"capacity": 3})
    locked = admit_item(priority=1).item
    next_lowest = admit_item(priority=2).item
    admit_item(priority=3)
    with row_locked("reviewqueue_reviewitem", locked.pk):
        result = admit_item(priority=4)
    assert result.outcome == "enqueued"
    assert result.shed_item is not None and result.shed_item.pk == next_lowest.pk
    locked.refresh_from_db()
    assert locked.status == ReviewItem.Status.PENDING
