"""People who sign in through the OpenID Connect provider: their account,
found by the provider's ``sub``, and their roles and queue groups, set from
the provider's groups claim at every sign-in and written to the role audit.

A provider group ``team-a`` is the Django group ``idp:team-a``: the prefix
keeps a provider group named like a role ("reviewer") from granting it, and
lets a queue's reviewers name provider groups (``Queue.member_groups``).
Roles come only from ``OIDC_REVIEWER_GROUPS`` and ``OIDC_OPERATOR_GROUPS``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group
from django.db import transaction
from django.utils import timezone

from ..access import ensure_groups
from ..models import ProviderIdentity, RoleAudit

PROVIDER_GROUP_PREFIX = "idp:"
ROLES = ("reviewer", "operator")


class IdentityRefused(Exception):
    """The provider's answer names someone this site must not sign in; the
    message is shown to the person."""


def provider_group_name(name: str) -> str:
    return f"{PROVIDER_GROUP_PREFIX}{name}"[:150]


def groups_from_claim(value: Any) -> list[str]:
    """The group names in a groups claim: a list of names, or one
    space- or comma-separated string; anything else holds none."""
    if isinstance(value, str):
        value = re.split(r"[\s,]+", value)
    if not isinstance(value, list | tuple):
        return []
    return sorted({str(v).strip() for v in value if isinstance(v, str | int) and str(v).strip()})


def _free_username(claims: dict[str, Any]) -> str:
    user_model = get_user_model()
    email = str(claims.get("email") or "")
    base = str(claims.get("preferred_username") or email.split("@")[0] or "user")
    base = re.sub(r"[^\w.@+-]", "", base)[:140] or "user"
    name, n = base, 1
    while user_model.objects.filter(username__iexact=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


@transaction.atomic
def sign_in_from_provider(
    *,
    issuer: str,
    claims: dict[str, Any],
    groups: Iterable[str],
    reviewer_groups: Iterable[str],
    operator_groups: Iterable[str],
) -> AbstractBaseUser:
    """The user the provider vouched for (``claims["sub"]`` under ``issuer``),
    created on first sign-in, with roles and provider groups set from
    ``groups``. Safe to repeat: a second call with the same claims changes
    nothing and audits nothing.

    Raises IdentityRefused when a first sign-in's email belongs to a user
    already here: linking by email would hand that account to whoever the
    provider gave the address to."""
    subject = str(claims["sub"])
    identity = (
        ProviderIdentity.objects.select_for_update()
        .select_related("user")
        .filter(issuer=issuer, subject=subject)
        .first()
    )
    user_model = get_user_model()
    email = str(claims.get("email") or "")
    if identity is None:
        if email and user_model.objects.filter(email__iexact=email).exists():
            raise IdentityRefused(
                "An account with this email address already exists here. "
                "Ask an administrator to link it to your sign-in at the identity provider."
            )
        user = user_model.objects.create_user(username=_free_username(claims), email=email)
        user.set_unusable_password()
        user.save()
        identity = ProviderIdentity.objects.create(user=user, issuer=issuer, subject=subject)
    user = identity.user
    if not user.is_active:
        raise IdentityRefused("This account is deactivated here.")
    names = sorted(set(groups))
    sync_roles(
        user=user,
        issuer=issuer,
        groups=names,
        reviewer_groups=reviewer_groups,
        operator_groups=operator_groups,
    )
    identity.groups = names
    identity.last_sign_in_at = timezone.now()
    identity.save(update_fields=["groups", "last_sign_in_at"])
    return user


def sync_roles(
    *,
    user: AbstractBaseUser,
    issuer: str,
    groups: list[str],
    reviewer_groups: Iterable[str],
    operator_groups: Iterable[str],
) -> dict[str, list[Any]]:
    """Set the user's roles and ``idp:`` groups to exactly what ``groups``
    grants, and audit what changed. Safe to repeat. Returns the changes."""
    wanted = set(groups)
    grants = {"reviewer": bool(wanted & set(reviewer_groups)), "operator": bool(wanted & set(operator_groups))}
    role_groups = {g.name: g for g in Group.objects.filter(name__in=ROLES)}
    if len(role_groups) < len(ROLES):
        role_groups = ensure_groups()
    held = set(user.groups.values_list("name", flat=True))  # type: ignore[attr-defined]
    changes: dict[str, list[Any]] = {}
    for role in ROLES:
        before, after = role in held, grants[role]
        if before != after:
            changes[role] = [before, after]
            if after:
                user.groups.add(role_groups[role])  # type: ignore[attr-defined]
            else:
                user.groups.remove(role_groups[role])  # type: ignore[attr-defined]
    before_idp = sorted(n for n in held if n.startswith(PROVIDER_GROUP_PREFIX))
    after_idp = sorted({provider_group_name(g) for g in wanted})
    if before_idp != after_idp:
        changes["groups"] = [before_idp, after_idp]
        user.groups.remove(*Group.objects.filter(name__in=set(before_idp) - set(after_idp)))  # type: ignore[attr-defined]
        user.groups.add(*[Group.objects.get_or_create(name=n)[0] for n in after_idp])  # type: ignore[attr-defined]
    if changes:
        RoleAudit.objects.create(user=user, source=issuer, changes=changes)
    return changes


def provider_groups(names: Iterable[str]) -> list[Group]:
    """The Django groups for these provider group names, made if missing, so
    an operator can name a provider group on a queue before anyone in it has
    signed in. Safe to repeat."""
    return [Group.objects.get_or_create(name=provider_group_name(n))[0] for n in sorted(set(names)) if n]
