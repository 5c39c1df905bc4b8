"""Operator forms: policy settings, the what-if scenario, the verdict
export's filters. The export itself (rows, CSV, JSON Lines) is export.py."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, ClassVar

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import QuerySet

from . import access, export, oidc, policy
from .models import AlertChannel, GoldItem, Queue, ReasonLabel, ReviewItem, RoutingRule, Verdict
from .selectors.routing import task_kinds
from .services.errors import InvalidInput
from .services.identity import PROVIDER_GROUP_PREFIX
from .services.simulations import (
    ADD_QUEUE_KIND,
    EVENTS_FLOOR_PER_MIN,
    MAX_ADD_QUEUE_EVENTS,
    MAX_ADD_QUEUE_HOURS,
    MAX_REPLICATIONS,
    MAX_SIMULATION_EVENTS,
    add_queue_events,
    simulation_events,
)
from .stats import DEFAULT_RATE_WINDOW, RATE_WINDOWS

# The policy fields that are shares, each with the sentence an operator reads
# when one is outside [0, 1].
SHARE_RULES = {
    "sampling_rate": "The sampling rate is a share: from 0 to 1 (0.1 means 10 %).",
    "double_review_rate": "The double-review rate is a share: from 0 to 1 (0.1 means 10 %).",
    "gold_rate": "The gold rate is a share: from 0 to 1 (0.02 means 2 %).",
    "gold_min_accuracy": "The lowest accuracy is a share: from 0 to 1 (0.7 means 70 %).",
}
# The sentence an operator reads when a setting is outside its bound
# (policy.BOUNDS), for the settings whose bound is all there is to say.
BOUND_RULES = {
    "capacity": "Capacity must be at least 1 item.",
    "tuner_window": "The tuner window must hold at least 1 verdict.",
    "lease_seconds": "The lease must last at least 10 seconds.",
    "gold_min_answers": "A flag needs at least 1 gold answer.",
    **SHARE_RULES,
}


class PolicyForm(forms.ModelForm):
    """The editable policy fields. Its own checks say each rule in plain words,
    in the same terms as the field's help text; the model's clean() enforces
    the same rules again for every other writer (the admin, the API)."""

    # The instructions come last, beside their preview.
    field_order: ClassVar[list[str]] = [name for name in Queue.EDITABLE_FIELDS if name != "instructions"] + [
        "instructions"
    ]

    class Meta:
        model = Queue
        fields = Queue.EDITABLE_FIELDS
        labels: ClassVar[dict[str, str]] = {
            "capacity": "Capacity (items)",
            "high_watermark": "High watermark (share of capacity)",
            "low_watermark": "Low watermark (share of capacity)",
            "step_limit": "Step limit now",
            "min_step_limit": "Tuner: lowest step limit",
            "max_step_limit": "Tuner: highest step limit",
            "tuner_window": "Tuner window (verdicts)",
            "approve_low": "Tuner band: lower approve rate",
            "approve_high": "Tuner band: upper approve rate",
            "label_threshold": "Label count that proposes a filter rule",
            "lease_seconds": "Lease length (seconds)",
            "sampling_rate": "Grey-task sampling rate",
            "instructions": "Reviewer instructions (Markdown)",
            "double_review_rate": "Double-review rate",
            "gold_rate": "Gold rate",
            "gold_min_accuracy": "Gold: lowest accuracy before a flag",
            "gold_min_answers": "Gold: answers before a flag",
            "gold_pause": "Pause flagged reviewers",
            "tuner_rule": "Tuner rule",
            "sla_minutes": "SLA: minutes to verdict",
            "age_high_minutes": "Age watermark: high (minutes)",
            "age_low_minutes": "Age watermark: low (minutes)",
            "sla_risk_minutes": "Alert: SLA at risk within (minutes)",
            "alert_age_minutes": "Alert: oldest item older than (minutes)",
            "escalation_delay_minutes": "Double review: operators settle a disagreement after (minutes)",
        }
        help_texts: ClassVar[dict[str, str]] = {
            "instructions": "Shown on the review page and in its ? help. Markdown: **bold**, *italic*, lists, "
            "`code`, [links](https://example.org). HTML is shown as text, images are not shown.",
            "capacity": "How many items may wait at once, 1 or more. At capacity the lowest-priority item is shed.",
            "high_watermark": "More than 0 and at most 1: 0.8 means 80 % of capacity. Above it, new loops run in "
            "draft mode.",
            "low_watermark": "0 or more and below the high watermark: 0.3 means 30 % of capacity. Below it, normal "
            "flow resumes.",
            "step_limit": "Attempts a new loop may make now, from the lowest to the highest step limit.",
            "min_step_limit": "1 or more, and not above the highest step limit.",
            "max_step_limit": "Not below the lowest step limit.",
            "tuner_window": "How many recent verdicts the tuner weighs, 1 or more.",
            "approve_low": "From 0 to 1 and below the upper rate: 0.4 means 40 %. Below it, the tuner lowers the "
            "step limit.",
            "approve_high": "Above the lower rate and at most 1: 0.8 means 80 %. Above it, the tuner raises the "
            "step limit.",
            "label_threshold": "A rejection label counted more often than this proposes a filter rule.",
            "lease_seconds": "How long a reviewer holds an item, 10 seconds or more.",
            "sampling_rate": "From 0 to 1: 0.1 means 10 % of grey-zone auto-passes go to review.",
            "double_review_rate": "From 0 to 1: 0.1 means 10 % of items are judged again by a second reviewer who "
            "does not see the first verdict. A disagreement goes to a third reviewer, then to an operator.",
            "gold_rate": "From 0 to 1: 0.02 means a gold item, whose right answer is known, is placed beside 2 % "
            "of the real items as they arrive. Its answers measure the reviewer and reach neither producers nor "
            "the tuner.",
            "gold_min_accuracy": "From 0 to 1: 0.7 means a reviewer who gets fewer than 70 % of gold items right is "
            "flagged.",
            "gold_min_answers": "How many gold answers a reviewer gives before their accuracy can flag them, 1 or "
            "more.",
            "gold_pause": "A flagged reviewer claims nothing until an operator reinstates them on the review "
            "quality page.",
            "tuner_rule": "Plain counts every verdict alike. Noise-aware weighs each verdict by its reviewer's "
            "estimated reliability, from gold answers and double reviews.",
            "sla_minutes": "The target time from admission to verdict, 1 minute or more. The dashboard shows the share "
            "of items decided within it.",
            "age_high_minutes": "Optional. When the oldest waiting item is older than this, new loops run in draft "
            "mode even below the high watermark. Give both age marks, or neither.",
            "age_low_minutes": "Optional, below the high age mark. Normal flow resumes only when the oldest waiting "
            "item is younger than this and the depth is below the low watermark.",
            "sla_risk_minutes": "An 'SLA at risk' alert goes out when, at the live pace, an item is forecast to pass "
            "the SLA within this many minutes.",
            "alert_age_minutes": "Optional. An alert goes out when the oldest waiting item is older than this.",
            "escalation_delay_minutes": "When two reviewers disagree, a third one settles it; after this many "
            "minutes without one, it goes to the operators on the review quality page. 0 sends it at once; blank "
            "waits for a third reviewer however long. With no third reviewer in the queue, it goes at once.",
        }
        widgets: ClassVar[dict[str, Any]] = {"instructions": forms.Textarea(attrs={"rows": 8})}

    @staticmethod
    def _instructions_text(value: object) -> str:
        return str(value or "").replace("\r\n", "\n").strip()

    def clean_instructions(self) -> str:
        # Browsers send textarea lines as CRLF; stored as LF, so saving the
        # form unchanged is not recorded as a change to the instructions.
        return self._instructions_text(self.cleaned_data.get("instructions", ""))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            label = str(field.label).lower()
            field.error_messages["required"] = f"Enter the {label}."
            field.error_messages["invalid"] = f"Enter a number for the {label}."
            if isinstance(field, forms.IntegerField):
                field.error_messages["invalid"] = f"Enter a whole number for the {label}."

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        for name, message in self.rule_errors(data).items():
            if name not in self.errors:
                self.add_error(name, message)
        return data

    @staticmethod
    def rule_errors(data: dict[str, Any]) -> dict[str, str]:
        """The policy's rules as the sentences an operator reads, by field:
        the bounds and orders are policy.BOUNDS and policy.ORDER, which the
        model's clean() and the policy's dataclasses read too."""
        errors: dict[str, str] = {}

        def has(*names: str) -> bool:
            return all(data.get(name) is not None for name in names)

        for name, message in BOUND_RULES.items():
            if has(name) and not policy.within(name, data[name]):
                errors[name] = message
        if has("high_watermark") and not policy.within("high_watermark", data["high_watermark"]):
            errors["high_watermark"] = (
                "The high watermark is a share of capacity: more than 0 and at most 1 (0.8 means 80 %)."
            )
        if has("low_watermark") and not policy.within("low_watermark", data["low_watermark"]):
            errors["low_watermark"] = "The low watermark cannot be below 0."
        elif (
            has("low_watermark", "high_watermark")
            and "high_watermark" not in errors
            and not policy.in_order("low_watermark", "high_watermark", data)
        ):
            errors["low_watermark"] = (
                f"The low watermark must be below the high watermark ({data['high_watermark']:g})."
            )
        if has("min_step_limit") and not policy.within("min_step_limit", data["min_step_limit"]):
            errors["min_step_limit"] = "The lowest step limit must be at least 1."
        elif has("min_step_limit", "max_step_limit") and not policy.in_order("min_step_limit", "max_step_limit", data):
            errors["max_step_limit"] = f"The highest step limit cannot be below the lowest ({data['min_step_limit']})."
        if (
            has("step_limit", "min_step_limit", "max_step_limit")
            and "max_step_limit" not in errors
            and not (
                policy.in_order("min_step_limit", "step_limit", data)
                and policy.in_order("step_limit", "max_step_limit", data)
            )
        ):
            errors["step_limit"] = (
                f"The step limit must be from the lowest ({data['min_step_limit']}) "
                f"to the highest ({data['max_step_limit']}) step limit."
            )
        if has("approve_low") and not policy.within("approve_low", data["approve_low"]):
            errors["approve_low"] = "The lower approve rate is a share: from 0 to 1 (0.4 means 40 %)."
        if has("approve_high") and not policy.within("approve_high", data["approve_high"]):
            errors["approve_high"] = "The upper approve rate is a share: from 0 to 1 (0.8 means 80 %)."
        elif (
            has("approve_low", "approve_high")
            and "approve_low" not in errors
            and not policy.in_order("approve_low", "approve_high", data)
        ):
            errors["approve_low"] = f"The lower approve rate must be below the upper rate ({data['approve_high']:g})."
        errors.update(PolicyForm.age_errors(data))
        return errors

    @staticmethod
    def age_errors(data: dict[str, Any]) -> dict[str, str]:
        """The SLA and age rules: an SLA of a minute or more; the age
        watermark's marks both or neither, 0 <= low < high; an alert age above
        0; an escalation delay of 0 or more."""
        if data.get("sla_minutes") is not None and not policy.within("sla_minutes", data["sla_minutes"]):
            return {"sla_minutes": "The SLA must be at least 1 minute."}
        delay = data.get("escalation_delay_minutes")
        if delay is not None and not policy.within("escalation_delay_minutes", delay):
            return {"escalation_delay_minutes": "The delay must be 0 minutes or more, or left blank."}
        alert_age = data.get("alert_age_minutes")
        if alert_age is not None and not policy.within("alert_age_minutes", alert_age):
            return {"alert_age_minutes": "The age limit must be above 0 minutes, or left blank."}
        high, low = data.get("age_high_minutes"), data.get("age_low_minutes")
        if high is None and low is None:
            return {}
        if high is None:
            return {"age_high_minutes": "Give the high age mark too, or clear the low one."}
        if low is None:
            return {"age_low_minutes": "Give the low age mark too, or clear the high one."}
        if not policy.within("age_high_minutes", high):
            return {"age_high_minutes": "The high age mark must be above 0 minutes."}
        if not (policy.within("age_low_minutes", low) and policy.in_order("age_low_minutes", "age_high_minutes", data)):
            return {"age_low_minutes": f"The low age mark must be from 0 to below the high one ({high:g})."}
        return {}

    def _update_errors(self, errors: ValidationError) -> None:
        # The model's clean() states the same rules in its own terms, and a
        # broken rule there often follows from one this form already explained
        # (a step limit outside bounds that are themselves upside down): once
        # the form has said what is wrong, the model's wording is left out.
        if self.errors:
            return
        super()._update_errors(errors)

    @classmethod
    def label_of(cls, name: str) -> str:
        """A policy field as the form words it ("Gold rate"); any other key
        of an audit entry ("routing rule #7") as it is."""
        field = cls.base_fields.get(name)
        return str(field.label) if field is not None and field.label else name

    def changes(self) -> dict[str, Any]:
        """Only the fields whose values differ, ready for services.policy_update.
        Django's changed_data compares the raw text, so instructions sent back
        with CRLF line endings would count as changed: compared cleaned here."""
        changes = {name: self.cleaned_data[name] for name in self.changed_data if name in Queue.EDITABLE_FIELDS}
        if "instructions" in changes and changes["instructions"] == self._instructions_text(
            self.initial.get("instructions")
        ):
            del changes["instructions"]
        return changes


MODEL_HELP = "article: fixed steps each minute; poisson: random arrivals and reviews"


class WhatIfForm(forms.Form):
    """One simulation scenario plus how to run it. Field names match
    simulation.Scenario so errors from Scenario.from_dict land on the right field."""

    name = forms.CharField(max_length=100, required=False, help_text="to tell runs apart when comparing")
    # Short choice words, so the select is not cut off in its grid column; the help says what each means.
    model = forms.ChoiceField(choices=[("article", "article"), ("poisson", "poisson")], help_text=MODEL_HELP)
    production_per_min = forms.FloatField(min_value=0, max_value=10_000, label="Production rate (outputs/min)")
    review_per_min = forms.FloatField(min_value=0, max_value=10_000, label="Review rate (decisions/min, all reviewers)")
    reviewers = forms.IntegerField(min_value=1, max_value=1000)
    capacity = forms.IntegerField(min_value=1, max_value=1_000_000)
    duration_min = forms.IntegerField(min_value=1, max_value=100_000, label="Duration (minutes)")
    burst_prob = forms.FloatField(min_value=0, max_value=1, label="Burst probability (per minute)")
    burst_mult = forms.FloatField(min_value=1, max_value=100, label="Burst size (x production)")
    high_watermark = forms.FloatField(min_value=0, max_value=1)
    low_watermark = forms.FloatField(min_value=0, max_value=1)
    backpressure = forms.BooleanField(required=False, help_text="draft mode above the high watermark")
    sla_minutes = forms.FloatField(
        min_value=0,
        max_value=100_000,
        required=False,
        label="SLA (minutes to verdict)",
        help_text="reports the share of items decided within it and the p95 wait; 0 or blank: none",
    )
    age_high_minutes = forms.FloatField(
        min_value=0,
        max_value=100_000,
        required=False,
        label="Age watermark: high (minutes)",
        help_text="draft mode when the oldest item is older than this; blank: depth alone decides",
    )
    age_low_minutes = forms.FloatField(
        min_value=0, max_value=100_000, required=False, label="Age watermark: low (minutes)"
    )
    replications = forms.IntegerField(
        min_value=1,
        max_value=MAX_REPLICATIONS,
        initial=20,
        help_text=f"1 to {MAX_REPLICATIONS}; a run may also be at most {MAX_SIMULATION_EVENTS:,} simulated events "
        f"(replications × minutes × (production + review + {EVENTS_FLOOR_PER_MIN}))",
    )
    seed = forms.IntegerField(min_value=0, max_value=2**31, initial=0)
    # Today's backlog when the form was prefilled from live data: the waiting
    # items' ages in minutes, comma-separated; blank starts from an empty queue.
    initial_ages_min = forms.CharField(required=False, widget=forms.HiddenInput)
    target_overflow_pct = forms.FloatField(
        min_value=0, max_value=100, required=False, initial=1.0, label="Target overflow % for the recommendation"
    )

    SCENARIO_FIELDS = (
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
        "backpressure",
        "sla_minutes",
        "age_high_minutes",
        "age_low_minutes",
    )
    # Blank means off; the scenario says off with 0.
    OPTIONAL_MINUTES = ("sla_minutes", "age_high_minutes", "age_low_minutes")

    def clean(self) -> dict[str, Any]:
        from simulation import Scenario

        data = super().clean()
        if self.errors:
            return data
        for name in self.OPTIONAL_MINUTES:
            data[name] = data.get(name) or 0.0
        try:
            ages = parse_backlog(data.get("initial_ages_min"))
        except ValueError:
            self.add_error(None, BACKLOG_ERROR)
            return data
        try:
            fields = {k: data[k] for k in self.SCENARIO_FIELDS}
            self.scenario = Scenario.from_dict({**fields, "initial_ages_min": ages})
        except ValueError as exc:
            field, _, message = str(exc).partition(": ")
            self.add_error(field if field in self.fields else None, message or str(exc))
            return data
        events = self.simulated_events()
        if events > MAX_SIMULATION_EVENTS:
            per_rep = events / data["replications"]
            fits = int(MAX_SIMULATION_EVENTS // per_rep)
            advice = (
                f"Use at most {fits} replications at this duration, or a shorter duration."
                if fits >= 1
                else "Use a shorter duration."
            )
            self.add_error(
                "replications",
                f"This run is too large to finish in time: {data['replications']} replications of "
                f"{data['duration_min']} minutes at these rates. {advice}",
            )
        return data

    @property
    def backlog_size(self) -> int:
        """How many waiting items the run starts from (the hidden field's ages)."""
        return backlog_size(self["initial_ages_min"].value())

    def params(self) -> dict[str, Any]:
        """What a SimulationRun stores: the scenario and how to run it."""
        data = self.cleaned_data
        return {
            "scenario": self.scenario.to_dict(),
            "replications": data["replications"],
            "seed": data["seed"],
            "target_overflow_pct": data.get("target_overflow_pct"),
        }

    def simulated_events(self) -> float:
        data = self.cleaned_data
        return simulation_events(
            data["replications"], data["duration_min"], data["production_per_min"], data["review_per_min"]
        )


def backlog_text(ages: Any) -> str:
    """The hidden backlog field's value: ages in minutes, comma-separated."""
    return ",".join(f"{age:g}" for age in ages)


BACKLOG_ERROR = "The backlog to start from is not a list of ages; load the live data again."


def parse_backlog(text: str | None) -> list[float]:
    """The ages of a hidden backlog field; ValueError if one is not a number
    (the simulation's scenario refuses negative or endless ones, by name)."""
    return [float(age) for age in (text or "").split(",") if age.strip()]


def backlog_size(text: object) -> int:
    """How many waiting items a hidden backlog field holds."""
    return sum(1 for age in str(text or "").split(",") if age.strip())


def scenario_initial(scenario: Any, **extra: Any) -> dict[str, Any]:
    """Initial form values from a simulation.Scenario."""
    data = {name: getattr(scenario, name) for name in WhatIfForm.SCENARIO_FIELDS}
    data["initial_ages_min"] = backlog_text(scenario.initial_ages_min)
    data.update({"replications": 20, "seed": 0, "target_overflow_pct": 1.0})
    data.update(extra)
    for name in WhatIfForm.OPTIONAL_MINUTES:
        data[name] = data[name] or None  # off reads as blank, as the help says
    return data


class AddQueueWhatIfForm(forms.Form):
    """'If we add a queue': every active queue's arrival rate and capacity
    (prefilled from live data), the team's review rate, the new queue, and
    how to run it. Each existing queue has two fields, ``rate__<slug>`` and
    ``capacity__<slug>``; ``params()`` is what a SimulationRun stores."""

    review_per_min = forms.FloatField(
        min_value=0,
        max_value=10_000,
        label="Review rate (decisions/min, all reviewers together)",
        error_messages={"required": "Enter the team's review rate in decisions per minute."},
    )
    reviewers = forms.IntegerField(min_value=1, max_value=1000, help_text="people sharing that rate")
    slug = forms.CharField(
        max_length=50,
        label="New queue's slug",
        help_text="lowercase letters, digits and hyphens, starting with a letter",
        error_messages={"required": "Name the new queue."},
    )
    production_per_min = forms.FloatField(
        min_value=0,
        max_value=10_000,
        label="New queue's arrival rate (outputs/min)",
        error_messages={"required": "Enter the new queue's arrival rate in outputs per minute."},
    )
    capacity = forms.IntegerField(min_value=1, max_value=1_000_000, initial=50, label="New queue's capacity (items)")
    model = forms.ChoiceField(
        choices=[("poisson", "poisson"), ("article", "article")], initial="poisson", help_text=MODEL_HELP
    )
    hours = forms.IntegerField(
        min_value=1,
        max_value=MAX_ADD_QUEUE_HOURS,
        initial=8,
        label="Duration (hours, from today's backlog)",
    )
    replications = forms.IntegerField(
        min_value=1,
        max_value=MAX_REPLICATIONS,
        initial=20,
        help_text=f"1 to {MAX_REPLICATIONS}, each run twice (without and with the new queue); at most "
        f"{MAX_ADD_QUEUE_EVENTS:,} simulated events in all",
    )
    seed = forms.IntegerField(min_value=0, max_value=2**31, initial=0)

    def __init__(self, *args: Any, queues: list[Queue], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.queues = queues
        fields: dict[str, forms.Field] = {}
        for q in queues:
            fields[f"rate__{q.slug}"] = forms.FloatField(
                min_value=0,
                max_value=10_000,
                label=f"{q.slug}: arrivals/min",
                error_messages={
                    "required": f"Enter {q.slug}'s arrival rate in outputs per minute (0 if it produces nothing)."
                },
            )
            fields[f"capacity__{q.slug}"] = forms.IntegerField(
                min_value=1,
                max_value=1_000_000,
                label=f"{q.slug}: capacity (items)",
                error_messages={"required": f"Enter {q.slug}'s capacity in items."},
            )
            # Its waiting items' ages when the page was prefilled (as WhatIfForm's
            # initial_ages_min); blank starts it empty.
            fields[f"backlog__{q.slug}"] = forms.CharField(required=False, widget=forms.HiddenInput)
        # The existing queues first, as the page shows them.
        self.fields = {**fields, **self.fields}

    def queue_rows(self) -> list[tuple[Queue, forms.BoundField, forms.BoundField, forms.BoundField, int]]:
        """Each queue with its rate, capacity and backlog fields, and how many
        waiting items it starts from."""
        rows = []
        for q in self.queues:
            backlog = self[f"backlog__{q.slug}"]
            rows.append(
                (q, self[f"rate__{q.slug}"], self[f"capacity__{q.slug}"], backlog, backlog_size(backlog.value()))
            )
        return rows

    def other_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in self.fields if "__" not in name]

    def clean_slug(self) -> str:
        slug = self.cleaned_data["slug"].strip()
        try:
            policy.check_slug(slug)
        except policy.PolicyError:
            raise forms.ValidationError(
                "Use 1 to 50 lowercase letters, digits and hyphens, starting with a letter."
            ) from None
        if Queue.objects.filter(slug=slug).exists():
            raise forms.ValidationError(f"A queue named {slug} already exists: pick a slug for the new one.")
        return slug

    def clean(self) -> dict[str, Any]:
        from simulation import MultiScenario, QueueSpec

        data = super().clean()
        if self.errors:
            return data
        try:
            backlogs = {q.slug: tuple(parse_backlog(data.get(f"backlog__{q.slug}"))) for q in self.queues}
        except ValueError:
            self.add_error(None, BACKLOG_ERROR)
            return data
        try:
            # Backpressure on, as in production (QueueSpec's default); each live
            # queue from its backlog, the new one from empty.
            specs = tuple(
                QueueSpec(
                    slug=q.slug,
                    production_per_min=data[f"rate__{q.slug}"],
                    capacity=data[f"capacity__{q.slug}"],
                    high_watermark=q.high_watermark,
                    low_watermark=q.low_watermark,
                    initial_ages_min=backlogs[q.slug],
                )
                for q in self.queues
            )
            self.scenario = MultiScenario(
                queues=specs,
                review_per_min=data["review_per_min"],
                reviewers=data["reviewers"],
                duration_min=data["hours"] * 60,
                model=data["model"],
            )
            self.added = QueueSpec(
                slug=data["slug"], production_per_min=data["production_per_min"], capacity=data["capacity"]
            )
            self.scenario.with_queue(self.added)
        except ValueError as exc:
            field, _, message = str(exc).partition(": ")
            self.add_error(field if field in self.fields else None, message or str(exc))
            return data
        events = self.simulated_events()
        if events > MAX_ADD_QUEUE_EVENTS:
            fits = int(MAX_ADD_QUEUE_EVENTS // (events / data["replications"]))
            advice = (
                f"Use at most {fits} replications for {data['hours']} hours, or fewer hours."
                if fits >= 1
                else "Use fewer hours."
            )
            self.add_error(
                "replications",
                f"This run is too large to finish in time: {data['replications']} replications of "
                f"{data['hours']} hours, with and without {data['slug']}, at these rates. {advice}",
            )
        return data

    def simulated_events(self) -> float:
        data = self.cleaned_data
        return add_queue_events(
            data["replications"],
            data["hours"] * 60,
            [data[f"rate__{q.slug}"] for q in self.queues],
            data["production_per_min"],
            data["review_per_min"],
        )

    def params(self) -> dict[str, Any]:
        """What a SimulationRun stores: the kind, both scenarios' parts and how to run them."""
        data = self.cleaned_data
        return {
            "kind": ADD_QUEUE_KIND,
            "multi": self.scenario.to_dict(),
            "added": {
                "slug": self.added.slug,
                "production_per_min": self.added.production_per_min,
                "capacity": self.added.capacity,
            },
            "replications": data["replications"],
            "seed": data["seed"],
        }


class LiveWindowForm(forms.Form):
    window = forms.ChoiceField(
        choices=[(k, k) for k in RATE_WINDOWS], initial=DEFAULT_RATE_WINDOW, label="Measure over the last"
    )


class ExportForm(forms.Form):
    """Filters for the verdict export; all optional."""

    format = forms.ChoiceField(choices=[("csv", "CSV"), ("jsonl", "JSON Lines")], initial="csv")
    # Date pickers; the fields still take an ISO date/time, which links and scripts may carry.
    since = forms.DateTimeField(
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
        label="From (day, UTC)",
        help_text="from the start of this day",
    )
    until = forms.DateTimeField(
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
        label="To (day, UTC)",
        help_text="to the end of this day",
    )
    label = forms.ChoiceField(choices=[("", "any"), *ReviewItem.Label.choices], required=False)
    reviewer = forms.CharField(required=False, max_length=150, help_text="username")
    dataset = forms.BooleanField(
        required=False,
        label="Include the task text and the output",
        help_text="one row per verdict with the task, what the agent produced and the human's decision: "
        "usable as a labelled dataset (JSON Lines suits long text best)",
    )

    def clean_reviewer(self) -> str:
        name = self.cleaned_data.get("reviewer", "").strip()
        if name and not get_user_model().objects.filter(username=name).exists():
            raise forms.ValidationError(f"no user named {name!r}")
        return name

    def clean_until(self) -> datetime | None:
        """A day (what the date picker sends) runs to its end; a date/time is taken as it is."""
        until = self.cleaned_data.get("until")
        if until is not None and len(str(self.data.get("until", "")).strip()) == len("2026-01-31"):
            until += timedelta(days=1)  # the export reads ``until`` as exclusive
        return until

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            self.add_error("until", "must not be before 'since'")
        return data

    def queryset(self, queue: Queue | None = None) -> QuerySet[Verdict]:
        """Verdicts matching the filters (in ``queue`` when one is given),
        oldest first; call after is_valid()."""
        data = self.cleaned_data
        return export.verdicts(
            since=data.get("since"),
            until=data.get("until"),
            label=data.get("label"),
            reviewer=data.get("reviewer"),
            queue=queue,
        )


class SettleForm(forms.Form):
    """An operator's verdict on a double-reviewed item the reviewers left
    unsettled: approve, reject with a label, or send back with a note."""

    DECISIONS: ClassVar[list[tuple[str, str]]] = [
        ("approve", "Approve"),
        ("reject", "Reject"),
        ("send_back", "Send back"),
    ]

    decision = forms.ChoiceField(choices=DECISIONS, widget=forms.RadioSelect, label="Decision")
    reason_label = forms.ChoiceField(
        choices=[("", "(none)"), *ReasonLabel.choices], required=False, label="Reason label (reject)"
    )
    note = forms.CharField(
        required=False, max_length=10_000, widget=forms.Textarea(attrs={"rows": 2}), label="Note (send back)"
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        decision = data.get("decision")
        if decision == "reject" and not data.get("reason_label"):
            self.add_error("reason_label", "A rejection needs a reason label.")
        if decision == "send_back" and not str(data.get("note", "")).strip():
            self.add_error("note", "Sending back needs a note that says what to try next.")
        if decision != "reject":
            data["reason_label"] = ""
        return data


class GoldForm(forms.Form):
    """What a gold item's copies should be answered: approve, or reject
    (optionally with the label a right answer carries)."""

    expected_decision = forms.ChoiceField(
        choices=GoldItem.Expected.choices, widget=forms.RadioSelect, label="Expected decision"
    )
    expected_label = forms.ChoiceField(
        choices=[("", "(any label)"), *ReasonLabel.choices],
        required=False,
        label="Expected label (reject only)",
        help_text="Leave at any label to count every rejection as right.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("expected_decision") == "approve" and data.get("expected_label"):
            self.add_error("expected_label", "Only a rejection carries a label: choose any label, or Reject.")
        return data

    @staticmethod
    def initial_for(item: ReviewItem) -> dict[str, str]:
        """The item's gold expectation if it has one, else what its verdict said."""
        gold = getattr(item, "gold_spec", None)
        if gold is not None:
            return {"expected_decision": gold.expected_decision, "expected_label": gold.expected_label}
        verdict = getattr(item, "verdict", None)
        if verdict is None or verdict.decision == Verdict.Decision.SEND_BACK:
            return {}
        if verdict.decision == Verdict.Decision.REJECT:
            return {"expected_decision": "reject", "expected_label": verdict.reason_label}
        return {"expected_decision": "approve"}


class QueueCreateForm(forms.Form):
    """A new queue: its slug and name, its capacity, and optionally every
    other policy setting copied from an existing queue."""

    slug = forms.CharField(
        max_length=50,
        help_text="lowercase letters, digits and hyphens, starting with a letter; producers send it as queue",
    )
    name = forms.CharField(max_length=100, required=False, help_text="shown to reviewers; the slug when left empty")
    capacity = forms.IntegerField(min_value=1, initial=50, help_text="how many items may wait at once")
    copy_from = forms.ModelChoiceField(
        queryset=Queue.objects.order_by("slug"),
        required=False,
        to_field_name="slug",
        empty_label="the default policy",
        label="Copy the policy of",
        help_text="watermarks, step limits, tuner, sampling and instructions; the capacity above wins",
    )

    def settings(self) -> dict[str, Any]:
        """The policy settings for services.create_queue; call after is_valid()."""
        source = self.cleaned_data.get("copy_from")
        settings: dict[str, Any] = dict(source.snapshot()) if source is not None else {}
        settings["capacity"] = self.cleaned_data["capacity"]
        return settings


def reviewer_users() -> QuerySet[Any]:
    """Users who may review (``access.reviewers``: the reviewer role, and
    operators while operators review), and superusers."""
    may_review = access.reviewers().values("pk")
    return (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(models.Q(is_superuser=True) | models.Q(pk__in=may_review))
        .order_by("username")
    )


class QueueMembersForm(forms.Form):
    """Who reviews a queue: everyone, or the users and groups named."""

    open_to_all = forms.BooleanField(
        required=False, label="Open to every reviewer", help_text="every reviewer may review this queue"
    )
    members = forms.ModelMultipleChoiceField(
        queryset=reviewer_users(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Reviewers",
        help_text="users who may review: the reviewer role, and operators while operators review",
    )
    member_groups = forms.ModelMultipleChoiceField(
        queryset=Group.objects.order_by("name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Groups",
        help_text="every reviewer in a ticked group reviews this queue",
    )

    provider_groups = forms.CharField(
        required=False,
        max_length=2000,
        label="Provider groups",
        help_text="comma-separated group names at the identity provider; their members review this queue",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Evaluated per form, not at import: users and groups change.
        self.fields["members"].queryset = reviewer_users()  # type: ignore[attr-defined]
        groups = Group.objects.order_by("name")
        if oidc.enabled():  # provider groups are named in their own field
            groups = groups.exclude(name__startswith=PROVIDER_GROUP_PREFIX)
        else:
            del self.fields["provider_groups"]
        self.fields["member_groups"].queryset = groups  # type: ignore[attr-defined]

    def clean_provider_groups(self) -> list[str]:
        return sorted({n.strip() for n in self.cleaned_data.get("provider_groups", "").split(",") if n.strip()})

    @staticmethod
    def initial_for(queue: Queue) -> dict[str, Any]:
        groups = list(queue.member_groups.all())
        return {
            "open_to_all": queue.open_to_all,
            "members": list(queue.members.all()),
            "member_groups": groups,
            "provider_groups": ", ".join(
                g.name.removeprefix(PROVIDER_GROUP_PREFIX) for g in groups if g.name.startswith(PROVIDER_GROUP_PREFIX)
            ),
        }


class RoutingRuleForm(forms.ModelForm):
    """One routing rule; its target is an active queue."""

    queue = forms.ModelChoiceField(
        queryset=Queue.objects.active().order_by("slug"),
        to_field_name="slug",
        label="Send to queue",
        help_text="active queues only: an archived queue accepts nothing new",
    )

    class Meta:
        model = RoutingRule
        fields = ("producer", "task_kind", "min_priority", "max_priority", "task_id_prefix", "queue", "enabled")
        labels: ClassVar[dict[str, str]] = {
            "producer": "Producer",
            "task_kind": "Task kind",
            "min_priority": "Lowest priority",
            "max_priority": "Highest priority",
            "task_id_prefix": "Task id starts with",
            "enabled": "Enabled",
        }

    task_kind = forms.ChoiceField(required=False, label="Task kind", help_text="the kinds seen so far; blank: any kind")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["queue"].queryset = Queue.objects.active().order_by("slug")  # type: ignore[attr-defined]
        self.fields["task_kind"].choices = task_kind_choices("any kind")  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        low, high = data.get("min_priority"), data.get("max_priority")
        if low is not None and high is not None and low > high:
            self.add_error("max_priority", f"must not be below the lowest priority ({low})")
        return data


class RoutePreviewForm(forms.Form):
    """Where would this work go? The same fields routing reads."""

    producer = forms.CharField(required=False, max_length=100)
    task_kind = forms.ChoiceField(required=False, label="Task kind")
    priority = forms.IntegerField(initial=0)
    task_id = forms.CharField(required=False, max_length=200, label="Task id")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Its ids apart from the add-a-rule form's on the same page (which has
        # fields of the same names), so each label points into its own form.
        kwargs.setdefault("auto_id", "preview_%s")
        super().__init__(*args, **kwargs)
        self.fields["task_kind"].choices = task_kind_choices("none")  # type: ignore[attr-defined]


def task_kind_choices(blank: str) -> list[tuple[str, str]]:
    """A task-kind select's options: ``blank`` first, then the kinds seen."""
    return [("", blank), *((kind, kind) for kind in task_kinds())]


def add_service_errors(form: forms.BaseForm, exc: ValidationError | InvalidInput) -> None:
    """Show a service's refusal on the form: each error next to its field,
    or above the form when it names no field of it."""
    if isinstance(exc, InvalidInput):
        form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        return
    for name, errors in exc.message_dict.items():
        form.add_error(name if name in form.fields else None, errors)


class AlertChannelForm(forms.Form):
    """A new alert channel. The service checks the URL with Apprise and the
    token's webhook; the URL field never shows a stored secret back."""

    name = forms.CharField(max_length=100, help_text="What operators call it, e.g. 'on-call Slack'.")
    # Short choice words, so a select shows them whole on a phone; the help says the rest.
    kind = forms.ChoiceField(
        choices=[(AlertChannel.Kind.APPRISE, "Apprise URL"), (AlertChannel.Kind.WEBHOOK, "signed webhook")],
        initial=AlertChannel.Kind.APPRISE,
        help_text="Apprise sends to Slack, Teams, Discord, e-mail, JSON and more; a signed webhook goes to an API "
        "token's webhook URL.",
    )
    queue = forms.ModelChoiceField(
        queryset=Queue.objects.active(),
        required=False,
        to_field_name="slug",
        empty_label="team-wide",
        help_text="Team-wide hears every queue's alerts and the team's; a queue's channel, that queue's alerts only.",
    )
    url = forms.CharField(
        required=False,
        label="Apprise URL",
        max_length=2000,
        widget=forms.PasswordInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
        help_text="For kind Apprise: slack://…, msteams://…, discord://…, mailto://…, json://… "
        "(see the Apprise documentation). Stored as given, shown masked.",
    )
    producer = forms.CharField(
        required=False,
        max_length=100,
        label="API token name",
        help_text="For kind webhook: the token whose webhook URL receives the queue.* events, signed with its secret.",
    )
