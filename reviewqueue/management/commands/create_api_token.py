"""Issue a producer API token from a shell; the token (and, with a webhook, its
signing secret) is printed once."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from reviewqueue.models import ApiToken
from reviewqueue.tokens import issue_token
from reviewqueue.webhooks import CallbackRefused, check_callback_url

# Least privilege: a token that only pushes outputs unless more is asked for.
DEFAULT_SCOPES = (ApiToken.Scope.OUTPUTS,)


class Command(BaseCommand):
    help = (
        "Create an API token for a producer (change its scopes or revoke it in the admin). "
        "The token is shown only once; with --webhook, so is the webhook signing secret."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name", help="the producer's name; items it pushes and runs it submits carry it")
        parser.add_argument(
            "--scopes",
            help=f"comma-separated, from {', '.join(ApiToken.Scope.values)} (default: {','.join(DEFAULT_SCOPES)})",
        )
        parser.add_argument("--metrics", action="store_true", help="also allow reading /metrics (adds the scope)")
        parser.add_argument(
            "--webhook",
            metavar="URL",
            default="",
            help="default callback URL for this producer's events (its host must be in WEBHOOK_ALLOWED_HOSTS); "
            "prints a signing secret on a second line",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["scopes"] is None:
            scopes = list(DEFAULT_SCOPES)
        else:
            scopes = [part.strip() for part in options["scopes"].split(",") if part.strip()]
        if options["metrics"]:
            scopes.append(ApiToken.Scope.METRICS)
        if not scopes:
            raise CommandError(f"give at least one scope: {', '.join(ApiToken.Scope.values)}")
        webhook = options["webhook"].strip()
        if webhook:
            try:
                check_callback_url(webhook)
            except CallbackRefused as exc:
                raise CommandError(f"--webhook: {exc.detail}") from None
        try:
            token, plain = issue_token(name=options["name"], scopes=scopes, webhook_url=webhook)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(
            f"token {token.prefix}… for {token.name!r} with scopes {', '.join(token.scopes)} created; "
            + ("it and the webhook signing secret below it are" if webhook else "store it now, it is")
            + " not shown again:"
        )
        # The token alone on stdout's first line, so `TOKEN=$(manage.py create_api_token x)`
        # works; with --webhook the signing secret follows on the second.
        self.stdout.write(plain)
        if webhook:
            self.stdout.write(token.webhook_secret)
