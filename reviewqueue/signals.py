"""Dropping cached permissions (``access.permissions``) whenever a role
changes, by every route Django offers: a user added to or removed from a
group (from either side), a group's or a user's own permissions changed, a
group deleted, the user row saved (``is_active``, ``is_staff``,
``is_superuser``). Signing in reads them afresh. Each drop happens at once and again after the
transaction commits, so a request that read the old roles while the change
was being written cannot leave them cached."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import Group, Permission, User
from django.contrib.auth.signals import user_logged_in
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_delete

from .access import forget_permissions, permissions

CHANGES = ("post_add", "post_remove", "pre_clear")


def _forget(user_ids: Iterable[Any]) -> None:
    ids = list(user_ids)
    forget_permissions(ids)
    transaction.on_commit(lambda: forget_permissions(ids))


def _members(group_ids: Iterable[Any]) -> list[Any]:
    return list(User.objects.filter(groups__in=list(group_ids)).values_list("pk", flat=True).distinct())


def user_groups_changed(sender: Any, instance: Any, action: str, reverse: bool, pk_set: Any, **kwargs: Any) -> None:
    """user.groups.add/remove/clear/set, or group.user_set.…"""
    if action not in CHANGES:
        return
    if not reverse:
        _forget([instance.pk])
    elif pk_set is not None:
        _forget(pk_set)
    else:  # group.user_set.clear(): its members, before they go
        _forget(_members([instance.pk]))


def group_permissions_changed(
    sender: Any, instance: Any, action: str, reverse: bool, pk_set: Any, **kwargs: Any
) -> None:
    """group.permissions.…, or permission.group_set.…: every member of the groups."""
    if action not in CHANGES:
        return
    if not reverse:
        _forget(_members([instance.pk]))
    elif pk_set is not None:
        _forget(_members(pk_set))
    else:
        _forget(_members(instance.group_set.values_list("pk", flat=True)))


def user_permissions_changed(
    sender: Any, instance: Any, action: str, reverse: bool, pk_set: Any, **kwargs: Any
) -> None:
    """user.user_permissions.…, or permission.user_set.…"""
    if action not in CHANGES:
        return
    if not reverse:
        _forget([instance.pk])
    elif pk_set is not None:
        _forget(pk_set)
    else:
        _forget(instance.user_set.values_list("pk", flat=True))


def user_saved(sender: Any, instance: User, created: bool, **kwargs: Any) -> None:
    if not created:
        _forget([instance.pk])


def group_deleted(sender: Any, instance: Group, **kwargs: Any) -> None:
    _forget(_members([instance.pk]))


def permission_deleted(sender: Any, instance: Permission, **kwargs: Any) -> None:
    users = set(instance.user_set.values_list("pk", flat=True))
    users |= set(_members(instance.group_set.values_list("pk", flat=True)))
    _forget(users)


def signed_in(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    """Signing in reads the roles afresh and caches them, so the pages that
    follow find them cached (sign-in writes anyway; a page then need not)."""
    forget_permissions([user.pk])
    permissions(user)


def connect() -> None:
    """Called once from the app's ready()."""
    m2m_changed.connect(user_groups_changed, sender=User.groups.through, dispatch_uid="rq-user-groups")
    m2m_changed.connect(group_permissions_changed, sender=Group.permissions.through, dispatch_uid="rq-group-perms")
    m2m_changed.connect(user_permissions_changed, sender=User.user_permissions.through, dispatch_uid="rq-user-perms")
    post_save.connect(user_saved, sender=User, dispatch_uid="rq-user-saved")
    pre_delete.connect(group_deleted, sender=Group, dispatch_uid="rq-group-deleted")
    user_logged_in.connect(signed_in, dispatch_uid="rq-signed-in")
    pre_delete.connect(permission_deleted, sender=Permission, dispatch_uid="rq-permission-deleted")
    from .models import Queue, RoutingRule

    for model in (Queue, RoutingRule):
        for signal in (post_save, post_delete):
            signal.connect(
                routes_changed, sender=model, dispatch_uid=f"rq-routes-{model.__name__}-{signal is post_save}"
            )


def routes_changed(sender: Any, **kwargs: Any) -> None:
    """A queue or a routing rule changed: admission's copy of them is stale."""
    from .services import routing

    routing.forget()
    transaction.on_commit(routing.forget)
