"""Dropping cached permissions (``access.permissions``) whenever a role
changes, by every route Django offers: a user added to or removed from a
group (from either side), a group's or a user's own permissions changed, a
group deleted, the user row saved (``is_active``, ``is_staff``,
``is_superuser``). Signing in reads them afresh. Each drop happens at once and again after the
transaction commits, so a request that read the old roles while the change
was being written cannot leave them cached.

The same events, and a queue's members or member groups changed from either
side, a user deleted or paused, release the leases held by whoever no longer
may review the item (``services.leases.release_lost_leases``), in the
transaction of the change."""

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
    follow find them cached (sign-in writes anyway; a page then need not).
    Afresh means past what the user object itself remembers: one that read
    its roles before signing in (a reviewer who acted through the services
    first) would otherwise answer from that memory and cache nothing."""
    forget_permissions([user.pk])
    for memory in ("_reviewqueue_permissions", "_perm_cache", "_user_perm_cache", "_group_perm_cache"):
        user.__dict__.pop(memory, None)
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
    connect_leases()
    from .models import Queue, RoutingRule

    for model in (Queue, RoutingRule):
        for signal in (post_save, post_delete):
            signal.connect(
                routes_changed, sender=model, dispatch_uid=f"rq-routes-{model.__name__}-{signal is post_save}"
            )


# --- leases of those who lose the right to review ------------------------------------------

LOSSES = ("post_remove", "post_clear")


def _release(*, queue_ids: Iterable[Any] | None = None, user_ids: Iterable[Any] | None = None) -> None:
    """Whoever may no longer review a queue gives back what they hold of it
    (``leases.release_lost_leases``), in the transaction of the change."""
    from .services import leases

    leases.release_lost_leases(
        queue_ids=None if queue_ids is None else list(queue_ids),
        user_ids=None if user_ids is None else list(user_ids),
    )


def queue_members_changed(sender: Any, instance: Any, action: str, reverse: bool, pk_set: Any, **kwargs: Any) -> None:
    """queue.members / queue.member_groups …, or user.review_queues / group.review_queues …"""
    from .models import Queue

    if action not in LOSSES:
        return
    if not reverse:
        _release(queue_ids=[instance.pk])
    elif sender is Queue.members.through:
        _release(user_ids=[instance.pk])
    else:  # a group's queues: the queues it left (all, after a clear)
        _release(queue_ids=pk_set)


def user_groups_lost(sender: Any, instance: Any, action: str, reverse: bool, pk_set: Any, **kwargs: Any) -> None:
    """A user left a group (a role, or a queue's member group)."""
    if action not in LOSSES:
        return
    _release(user_ids=[instance.pk] if not reverse else pk_set)


def permissions_lost(sender: Any, action: str, **kwargs: Any) -> None:
    """A group's or a user's permissions taken away: anyone may have lost the role."""
    if action in LOSSES:
        _release()


def user_changed(sender: Any, instance: Any, created: bool, update_fields: Any = None, **kwargs: Any) -> None:
    """Deactivated, or no longer a superuser (signing in writes only last_login)."""
    if not created and not (update_fields and set(update_fields) <= {"last_login"}):
        _release(user_ids=[instance.pk])


def user_deleting(sender: Any, instance: Any, **kwargs: Any) -> None:
    """Before the lease's holder becomes NULL (``SET_NULL``), which would leave
    it held by nobody: what the user holds goes back, whatever they may review."""
    from .services import leases

    leases.release_held_by([instance.pk])


def removed_after_delete(sender: Any, **kwargs: Any) -> None:
    """A group or a permission deleted: its users may have lost a queue or the role."""
    _release()


def standing_changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    if instance.paused_at is not None:
        _release(user_ids=[instance.reviewer_id])


def connect_leases() -> None:
    from .models import Queue as QueueModel
    from .models import ReviewerStanding

    for through in (QueueModel.members.through, QueueModel.member_groups.through):
        m2m_changed.connect(queue_members_changed, sender=through, dispatch_uid=f"rq-leases-{through.__name__}")
    m2m_changed.connect(user_groups_lost, sender=User.groups.through, dispatch_uid="rq-leases-user-groups")
    for through in (Group.permissions.through, User.user_permissions.through):
        m2m_changed.connect(permissions_lost, sender=through, dispatch_uid=f"rq-leases-{through.__name__}")
    post_save.connect(user_changed, sender=User, dispatch_uid="rq-leases-user-saved")
    pre_delete.connect(user_deleting, sender=User, dispatch_uid="rq-leases-user-deleted")
    for model in (Group, Permission):
        post_delete.connect(removed_after_delete, sender=model, dispatch_uid=f"rq-leases-{model.__name__}-deleted")
    post_save.connect(standing_changed, sender=ReviewerStanding, dispatch_uid="rq-leases-standing")


def routes_changed(sender: Any, **kwargs: Any) -> None:
    """A queue or a routing rule changed: admission's copy of them is stale."""
    from .services import routing

    routing.forget()
    transaction.on_commit(routing.forget)
