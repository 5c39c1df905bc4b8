"""'If we add a queue': the operators' what-if over every active queue, from
live data, run through the simulation task and shown without and with the
new queue."""

from __future__ import annotations

import json
import re
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from reviewqueue import services
from reviewqueue.models import Queue, SimulationRun
from reviewqueue.services.simulations import (
    ADD_QUEUE_KIND,
    MAX_ADD_QUEUE_EVENTS,
    MAX_REPLICATIONS,
    _json_safe,
    execute_simulation,
)
from reviewqueue.tasks.periodic import run_simulation
from simulation import MultiScenario, QueueSpec, what_if_added

pytestmark = pytest.mark.django_db

PAGE = "ops:queues_whatif"
RUN = "ops:queues_whatif_run"


@pytest.fixture
def two_queues(operator: User, reviewer: User, admit_item: Any) -> None:
    """team-a: 12 arrivals in the last hour, team-b: 6, the default queue: 3;
    the reviewer decides 2 in team-a and 1 in team-b."""
    services.create_queue(user=operator, slug="team-a", settings={"capacity": 30})
    services.create_queue(user=operator, slug="team-b", settings={"capacity": 60})
    Queue.objects.filter(slug__in=["team-a", "team-b"]).update(open_to_all=True)
    for _ in range(12):
        admit_item(queue="team-a")
    for _ in range(6):
        admit_item(queue="team-b")
    for _ in range(3):
        admit_item()
    for queue in ("team-a", "team-a", "team-b"):
        item = services.claim(reviewer=reviewer, queue=queue)
        assert item is not None
        services.decide(item_id=item.pk, reviewer=reviewer, approve=True)


def _form(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "rate__default": 0.5,
        "capacity__default": 50,
        "rate__team-a": 1.0,
        "capacity__team-a": 30,
        "rate__team-b": 0.5,
        "capacity__team-b": 60,
        "review_per_min": 2.5,
        "reviewers": 2,
        "slug": "new-fleet",
        "production_per_min": 1.2,
        "capacity": 40,
        "model": "poisson",
        "hours": 2,
        "replications": 3,
        "seed": 7,
    }
    data.update(overrides)
    return data


def test_only_operators_reach_it(client: Client, reviewer: User) -> None:
    for name, method in ((PAGE, client.get), (RUN, client.post)):
        response = method(reverse(name))
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))
    client.force_login(reviewer)
    assert client.get(reverse(PAGE)).status_code == 403
    assert client.post(reverse(RUN), _form()).status_code == 403
    assert not SimulationRun.objects.exists()


def test_the_overview_links_to_it(client: Client, operator: User) -> None:
    client.force_login(operator)
    body = client.get(reverse("ops:queues")).content.decode()
    assert f'href="{reverse(PAGE)}"' in body


def test_the_form_is_prefilled_from_each_queues_live_rates(client: Client, operator: User, two_queues: None) -> None:
    client.force_login(operator)
    response = client.get(reverse(PAGE))
    assert response.status_code == 200
    initial = response.context["form"].initial
    assert initial["rate__team-a"] == 0.2  # 12 in the last 60 minutes
    assert initial["rate__team-b"] == 0.1
    assert initial["rate__default"] == 0.05
    assert initial["capacity__team-a"] == 30
    assert initial["capacity__team-b"] == 60
    assert initial["review_per_min"] == 0.05  # 3 decisions across all queues
    assert initial["reviewers"] == 1
    body = response.content.decode()
    assert 'id="id_rate__team-a"' in body and 'value="0.2"' in body
    assert "3 decisions" in body


def test_an_archived_queue_is_left_out(client: Client, operator: User, two_queues: None) -> None:
    services.archive_queue(queue=Queue.objects.get(slug="team-b"), user=operator)
    client.force_login(operator)
    form = client.get(reverse(PAGE)).context["form"]
    assert "rate__team-b" not in form.fields
    assert "rate__team-a" in form.fields


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"rate__team-a": ""}, "rate__team-a", "Enter team-a's arrival rate"),
        ({"rate__team-b": "fast"}, "rate__team-b", "Enter a number"),
        ({"production_per_min": ""}, "production_per_min", "new queue's arrival rate"),
        ({"slug": "team-a"}, "slug", "A queue named team-a already exists"),
        ({"slug": "New Fleet"}, "slug", "lowercase letters"),
        ({"replications": MAX_REPLICATIONS + 1}, "replications", "less than or equal to"),
        ({"hours": 168, "replications": 100}, "replications", "too large to finish in time"),
    ],
)
def test_a_bad_input_is_named_at_its_field_and_nothing_runs(
    client: Client, operator: User, two_queues: None, overrides: dict[str, Any], field: str, words: str
) -> None:
    client.force_login(operator)
    response = client.post(reverse(RUN), _form(**overrides))
    assert response.status_code == 400
    assert not SimulationRun.objects.exists()
    errors = response.context["form"].errors
    assert field in errors, errors
    assert words in " ".join(errors[field])
    body = response.content.decode()
    assert f'id="id_{field}_error"' in body  # next to the field
    assert 'id="error-summary"' in body


def test_the_largest_allowed_run_is_accepted_and_one_more_hour_is_not(
    client: Client, operator: User, two_queues: None
) -> None:
    from reviewqueue.services.simulations import add_queue_events

    rates, review, added = [0.5, 1.0, 0.5], 2.5, 1.2
    per_hour = add_queue_events(1, 60, rates, added, review)
    reps = int(MAX_ADD_QUEUE_EVENTS // (per_hour * 8))
    client.force_login(operator)
    with mock.patch("reviewqueue.services.simulations.dispatch"):
        ok = client.post(reverse(RUN), _form(hours=8, replications=reps))
        too_big = client.post(reverse(RUN), _form(hours=8, replications=reps + 1))
    assert ok.status_code == 302
    assert too_big.status_code == 400
    assert f"Use at most {reps} replications" in too_big.content.decode()


def _direct(form: dict[str, Any]) -> dict[str, Any]:
    """what_if_added called directly on the scenario the form describes."""
    specs = []
    for q in Queue.objects.active().order_by("slug"):
        ages = [float(age) for age in form.get(f"backlog__{q.slug}", "").split(",") if age]
        specs.append(
            QueueSpec(
                q.slug,
                form[f"rate__{q.slug}"],
                capacity=form[f"capacity__{q.slug}"],
                high_watermark=q.high_watermark,
                low_watermark=q.low_watermark,
                initial_ages_min=tuple(ages),
            )
        )
    ms = MultiScenario(
        queues=tuple(specs),
        review_per_min=form["review_per_min"],
        reviewers=form["reviewers"],
        duration_min=form["hours"] * 60,
        model=form["model"],
    )
    added = QueueSpec(form["slug"], form["production_per_min"], capacity=form["capacity"])
    return json.loads(json.dumps(_json_safe(what_if_added(ms, added, form["replications"], form["seed"]))))


def test_a_small_run_gives_what_if_added_s_figures(client: Client, operator: User, two_queues: None) -> None:
    form = _form()
    client.force_login(operator)
    response = client.post(reverse(RUN), form)
    assert response.status_code == 302
    run = SimulationRun.objects.get()
    assert run.params["kind"] == ADD_QUEUE_KIND
    assert run.status == SimulationRun.Status.DONE, run.error
    assert run.progress_done == run.progress_total == 2 * form["replications"]
    expected = _direct(form)
    assert run.result["changes"] == expected["changes"]
    assert run.result["utilisation"] == expected["utilisation"]
    assert set(run.result["changes"]) == {"default", "team-a", "team-b"}
    assert "new-fleet" in run.result["with"]["queues"]

    page = client.get(response["Location"]).content.decode()
    # Each existing queue's row, its figures without and with, readable.
    for slug in ("default", "team-a", "team-b"):
        assert f'id="change-{slug}"' in page
    before, after = expected["changes"]["team-a"]["p95_wait_min"]
    assert f'<span class="before">{before:.1f}</span> → <span class="after">{after:.1f}</span>' in page
    assert "p95 wait (min)" in page
    u0, u1 = expected["utilisation"]
    assert f"{100 * u0:.1f} % → {100 * u1:.1f} %" in page
    assert page.count('class="bar-after"') >= 2 * 3  # two paired-bar charts, a bar per queue
    assert "<script" not in page.split("</nav>")[-1]  # the chart is SVG, no inline script


def test_the_form_carries_each_queues_backlog(client: Client, operator: User, two_queues: None) -> None:
    client.force_login(operator)
    response = client.get(reverse(PAGE))
    initial = response.context["form"].initial
    waiting = {"default": 3, "team-a": 10, "team-b": 5}  # admitted, less the decided
    for slug, n in waiting.items():
        ages = [float(age) for age in initial[f"backlog__{slug}"].split(",")]
        assert len(ages) == n and all(0 <= age < 1 for age in ages)  # admitted a moment ago
    body = response.content.decode()
    assert re.search(r'id="waiting-team-a">10 items<input type="hidden" name="backlog__team-a"', body)
    assert "Each queue starts from the items waiting in it now" in body
    assert "Duration (hours, from today&#x27;s backlog)" in body


def test_a_run_starts_each_queue_from_its_backlog_and_says_so(client: Client, operator: User, two_queues: None) -> None:
    form = _form(**{"backlog__team-a": ",".join(["45"] * 25), "backlog__team-b": "3,2.5"})
    client.force_login(operator)
    response = client.post(reverse(RUN), form)
    assert response.status_code == 302
    run = SimulationRun.objects.get()
    assert run.status == SimulationRun.Status.DONE, run.error
    stored = {q["slug"]: q["initial_ages_min"] for q in run.params["multi"]["queues"]}
    assert stored == {"default": [], "team-a": [45.0] * 25, "team-b": [3.0, 2.5]}
    assert all(q["backpressure"] for q in run.params["multi"]["queues"])  # as in production
    expected = _direct(form)
    assert run.result["changes"] == expected["changes"]
    # 25 items 45 minutes old in a queue of 30 (high watermark 24): team-a waits longer than empty.
    empty = _direct(_form())
    assert expected["changes"]["team-a"]["mean_wait_min"][0] > empty["changes"]["team-a"]["mean_wait_min"][0]
    page = client.get(response["Location"]).content.decode()
    assert "from today&#x27;s backlog (25 waiting in team-a, 2 waiting in team-b; new-fleet empty)" in page


def test_a_run_without_a_backlog_says_it_started_empty(client: Client, operator: User, two_queues: None) -> None:
    client.force_login(operator)
    response = client.post(reverse(RUN), _form())
    assert "h from empty queues;" in client.get(response["Location"]).content.decode()


def test_a_run_stored_before_queues_had_a_backlog_runs_and_reads_as_started_empty(
    client: Client, operator: User, two_queues: None
) -> None:
    client.force_login(operator)
    client.post(reverse(RUN), _form())
    params = SimulationRun.objects.get().params
    for q in params["multi"]["queues"]:
        del q["initial_ages_min"]  # as such a run was stored
    old = SimulationRun.objects.create(queue=Queue.default(), name="add new-fleet", params=params)
    assert execute_simulation(old.pk) == "done"
    old.refresh_from_db()
    assert old.result["changes"] == _direct(_form())["changes"]
    assert "h from empty queues;" in client.get(reverse("ops:whatif_result", args=[old.pk])).content.decode()


def test_a_backlog_that_is_not_a_list_of_ages_is_refused(client: Client, operator: User, two_queues: None) -> None:
    client.force_login(operator)
    for bad in ("1,x", "-3", "nan"):
        response = client.post(reverse(RUN), _form(**{"backlog__team-a": bad}))
        assert response.status_code == 400, bad
        assert not SimulationRun.objects.exists()
    assert "not a list of ages" in client.post(reverse(RUN), _form(**{"backlog__team-a": "1,x"})).content.decode()


def test_a_larger_run_goes_to_the_worker_and_shows_progress(
    client: Client, operator: User, two_queues: None, django_capture_on_commit_callbacks: Any
) -> None:
    form = _form(hours=24, replications=20)
    client.force_login(operator)
    with (
        mock.patch("reviewqueue.services.simulations.dispatch") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = client.post(reverse(RUN), form)
    run = SimulationRun.objects.get()
    delay.assert_called_once_with(run.pk)
    assert run.status == SimulationRun.Status.QUEUED
    page = client.get(response["Location"]).content.decode()
    assert "<progress" in page
    assert "Runs done (without and with new-fleet): 0 of 40" in page

    assert run_simulation(run.pk) == "done"
    run.refresh_from_db()
    assert run.progress_done == run.progress_total == 40
    assert run.result["changes"] == _direct(form)["changes"]
    poll = client.get(response["Location"], headers={"HX-Request": "true"})
    assert poll.status_code == 286  # done: htmx stops polling
    assert 'id="added-changes"' in poll.content.decode()


def test_it_stays_out_of_the_single_queue_pages(client: Client, operator: User, two_queues: None) -> None:
    client.force_login(operator)
    client.post(reverse(RUN), _form())
    added = SimulationRun.objects.get()
    assert added.status == SimulationRun.Status.DONE
    assert added not in client.get(reverse("ops:whatif")).context["runs"]
    compare = client.get(reverse("ops:whatif_compare"), {"a": added.pk, "b": added.pk})
    assert compare.status_code == 400
    assert added in client.get(reverse(PAGE)).context["runs"]


def test_a_failed_run_says_so_and_links_back(client: Client, operator: User) -> None:
    run = SimulationRun.objects.create(
        params={
            "kind": ADD_QUEUE_KIND,
            "multi": {"queues": [], "review_per_min": 1, "reviewers": 1, "duration_min": 60, "model": "poisson"},
            "added": {"slug": "x", "production_per_min": 1.0, "capacity": 10},
            "replications": 1,
            "seed": 0,
        }
    )
    assert execute_simulation(run.pk) == "failed"
    client.force_login(operator)
    page = client.get(reverse("ops:whatif_result", args=[run.pk])).content.decode()
    assert "The scenario is not valid: queues at least one queue is needed." in page
    assert f'href="{reverse(PAGE)}"' in page


def test_hostile_slugs_and_names_stay_inert(client: Client, operator: User) -> None:
    services.create_queue(user=operator, slug="team-x", name="<img src=x onerror=alert(1)>")
    client.force_login(operator)
    body = client.get(reverse(PAGE)).content.decode()
    assert "<img src=x" not in body
    assert "&lt;img src=x onerror=alert(1)&gt;" in body
    response = client.post(reverse(RUN), {"slug": "<script>alert(1)</script>"})
    assert response.status_code == 400
    assert "<script>alert(1)</script>" not in response.content.decode()
