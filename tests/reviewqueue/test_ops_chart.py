"""The dashboard's depth chart and live region."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from reviewqueue.models import Queue
from reviewqueue.views.ops import depth_chart

pytestmark = pytest.mark.django_db


def test_the_depth_axis_ends_at_capacity(admit_item: Any) -> None:
    admit_item()
    chart = depth_chart(Queue.current(), timezone.now())
    labels = [label for _, label in chart.y_ticks]
    assert labels[-1] == "50"
    assert labels == ["0", "10", "20", "30", "40", "50"]


def test_the_polled_region_is_not_itself_a_live_region(client: Client, operator: User) -> None:
    client.force_login(operator)
    body = client.get(reverse("ops:dashboard")).content.decode()
    live = body.split('<section id="live"')[1].split(">")[0]
    assert "aria-live" not in live
    assert 'data-announce="Mode: normal.' in live
    assert body.count("aria-live") == 1
    assert "{#" not in body and "{% comment" not in body
    assert 'id="live-announcer"' in body
