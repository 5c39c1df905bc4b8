"""Roles: each role's group holds exactly the permissions access.py gives it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission

from reviewqueue.access import ROLE_PERMISSIONS, ensure_groups

pytestmark = pytest.mark.django_db


def test_setup_roles_gives_each_group_exactly_its_roles_permissions(roles: dict[str, Group]) -> None:
    for role, codenames in ROLE_PERMISSIONS.items():
        have = set(Group.objects.get(name=role).permissions.values_list("codename", flat=True))
        assert have == set(codenames)


def test_setup_roles_removes_a_permission_a_role_no_longer_has(roles: dict[str, Group]) -> None:
    roles["reviewer"].permissions.add(Permission.objects.get(codename="change_reviewitem"))
    ensure_groups()
    assert not roles["reviewer"].permissions.filter(codename="change_reviewitem").exists()
