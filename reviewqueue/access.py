"""Roles and what each may do, in one place: the checks views use, the
permissions each role's group holds, and ``ensure_groups``, which gives them
(the ``setup_roles`` command and the tests call it).

Checks are enforced on the server. Views declare the role they need; hiding a
link is never the protection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from django.contrib.auth.decorators import permission_required
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group, Permission

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


# Role -> permission codenames of the reviewqueue app; ensure_groups applies
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


class MissingPermissions(LookupError):
    """A role names a permission the database does not have (migrations not run)."""


def ensure_groups() -> dict[str, Group]:
    """Idempotent: the groups exist with exactly their role's permissions.
    Raises MissingPermissions rather than leave a role without a right."""
    groups = {}
    for role, codenames in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role)
        perms = list(Permission.objects.filter(content_type__app_label="reviewqueue", codename__in=codenames))
        missing = set(codenames) - {p.codename for p in perms}
        if missing:  # a renamed model must not silently leave a role without its rights
            raise MissingPermissions(f"permissions missing for role {role}: {', '.join(sorted(missing))} (run migrate)")
        group.permissions.set(perms)
        groups[role] = group
    return groups
