"""The numbers behind the dashboard (stats.py): depth samples, time per mode, rates and their ratio,
the oldest item, audit shares."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from reviewqueue import services, stats
from reviewqueue.models import DepthSample, ModeChange, Queue
from reviewqueue.tasks.periodic import sample_depth

pytestmark = pytest.mark.django_db


def test_it_reads_a_bounded_number_of_depth_samples(db: None) -> None:
    now = timezone.now()
    DepthSample.objects.bulk_create(
        DepthSample(
            created_at=now - timedelta(seconds=5 * i),
            depth=i,
            pending=i,
            claimed=0,
            mode="normal",
            capacity=50,
            step_limit=5,
        )
        for i in range(stats.MAX_DEPTH_POINTS + 200)
    )
    rows = stats.depth_samples(now=now)
    assert len(rows) == stats.MAX_DEPTH_POINTS
    assert rows[-1].depth == 0
    assert rows[0].created_at < rows[-1].created_at


def test_it_splits_time_between_modes(admit_item: Any) -> None:
    now = timezone.now()
    admit_item(now=now - timedelta(hours=2))  # the queue has existed all window long
    Queue.objects.filter(pk=Queue.current().pk).update(mode="normal")
    ModeChange.objects.create(previous="normal", mode="draft", depth=40, created_at=now - timedelta(minutes=30))
    ModeChange.objects.create(previous="draft", mode="normal", depth=15, created_at=now - timedelta(minutes=10))
    spent = stats.mode_durations(timedelta(hours=1), now=now)
    assert spent["draft"] == pytest.approx(20 * 60)
    assert spent["normal"] == pytest.approx(40 * 60)
    assert spent["shedding"] == 0


def test_it_measures_rates_and_their_ratio(reviewer: User, admit_item: Any) -> None:
    for _ in range(4):
        admit_item()
    for _ in range(2):
        item = services.claim(reviewer=reviewer)
        services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    flow = stats.rates(timedelta(minutes=2))
    assert (flow.arrivals, flow.decisions, flow.reviewers) == (4, 2, 1)
    assert flow.ratio == 2.0
    assert flow.arrivals_per_min == 2.0


def test_it_reports_the_oldest_waiting_item(admit_item: Any) -> None:
    now = timezone.now()
    admit_item(now=now - timedelta(minutes=7))
    admit_item(now=now)
    assert stats.oldest_waiting_age(now=now) == pytest.approx(7 * 60)


def test_it_gives_the_reject_share_of_audited_auto_passes(reviewer: User, admit_item: Any) -> None:
    for _ in range(4):
        admit_item(label="sampled", cutoff_reason="sampled")
    for approve in (False, True, True, True):
        item = services.claim(reviewer=reviewer)
        services.decide(item_id=item.pk, reviewer=reviewer, approve=approve, reason_label="" if approve else "unclear")
    audit = stats.audit_reject_share()
    assert (audit.rejected, audit.n, audit.share) == (1, 4, 0.25)
    assert 0 < audit.low < 0.25 < audit.high < 1
    assert stats.approve_rate().n == 0  # audits of auto-passes do not tune


def test_it_samples_depth_and_prunes_old_samples(admit_item: Any) -> None:
    old = DepthSample.objects.create(depth=1, pending=1, claimed=0, mode="normal", capacity=50, step_limit=5)
    DepthSample.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=8))
    admit_item()
    assert sample_depth() == 1
    assert sample_depth() == 1
    assert not DepthSample.objects.filter(pk=old.pk).exists()
    assert list(DepthSample.objects.values_list("depth", flat=True)) == [1, 1]


def test_it_counts_mode_time_only_since_the_queue_existed(admit_item: Any) -> None:
    start = timezone.now() - timedelta(minutes=10)
    admit_item(now=start)
    durations = stats.mode_durations(timedelta(hours=24), now=start + timedelta(minutes=10))
    assert sum(durations.values()) == pytest.approx(600, abs=1)
