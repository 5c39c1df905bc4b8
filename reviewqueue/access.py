"""Roles and what each may do, in one place: the checks views use, and the
permissions ``setup_roles`` gives each role's group.

Checks are enforced on the server. Views declare the role they need; hiding a
link is never the protection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from django.contrib.auth.decorators import permission_required
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

REVIEW_PERMISSION = "reviewqueue.review"
OPERATE_PERMISSION = "reviewqueue.operate"

F = TypeVar("F", bound=Callable[..., object])

# raise_exception: a signed-in user without the role gets 403, not a login loop.
reviewer_required: Callable[[F], F] = permission_required(REVIEW_PERMISSION, raise_exception=True)
operator_required: Callable[[F], F] = permission_required(OPERATE_PERMISSION, raise_exception=True)

# Models an operator reads in the admin. Writing any of them there would skip
# the services that keep the queue's books (admit, claim, decide keep
# produced = auto-passed + enqueued + shed; the tuner and label counts follow
# verdicts; the logs are append-only), so the admin shows them read-only.
OPERATOR_READS = (
    "reviewitem",
    "verdict",
    "looprun",
    "filterrule",
    "labelcount",
    "modechange",
    "circuitbreakerentry",
    "steplimitchange",
    "policyaudit",
    "depthsample",
    "simulationrun",
)
# The one model an operator also changes in the admin: its save goes through
# services.policy_update, which validates and audits like the policy page.
OPERATOR_CHANGES = ("queuepolicy",)


def _model_permissions(actions: Iterable[str], models: Iterable[str]) -> list[str]:
    return [f"{action}_{model}" for model in models for action in actions]


# Role -> permission codenames of the reviewqueue app; setup_roles applies
# exactly these, so a group never keeps a permission removed here.
ROLE_PERMISSIONS: dict[str, list[str]] = {
    "reviewer": ["review"],
    "operator": [
        "operate",
        *_model_permissions(("view",), OPERATOR_READS),
        *_model_permissions(("view", "change"), OPERATOR_CHANGES),
    ],
}


def is_reviewer(user: AbstractBaseUser | AnonymousUser) -> bool:
    return bool(user.is_authenticated and user.has_perm(REVIEW_PERMISSION))


def is_operator(user: AbstractBaseUser | AnonymousUser) -> bool:
    return bool(user.is_authenticated and user.has_perm(OPERATE_PERMISSION))
