"""policy_update and decide_rule, called directly. The pages that call them
are tested in test_ops_policy.py and test_ops_rules.py."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from reviewqueue import services
from reviewqueue.models import FilterRule, PolicyAudit, Queue

pytestmark = pytest.mark.django_db


# --- policy settings -----------------------------------------------------------------------


def test_it_audits_a_policy_change(operator: Any) -> None:
    services.policy_update(user=operator, changes={"capacity": 80, "lease_seconds": 300})
    audit = PolicyAudit.objects.get()
    assert audit.user == operator and audit.changes == {"capacity": [50, 80]}


def test_it_refuses_an_invalid_policy_and_changes_nothing(operator: Any) -> None:
    with pytest.raises(ValidationError) as err:
        services.policy_update(user=operator, changes={"low_watermark": 0.9, "high_watermark": 0.8})
    assert "low_watermark" in err.value.message_dict
    with pytest.raises(ValidationError) as err:
        services.policy_update(user=operator, changes={"step_limit": 20})
    assert "step_limit" in err.value.message_dict
    assert Queue.current().low_watermark == 0.3


# --- filter-rule decisions -----------------------------------------------------------------


def test_it_records_who_decided_a_rule_and_when(operator: Any) -> None:
    rule = FilterRule.objects.create(label="code_error", gate="python_syntax", description="parses")
    decided = services.decide_rule(rule_id=rule.pk, status=FilterRule.Status.ENABLED, user=operator)
    rule.refresh_from_db()
    assert rule.status == decided.status == FilterRule.Status.ENABLED
    assert rule.decided_by == operator and rule.decided_at is not None


def test_it_never_enables_a_rule_whose_gate_it_does_not_know(operator: Any) -> None:
    rule = FilterRule.objects.create(label="code_error", gate="no_such_gate", description="?")
    with pytest.raises(services.UnknownGate):
        services.decide_rule(rule_id=rule.pk, status=FilterRule.Status.ENABLED, user=operator)
    rule.refresh_from_db()
    assert rule.status == FilterRule.Status.PROPOSED and rule.decided_by is None
    services.decide_rule(rule_id=rule.pk, status=FilterRule.Status.DISMISSED, user=operator)
    rule.refresh_from_db()
    assert rule.status == FilterRule.Status.DISMISSED


def test_it_refuses_an_unknown_rule_or_status(operator: Any) -> None:
    with pytest.raises(services.QueueError):
        services.decide_rule(rule_id=999_999, status=FilterRule.Status.DISMISSED, user=operator)
    rule = FilterRule.objects.create(label="code_error", gate="python_syntax", description="parses")
    with pytest.raises(services.InvalidInput):
        services.decide_rule(rule_id=rule.pk, status="deleted", user=operator)
