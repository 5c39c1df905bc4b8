"""Rules written once: what counts as an approval, and the bounds of a queue's
settings. Each test drives the copies from the one source, so a second copy
that drifts (a form, a model or a statistic with its own numbers) fails here."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from loops.cutoff import CUTOFF_REASONS
from reviewqueue import agreement, policy
from reviewqueue.forms import PolicyForm
from reviewqueue.models import CutoffReason, Judgement, Queue, Verdict
from reviewqueue.services import review_quality

# Model instances take the default queue's pk.
pytestmark = pytest.mark.django_db

# ---------------------------------------------------------------- decision categories


def test_every_decision_has_a_category() -> None:
    assert set(policy.DECISION_CATEGORIES) == set(Verdict.Decision.values)


@pytest.mark.parametrize("decision", Verdict.Decision.values)
def test_the_models_and_the_services_follow_the_policys_category(decision: str) -> None:
    approved = policy.counts_as_approval(decision)
    assert Verdict(decision=decision).approved is approved
    assert Judgement(decision=decision).approved is approved
    assert review_quality.category(decision) == policy.decision_category(decision)


def test_a_changed_category_reaches_every_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    # Were any reader to keep its own copy, it would still call an edit an approval.
    monkeypatch.setattr(policy, "DECISION_CATEGORIES", {**policy.DECISION_CATEGORIES, "edit": policy.REJECT})
    assert not Verdict(decision="edit").approved
    assert not Judgement(decision="edit").approved
    assert review_quality.category("edit") == policy.REJECT
    assert review_quality.Answer(decision="edit").category == policy.REJECT
    assert not hasattr(agreement, "DECISION_CATEGORY")


# ---------------------------------------------------------------- cutoff reasons


def test_the_models_cutoff_reasons_begin_with_the_loops() -> None:
    assert tuple(CutoffReason.values[: len(CUTOFF_REASONS)]) == CUTOFF_REASONS
    assert set(CutoffReason.values) - set(CUTOFF_REASONS) == {"sampled", "external"}


# ---------------------------------------------------------------- policy bounds

INTEGER_FIELDS = {"capacity", "min_step_limit", "tuner_window", "lease_seconds", "gold_min_answers", "sla_minutes"}


def edges(name: str) -> list[tuple[float, bool]]:
    """Values at each end of the setting's bound, one just inside and one just outside."""
    bound = policy.BOUNDS[name]
    step = 1 if name in INTEGER_FIELDS else 0.001
    values = []
    if bound.low is not None:
        values += [(bound.low, not bound.low_open), (bound.low - step, False), (bound.low + step, True)]
    if bound.high is not None:
        values += [(bound.high, not bound.high_open), (bound.high + step, False), (bound.high - step, True)]
    return values


def settings_with(name: str, value: float) -> dict[str, Any]:
    """A valid queue's settings with one changed; the other side of an
    ordered pair is moved out of the way, so only the bound is tested."""
    data = {field: getattr(Queue(), field) for field in Queue.EDITABLE_FIELDS}
    data.update(step_limit=5, min_step_limit=1, max_step_limit=100, approve_low=0.0, approve_high=1.0)
    data.update(low_watermark=0.0, high_watermark=1.0, age_high_minutes=None, age_low_minutes=None)
    if name == "age_high_minutes":
        data["age_low_minutes"] = 0.0
    if name == "age_low_minutes":
        data["age_high_minutes"] = 1e6
    if name == "min_step_limit":
        data["step_limit"] = data["max_step_limit"] = 100
    data[name] = value
    return data


def model_errors(data: dict[str, Any]) -> set[str]:
    queue = Queue(slug="bounds", name="bounds", **data)
    try:
        queue.clean()
    except ValidationError as exc:
        return set(exc.message_dict)
    return set()


CASES = [(name, value, ok) for name in policy.BOUNDS for value, ok in edges(name)]


@pytest.mark.parametrize(("name", "value", "ok"), CASES, ids=[f"{n}={v:g}" for n, v, _ in CASES])
def test_the_form_and_the_model_reject_exactly_what_the_table_rejects(name: str, value: float, ok: bool) -> None:
    data = settings_with(name, value)
    assert policy.within(name, value) is ok
    assert model_errors(settings_with("capacity", 50)) == set()  # the baseline is valid
    form_errors, errors = set(PolicyForm.rule_errors(data)), model_errors(data)
    if not ok:
        assert name in form_errors and name in errors
        return
    # Inside its bound, the setting is refused only where an order cannot
    # hold there (the lower approve rate at 1): both must agree on that too.
    in_order = all(policy.in_order(lower, upper, data) for lower, upper in policy.ORDER if name in (lower, upper))
    assert name not in form_errors or not in_order
    assert bool(form_errors) is not in_order and bool(errors) is not in_order, (form_errors, errors)


@pytest.mark.parametrize(("lower", "upper"), list(policy.ORDER))
def test_the_form_and_the_model_keep_the_tables_orders(lower: str, upper: str) -> None:
    strict = policy.ORDER[(lower, upper)]
    base = settings_with("capacity", 50)
    if lower.startswith("age_"):
        base.update(age_low_minutes=10.0, age_high_minutes=20.0)
    for lower_value, upper_value in (
        (base[lower], base[upper]),
        (base[lower], base[lower]),
        (base[upper], base[lower]),
    ):
        data = {**base, lower: lower_value, upper: upper_value}
        if (lower, upper) == ("min_step_limit", "max_step_limit"):
            data["step_limit"] = lower_value
        equal = lower_value == upper_value
        ok = (not strict) if equal else lower_value < upper_value
        assert policy.in_order(lower, upper, data) is ok
        assert bool(PolicyForm.rule_errors(data)) is not ok, (data[lower], data[upper])
        assert bool(model_errors(data)) is not ok, (data[lower], data[upper])


@pytest.mark.parametrize(
    ("build", "name"),
    [
        (lambda v: policy.Watermarks(capacity=v), "capacity"),
        (lambda v: policy.Watermarks(high=v, low=0.0), "high_watermark"),
        (lambda v: policy.TunerConfig(window=v), "tuner_window"),
        (lambda v: policy.TunerConfig(min_steps=v, max_steps=100), "min_step_limit"),
        (lambda v: policy.Watermarks(age_high=v, age_low=0.0), "age_high_minutes"),
    ],
)
def test_the_policys_dataclasses_read_the_same_table(build: Any, name: str) -> None:
    for value, ok in edges(name):
        if ok:
            build(value)
        else:
            with pytest.raises(policy.PolicyError):
                build(value)
