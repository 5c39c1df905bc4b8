"""Issue a producer API token from a shell; the token is printed once."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from reviewqueue.views.api import issue_token


class Command(BaseCommand):
    help = "Create an API token for a producer (revoke it in the admin). The token is shown only once."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name", help="the producer's name; items it pushes carry it")
        parser.add_argument("--metrics", action="store_true", help="also allow reading /metrics")

    def handle(self, *args: Any, **options: Any) -> None:
        token, plain = issue_token(name=options["name"][:100], can_read_metrics=options["metrics"])
        self.stderr.write(f"token {token.prefix}… for {token.name!r} created; store it now, it is not kept:")
        # The token alone on stdout, so `TOKEN=$(manage.py create_api_token x)` works.
        self.stdout.write(plain)
