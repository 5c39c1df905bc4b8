"""Roles and what each may do, in one place: the checks views use, the
permissions each role's group holds, and ``ensure_groups``, which gives them
(the ``setup_roles`` command and the tests call it).

Checks are enforced on the server. Views declare the role they need; hiding a
link is never the protection.

A user's permissions are read from the database once and then kept in the
cache under a per-user key (``permissions``), so a request does not send the
two permission queries. Every way a role changes drops that key
(``reviewqueue.signals``: group membership, a group's or a user's
permissions, a group deleted, the user row saved), when it happens and again
after its transaction commits, so a removed role takes effect on the user's
next request; a per-user generation makes an entry that a request read
just before the change and wrote just after it stale as well. ``is_active`` and ``is_superuser`` are read from the user row,
loaded on every request, not from the cache. An unreachable cache only costs
the queries: the checks then read the database, as strict as ever.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import user_passes_test
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group, Permission
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet

REVIEW_PERMISSION = "reviewqueue.review"
OPERATE_PERMISSION = "reviewqueue.operate"

F = TypeVar("F", bound=Callable[..., object])

log = logging.getLogger(__name__)

# How long a user's permissions stay cached at most; invalidation, not this,
# makes a change take effect.
PERMISSIONS_CACHE_SECONDS = 300


def permissions_cache_key(user_id: Any) -> str:
    return f"reviewqueue:permissions:{user_id}"


def generation_cache_key(user_id: Any) -> str:
    return f"reviewqueue:permissions-generation:{user_id}"


def forget_permissions(user_ids: Iterable[Any]) -> None:
    """Drop the cached permissions of these users (their roles changed).

    Each user also gets a new generation. An entry is valid only under the
    generation it was read in, so a request that read the old permissions
    just before the change committed, and writes them to the cache just
    after, writes an entry that is already stale."""
    ids = list(user_ids)
    if not ids:
        return
    try:
        cache.set_many({generation_cache_key(i): uuid.uuid4().hex for i in ids}, timeout=None)
        cache.delete_many([permissions_cache_key(i) for i in ids])
    except Exception:  # logged; an entry written before an outage lives out its timeout
        log.exception("could not drop cached permissions", extra={"users": ids})


def permissions(user: AbstractBaseUser | AnonymousUser) -> frozenset[str]:
    """The user's model permissions ("app.codename"), from the cache when it
    has them, else from the database (then cached). Empty for an anonymous or
    inactive user."""
    if not user.is_authenticated or not user.is_active:
        return frozenset()
    held: frozenset[str] | None = getattr(user, "_reviewqueue_permissions", None)
    if held is not None:
        return held
    # The entry names the user row it was read for (its pk and date_joined):
    # a database recreated under a cache that kept its keys hands the same pk
    # to another user, who must not inherit the old row's roles.
    key, generation_key = permissions_cache_key(user.pk), generation_cache_key(user.pk)
    stamp = str(getattr(user, "date_joined", ""))
    try:
        found = cache.get_many([key, generation_key])  # one round trip
    except Exception:  # noqa: BLE001 - fail open to the database, never to a role
        log.warning("permissions cache unreachable; reading the database")
        found = {}
    generation = found.get(generation_key)
    entry = found.get(key)
    if entry is not None and tuple(entry[:2]) == (stamp, generation):
        held = entry[2]
    else:
        held = frozenset(user.get_all_permissions())
        try:
            cache.set(key, (stamp, generation, held), PERMISSIONS_CACHE_SECONDS)
        except Exception:  # noqa: BLE001 - the database answered; caching is optional
            log.warning("permissions cache unreachable; not cached")
    user._reviewqueue_permissions = held  # type: ignore[union-attr]
    return held


def has_permission(user: AbstractBaseUser | AnonymousUser, perm: str) -> bool:
    """``user.has_perm(perm)`` with the permissions cached: an active
    superuser has every permission, an inactive user none. An operator may
    review too unless ``REVIEWQUEUE_OPERATORS_REVIEW`` is off: small teams
    expect the person who runs the queue to clear it."""
    if not user.is_authenticated or not user.is_active:
        return False
    if getattr(user, "is_superuser", False):
        return True
    held = permissions(user)
    if perm == REVIEW_PERMISSION:
        return any(f"reviewqueue.{codename}" in held for codename in review_codenames())
    return perm in held


def review_codenames() -> tuple[str, ...]:
    """The permissions that let a user review (a superuser aside): the review
    permission, and the operate permission while operators review
    (``REVIEWQUEUE_OPERATORS_REVIEW``). ``has_permission`` and every list of
    who reviews (``reviewers``) read this one rule."""
    review, operate = REVIEW_PERMISSION.split(".")[1], OPERATE_PERMISSION.split(".")[1]
    return (review, operate) if settings.REVIEWQUEUE_OPERATORS_REVIEW else (review,)


def reviewers() -> QuerySet[Any]:
    """Active users who hold a permission that lets them review, through a
    group or directly (``review_codenames``): the people the review pages
    serve. Superusers are not in it unless they hold one too: an
    administrator's account is not taken for a reviewer who will come."""
    held = Permission.objects.filter(content_type__app_label="reviewqueue", codename__in=review_codenames())
    users = get_user_model().objects.filter(is_active=True)
    return users.filter(Q(user_permissions__in=held) | Q(groups__permissions__in=held))


def operators() -> QuerySet[Any]:
    """Active users who operate (the operate permission, through a group or
    directly) or are superusers: those whose pages show what an item is,
    gold copies included, so a copy is never theirs to review."""
    held = Permission.objects.filter(content_type__app_label="reviewqueue", codename=OPERATE_PERMISSION.split(".")[1])
    users = get_user_model().objects.filter(is_active=True)
    return users.filter(Q(is_superuser=True) | Q(user_permissions__in=held) | Q(groups__permissions__in=held))


def _role_required(perm: str) -> Callable[[F], F]:
    """A signed-in user without the role gets 403, not a login loop (as
    ``permission_required(..., raise_exception=True)``)."""

    def check(user: AbstractBaseUser | AnonymousUser) -> bool:
        if has_permission(user, perm):
            return True
        raise PermissionDenied

    return user_passes_test(check)  # type: ignore[return-value]


reviewer_required: Callable[[F], F] = _role_required(REVIEW_PERMISSION)
operator_required: Callable[[F], F] = _role_required(OPERATE_PERMISSION)

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
    "webhookdelivery",
    # Gold marks, answers and standings change through the quality page's
    # services (mark_gold, retire_gold, settle, reinstate), never by hand.
    "golditem",
    "judgement",
    "reviewerstanding",
    # What the item timeline reads beside the verdicts: each lease's
    # renewals and skip, and the answers reviewers took back (services.renew,
    # release, undo).
    "leaserecord",
    "undoneanswer",
    # Role changes the identity provider's groups made (services.identity).
    "roleaudit",
)
# The models an operator also changes in the admin. A queue's save goes
# through services.create_queue / policy_update, which validate and audit like
# the queues and policy pages; a queue is archived, never deleted. Routing
# rules hold no books: operators add, change and delete them.
OPERATOR_CHANGES = ("queue", "routingrule")
OPERATOR_ADDS = ("queue", "routingrule")
OPERATOR_DELETES = ("routingrule",)


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
        *_model_permissions(("add",), OPERATOR_ADDS),
        *_model_permissions(("delete",), OPERATOR_DELETES),
    ],
}


def is_reviewer(user: AbstractBaseUser | AnonymousUser) -> bool:
    return has_permission(user, REVIEW_PERMISSION)


def is_operator(user: AbstractBaseUser | AnonymousUser) -> bool:
    return has_permission(user, OPERATE_PERMISSION)


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
