"""Role checks, enforced on the server. Views declare the role they need;
hiding a link is never the protection."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.contrib.auth.decorators import permission_required
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

REVIEW_PERMISSION = "reviewqueue.review"
OPERATE_PERMISSION = "reviewqueue.operate"

F = TypeVar("F", bound=Callable[..., object])

# raise_exception: a signed-in user without the role gets 403, not a login loop.
reviewer_required: Callable[[F], F] = permission_required(REVIEW_PERMISSION, raise_exception=True)
operator_required: Callable[[F], F] = permission_required(OPERATE_PERMISSION, raise_exception=True)


def is_reviewer(user: AbstractBaseUser | AnonymousUser) -> bool:
    return bool(user.is_authenticated and user.has_perm(REVIEW_PERMISSION))


def is_operator(user: AbstractBaseUser | AnonymousUser) -> bool:
    return bool(user.is_authenticated and user.has_perm(OPERATE_PERMISSION))
