"""What-if results an operator can read without the source at hand."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from reviewqueue.models import SimulationRun
from reviewqueue.services.simulations import MAX_SIMULATION_EVENTS, execute_simulation, simulation_events
from simulation import PRESET_DESCRIPTIONS

from .test_ops_whatif import _preset_form

pytestmark = pytest.mark.django_db


def _run(client: Client, name: str, **overrides: Any) -> tuple[SimulationRun, str]:
    response = client.post(reverse("ops:whatif_run"), _preset_form(name, **overrides), follow=True)
    return SimulationRun.objects.order_by("-pk").first(), response.content.decode()


def test_it_describes_every_preset(client: Client, operator: User) -> None:
    client.force_login(operator)
    body = client.get(reverse("ops:whatif")).content.decode()
    for name, about in PRESET_DESCRIPTIONS.items():
        assert f'id="preset-{name}-about"' in body
        assert about in body


def test_it_names_the_preset_on_its_result(client: Client, operator: User) -> None:
    client.force_login(operator)
    _, body = _run(client, "D")
    assert PRESET_DESCRIPTIONS["D"] in body


def test_it_reports_draft_and_shedding_time_apart(client: Client, operator: User) -> None:
    client.force_login(operator)
    run, body = _run(client, "B", backpressure="on")
    r = run.result
    assert r["time_in_draft_min"] == pytest.approx(r["mode_minutes"]["draft"])
    assert r["time_shedding_min"] == pytest.approx(r["mode_minutes"]["shedding"])
    assert r["minutes_with_loss"] > 0
    assert "Time in draft mode" in body and "Time in shedding mode" in body


def test_it_explains_losses_with_backpressure_off(client: Client, operator: User) -> None:
    client.force_login(operator)
    form = _preset_form("B")
    form.pop("backpressure", None)
    response = client.post(reverse("ops:whatif_run"), form, follow=True)
    body = response.content.decode()
    run = SimulationRun.objects.get()
    assert run.result["dropped"] > 0
    assert run.result["minutes_with_loss"] > 0
    assert "backpressure is off, so the queue never changes mode" in body
    assert "arrivals refused while the queue was full" in body
    assert "0.0 min" not in body.split('id="at-capacity')[1].split("</tr>")[0]


def test_it_shows_the_final_step_limit_as_a_whole_number(client: Client, operator: User) -> None:
    client.force_login(operator)
    run, body = _run(client, "B", backpressure="on")
    median = run.result["step_limit_final_median"]
    assert isinstance(median, int)
    cell = body.split('class="step-limit-final">')[1].split("<")[0]
    assert cell == str(median)


def test_its_long_run_recommendation_never_exceeds_the_review_rate(client: Client, operator: User) -> None:
    client.force_login(operator)
    run, body = _run(client, "B", target_overflow_pct=1.0)
    r = run.result
    assert 0 < r["stable_production_per_min"] <= 3.0
    # The horizon figure may exceed review: a 120-minute run starts empty. It says so.
    assert r["recommended_production_per_min"] > 3.0
    assert r["horizon_min"] == 120
    assert "For 120 minutes from an empty queue" in body
    assert "only because an empty queue absorbs the surplus" in body


def test_it_refuses_a_run_too_large_to_finish_in_plain_words(client: Client, operator: User) -> None:
    client.force_login(operator)
    response = client.post(reverse("ops:whatif_run"), _preset_form("B", replications=500, duration_min=100_000))
    assert response.status_code == 400
    assert not SimulationRun.objects.exists()
    message = response.context["form"].errors["replications"][0]
    assert "too large to finish in time" in message
    assert "Use at most 5 replications" in message


def test_it_accepts_the_largest_run_allowed(client: Client, operator: User) -> None:
    duration = int(MAX_SIMULATION_EVENTS // (500 * (5 + 3 + 10)))
    assert simulation_events(500, duration, 5, 3) <= MAX_SIMULATION_EVENTS
    form = _preset_form("B", replications=500, duration_min=duration)
    client.force_login(operator)
    from unittest import mock

    with mock.patch("reviewqueue.services.simulations.dispatch"):
        response = client.post(reverse("ops:whatif_run"), form)
    assert response.status_code == 302


def test_it_says_why_a_run_failed_without_a_python_error(client: Client, operator: User) -> None:
    run = SimulationRun.objects.create(params={"scenario": {"capacity": -3}, "replications": 1})
    execute_simulation(run.pk)
    run.refresh_from_db()
    assert run.error.startswith("The scenario is not valid: capacity")
    client.force_login(operator)
    body = client.get(reverse("ops:whatif_result", args=[run.pk])).content.decode()
    assert run.error in body
    assert "ValueError" not in body and "Traceback" not in body


def test_it_says_an_unexpected_error_in_plain_words(operator: User, monkeypatch: pytest.MonkeyPatch) -> None:
    import simulation

    def boom(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("daemonic processes are not allowed to have children")

    monkeypatch.setattr(simulation, "run_replications", boom)
    run = SimulationRun.objects.create(params={"scenario": {}, "replications": 1})
    assert execute_simulation(run.pk) == "failed"
    run.refresh_from_db()
    assert "daemonic" not in run.error
    assert "unexpected error" in run.error


def test_progress_counts_the_replications_asked_for_then_names_the_search(client: Client, operator: User) -> None:
    client.force_login(operator)
    run, _ = _run(client, "B", target_overflow_pct="5")
    assert run.params["replications"] and run.params["target_overflow_pct"] == 5
    reps = run.params["replications"]
    SimulationRun.objects.filter(pk=run.pk).update(status="running", progress_done=1, progress_total=reps + 1)
    body = client.get(reverse("ops:whatif_result", args=[run.pk])).content.decode()
    assert f"Replications done: 1 of {reps}, then the search" in body
    SimulationRun.objects.filter(pk=run.pk).update(progress_done=reps)
    body = client.get(reverse("ops:whatif_result", args=[run.pk])).content.decode()
    assert f"All {reps} replications done; now searching" in body
    assert f"of {reps + 1}" not in body


def test_no_shedding_time_beside_losses_is_explained(client: Client, operator: User) -> None:
    client.force_login(operator)
    run, _ = _run(client, "B", backpressure="on")
    assert run.result["dropped"] > 0
    SimulationRun.objects.filter(pk=run.pk).update(result={**run.result, "time_shedding_min": 0.0})
    body = client.get(reverse("ops:whatif_result", args=[run.pk])).content.decode()
    row = body.split(f'id="shedding-time-{run.pk}"')[1].split("</tr>")[0]
    assert "Time in shedding mode" in row
    assert "although items were lost" in row and "minutes with losses" in row


def test_less_draft_time_is_not_coloured_as_better_when_adding_a_queue() -> None:
    from reviewqueue.views.whatif import COMPARED_SHOWN, _added_rows

    figures = {c.key: [10.0, 12.0] for c in COMPARED_SHOWN}
    figures["time_in_draft_min"] = [30.0, 5.0]
    result = {"changes": {"a": figures}, "without": {"queues": {"a": {"production_per_min": 1.0}}}}
    cells = {cell["label"]: cell for cell in _added_rows(result)[0]["cells"]}
    assert cells["Draft mode (min)"]["tone"] == "unjudged"
    assert cells["Items lost (per run)"]["tone"] == "worse"


def test_the_model_choices_are_short_words_explained_beside_the_select(client: Client, operator: User) -> None:
    """A long option ("article (fixed per-minute steps)") was cut off in its grid column at 1280 px."""
    client.force_login(operator)
    for url in (reverse("ops:whatif"), reverse("ops:queues_whatif")):
        body = client.get(url).content.decode()
        select = body.split('id="id_model"')[1].split("</select>")[0]
        assert ">article</option>" in select and ">poisson</option>" in select, url
        assert "article: fixed steps each minute" in body, url


def test_the_form_shows_no_label_for_its_hidden_backlog_field(client: Client, operator: User) -> None:
    client.force_login(operator)
    body = client.get(reverse("ops:whatif")).content.decode()
    assert 'type="hidden" name="initial_ages_min"' in body
    assert "Initial ages min" not in body


def test_the_optional_minutes_of_a_preset_show_blank_as_their_help_says(client: Client, operator: User) -> None:
    """Blank means off, and the help says so; a prefilled 0.0 read as a
    watermark at zero minutes."""
    client.force_login(operator)
    for query in ({"preset": "A"}, {"live": "1", "window": "15m"}):
        body = client.get(reverse("ops:whatif"), query).content.decode()
        for name in ("age_high_minutes", "age_low_minutes"):
            field = body.split(f'name="{name}"', 1)[1].split(">", 1)[0]
            assert "value=" not in field, (query, name, field)
    preset = client.get(reverse("ops:whatif"), {"preset": "A"}).content.decode()
    assert "value=" not in preset.split('name="sla_minutes"', 1)[1].split(">", 1)[0]


def test_a_run_from_todays_backlog_does_not_call_its_horizon_empty(client: Client, operator: User) -> None:
    client.force_login(operator)
    run, body = _run(client, "A", target_overflow_pct="1", initial_ages_min="12,7,3")
    assert run.status == SimulationRun.Status.DONE, run.error
    recommendation = body.split(f'id="recommendation-{run.pk}"', 1)[1].split("</div>", 1)[0]
    assert "from an empty queue" not in recommendation
    assert "from today's backlog of 3 waiting items" in recommendation


def test_the_pages_count_reviewers_in_words(client: Client, operator: User) -> None:
    client.force_login(operator)
    _, body = _run(client, "A", reviewers="1")
    assert "by 1 reviewer;" in body and "reviewer(s)" not in body
    live = client.get(reverse("ops:whatif"), {"live": "1", "window": "15m"}).content.decode()
    assert "reviewer(s)" not in live and "by 0 reviewers" in live
