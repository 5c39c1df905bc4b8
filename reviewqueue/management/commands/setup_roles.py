"""Create the reviewer and operator groups, and optionally a user in one of them."""

from __future__ import annotations

import argparse
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from reviewqueue.access import ROLE_PERMISSIONS, MissingPermissions, ensure_groups


class Command(BaseCommand):
    help = "Create the reviewer and operator groups; with --user, create or update a user in a role."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--user", help="username to create or update")
        parser.add_argument("--role", choices=sorted(ROLE_PERMISSIONS), action="append", default=[])
        parser.add_argument("--password", help="set this password (otherwise an existing one is kept)")
        parser.add_argument("--staff", action="store_true", help="also allow the Django admin")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            groups = ensure_groups()
        except MissingPermissions as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"groups ready: {', '.join(sorted(groups))}")
        username = options.get("user")
        if not username:
            return
        roles: list[str] = options["role"] or []
        if not roles:
            raise CommandError("--user needs at least one --role")
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(username=username)
        password = options.get("password")
        if password:
            user.set_password(str(password))
        elif created:
            user.set_unusable_password()
        if options.get("staff"):
            user.is_staff = True
        user.save()
        for role in roles:
            user.groups.add(groups[role])
        self.stdout.write(f"{'created' if created else 'updated'} {username}: {', '.join(roles)}")
