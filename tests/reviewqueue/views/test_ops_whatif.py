"""The what-if simulator's pages: presets, the ratio rule, runs in the request or on a worker, polling
that stops, comparing runs."""

from __future__ import annotations

import dataclasses
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from reviewqueue import services
from reviewqueue.models import SimulationRun
from reviewqueue.services.simulations import execute_simulation
from reviewqueue.tasks.periodic import run_simulation
from simulation import PRESETS, run_replications

pytestmark = pytest.mark.django_db


def _preset_form(name: str, **overrides: Any) -> dict[str, Any]:
    sc = PRESETS[name]
    data: dict[str, Any] = {
        field: getattr(sc, field)
        for field in (
            "model",
            "production_per_min",
            "review_per_min",
            "reviewers",
            "capacity",
            "duration_min",
            "burst_prob",
            "burst_mult",
            "high_watermark",
            "low_watermark",
        )
    }
    if sc.backpressure:
        data["backpressure"] = "on"
    data.update({"name": f"preset {name}", "replications": 5, "seed": 0, "target_overflow_pct": ""})
    data.update(overrides)
    return data


def test_it_prefills_a_preset(client: Client, operator: User) -> None:
    client.force_login(operator)
    response = client.get(reverse("ops:whatif"), {"preset": "B"})
    assert response.status_code == 200
    assert response.context["form"].initial["production_per_min"] == PRESETS["B"].production_per_min


@pytest.mark.parametrize("name", ["A", "B", "C", "D"])
def test_it_reproduces_each_preset(client: Client, operator: User, name: str) -> None:
    client.force_login(operator)
    response = client.post(reverse("ops:whatif_run"), _preset_form(name))
    assert response.status_code == 302
    run = SimulationRun.objects.get()
    assert run.status == SimulationRun.Status.DONE
    expected = run_replications(PRESETS[name], 5, 0).to_dict()
    assert run.result["overflow_pct"] == pytest.approx(expected["overflow_pct"])
    assert run.result["mean_wait_min"] == pytest.approx(expected["mean_wait_min"])
    page = client.get(response["Location"]).content.decode()
    assert "overflow-pct" in page
    assert "<polyline" in page


def test_it_states_the_ratio_rule_with_the_numbers(client: Client, operator: User) -> None:
    client.force_login(operator)
    response = client.post(reverse("ops:whatif_run"), _preset_form("D"), follow=True)
    body = response.content.decode()
    assert "= <strong>2.00</strong>" in body
    assert "unsustainable" in body


def test_it_recommends_a_production_rate_under_the_target(client: Client, operator: User) -> None:
    client.force_login(operator)
    client.post(reverse("ops:whatif_run"), _preset_form("B", target_overflow_pct=1.0, duration_min=60))
    run = SimulationRun.objects.get()
    recommended = run.result["recommended_production_per_min"]
    assert 0 < recommended < PRESETS["B"].production_per_min


def test_it_names_the_field_of_an_invalid_scenario(client: Client, operator: User) -> None:
    client.force_login(operator)
    response = client.post(reverse("ops:whatif_run"), _preset_form("A", low_watermark=0.9, high_watermark=0.5))
    assert response.status_code == 400
    assert not SimulationRun.objects.exists()
    errors = response.context["form"].errors
    assert set(errors) & {"low_watermark", "high_watermark"}


def test_it_sends_a_long_simulation_to_a_worker(
    client: Client, operator: User, django_capture_on_commit_callbacks: Any
) -> None:
    client.force_login(operator)
    with (
        mock.patch("reviewqueue.services.simulations.dispatch") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = client.post(reverse("ops:whatif_run"), _preset_form("A", replications=300, duration_min=120))
    run = SimulationRun.objects.get()
    delay.assert_called_once_with(run.pk)
    assert run.status == SimulationRun.Status.QUEUED
    page = client.get(response["Location"]).content.decode()
    assert "<progress" in page
    poll = client.get(response["Location"], headers={"HX-Request": "true"})
    assert poll.status_code == 200


def test_it_runs_the_task_once_when_delivered_twice(operator: User) -> None:
    run = SimulationRun.objects.create(
        params={"scenario": PRESETS["C"].to_dict(), "replications": 3, "seed": 1}, progress_total=3
    )
    assert run_simulation(run.pk) == "done"
    first = SimulationRun.objects.get(pk=run.pk)
    assert run_simulation(run.pk) == "done"
    second = SimulationRun.objects.get(pk=run.pk)
    assert first.finished_at == second.finished_at
    assert second.progress_done == second.progress_total == 3


def test_it_stops_polling_when_the_run_is_done(client: Client, operator: User) -> None:
    run = SimulationRun.objects.create(params={"scenario": PRESETS["A"].to_dict(), "replications": 2, "seed": 0})
    execute_simulation(run.pk)
    client.force_login(operator)
    response = client.get(reverse("ops:whatif_result", args=[run.pk]), headers={"HX-Request": "true"})
    assert response.status_code == 286
    assert "overflow-pct" in response.content.decode()


def test_it_marks_a_broken_scenario_failed(operator: User) -> None:
    run = SimulationRun.objects.create(params={"scenario": {"capacity": -3}, "replications": 1})
    assert execute_simulation(run.pk) == "failed"
    run.refresh_from_db()
    assert run.status == SimulationRun.Status.FAILED
    assert run.error


def test_it_fills_rates_from_live_data(client: Client, operator: User, admit_item: Any) -> None:
    for _ in range(30):
        admit_item()
    client.force_login(operator)
    response = client.get(reverse("ops:whatif"), {"live": "1", "window": "15m"})
    assert response.status_code == 200
    initial = response.context["form"].initial
    assert initial["production_per_min"] == 2.0
    assert initial["review_per_min"] == 0.0
    assert "No decisions in this window" in response.content.decode()


def test_it_compares_two_runs_side_by_side(client: Client, operator: User) -> None:
    client.force_login(operator)
    client.post(reverse("ops:whatif_run"), _preset_form("A"))
    client.post(reverse("ops:whatif_run"), _preset_form("B"))
    a, b = SimulationRun.objects.order_by("pk")
    body = client.get(reverse("ops:whatif_compare"), {"a": a.pk, "b": b.pk}).content.decode()
    assert "preset A" in body and "preset B" in body
    assert body.count("overflow-pct") == 2


def test_it_reports_the_sla_figures_of_its_scenario(client: Client, operator: User) -> None:
    client.force_login(operator)
    response = client.post(reverse("ops:whatif_run"), _preset_form("D", sla_minutes=30))
    run = SimulationRun.objects.get()
    expected = run_replications(dataclasses.replace(PRESETS["D"], sla_minutes=30), 5, 0).to_dict()
    assert run.result["sla_attainment"] == pytest.approx(expected["sla_attainment"])
    assert 0 < run.result["sla_attainment"] < 1
    page = client.get(response["Location"]).content.decode()
    assert 'id="sla-attainment"' in page and "within 30 min" in page


def test_live_values_bring_the_queues_sla_and_age_watermark(client: Client, operator: User) -> None:
    services.policy_update(user=None, changes={"sla_minutes": 45, "age_high_minutes": 20, "age_low_minutes": 5})
    client.force_login(operator)
    initial = client.get(reverse("ops:whatif"), {"live": "1", "window": "15m"}).context["form"].initial
    assert (initial["sla_minutes"], initial["age_high_minutes"], initial["age_low_minutes"]) == (45.0, 20.0, 5.0)


def test_a_live_what_if_starts_from_todays_backlog_with_backpressure_on(
    client: Client, operator: User, admit_item: Any
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from reviewqueue.models import ReviewItem

    for _ in range(6):
        admit_item()
    ReviewItem.objects.filter(pk=ReviewItem.objects.order_by("pk").first().pk).update(
        created_at=timezone.now() - timedelta(minutes=42)
    )
    client.force_login(operator)
    response = client.get(reverse("ops:whatif"), {"live": "1", "window": "15m"})
    form = response.context["form"]
    assert form.initial["backpressure"] is True
    assert form.backlog_size == 6
    ages = [float(age) for age in form.initial["initial_ages_min"].split(",")]
    assert len(ages) == 6 and 41.9 <= ages[0] <= 42.1  # oldest first
    body = response.content.decode()
    assert "starts from today's backlog: 6 waiting items" in body
    assert 'name="backpressure"' in body and "checked" in body.split('name="backpressure"')[1].split(">")[0]
    # Run it: the simulated depth starts at the six waiting items.
    data = _preset_form("A", initial_ages_min=form.initial["initial_ages_min"], backpressure="on", replications=2)
    assert client.post(reverse("ops:whatif_run"), data).status_code == 302
    run = SimulationRun.objects.get()
    assert run.params["scenario"]["backpressure"] is True
    assert run.result["depth_series"][0] == 6
    assert (
        "from a backlog of 6 waiting items" in client.get(reverse("ops:whatif_result", args=[run.pk])).content.decode()
    )


def test_a_garbled_backlog_is_refused(client: Client, operator: User) -> None:
    client.force_login(operator)
    response = client.post(reverse("ops:whatif_run"), _preset_form("A", initial_ages_min="1,x"))
    assert response.status_code == 400
    assert not SimulationRun.objects.exists()


def test_the_compared_runs_figures_sit_on_the_same_rows(client: Client, operator: User) -> None:
    client.force_login(operator)
    client.post(reverse("ops:whatif_run"), _preset_form("A", sla_minutes=30))
    client.post(reverse("ops:whatif_run"), _preset_form("B", backpressure="on"))
    a, b = SimulationRun.objects.order_by("pk")
    body = client.get(reverse("ops:whatif_compare"), {"a": a.pk, "b": b.pk}).content.decode()
    table = body.split('id="compare-table"')[1].split("</table>")[0]
    rows = table.split("<tr>")[2:]  # after the header
    assert rows and all(row.count("<td") == 2 for row in rows)  # one cell per run on every row
    assert "Within SLA" in table and "no SLA set" in table
