"""Give a producer's token a new webhook signing secret and print it once."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from reviewqueue.models import ApiToken
from reviewqueue.tokens import rotate_webhook_secret


class Command(BaseCommand):
    help = (
        "Replace the webhook signing secret of a producer's newest active token (or the token with "
        "--prefix). The old secret stops signing at once; events the receiver refuses meanwhile are "
        "retried, so none is lost. The new secret is shown only once."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name", help="the producer's (the token's) name")
        parser.add_argument("--prefix", default="", help="the token's prefix (the 8 characters after rq_)")

    def handle(self, *args: Any, **options: Any) -> None:
        tokens = ApiToken.objects.filter(name=options["name"], revoked_at=None)
        if options["prefix"]:
            tokens = tokens.filter(prefix=options["prefix"])
        token = tokens.order_by("-created_at", "-pk").first()
        if token is None:
            raise CommandError(
                f"no active token named {options['name']!r}" + (" with that prefix" if options["prefix"] else "")
            )
        secret = rotate_webhook_secret(token)
        self.stderr.write(f"new webhook signing secret for token {token.prefix}… ({token.name!r}); store it now:")
        self.stdout.write(secret)
