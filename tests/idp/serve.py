"""Run the test identity provider: ``python -m tests.idp.serve --rp URL``.

Makes a signing key, a fresh database, the site's client and three people
(``alice`` in ``reviewers``, ``olga`` in ``operators``, ``nora`` in no group,
each with the password ``idp-pw-1``), then serves on 127.0.0.1 and prints
``READY <port>`` once it answers."""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
from pathlib import Path
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

PEOPLE = {"alice": ["reviewers"], "olga": ["operators"], "nora": []}
PASSWORD = "idp-pw-1"


class ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rp", required=True, help="the site's base URL (its callback is <rp>/oidc/callback/)")
    parser.add_argument("--client-id", default="reviewqueue")
    parser.add_argument("--client-secret", required=True)
    args = parser.parse_args()

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    data = Path(tempfile.mkdtemp(prefix="idp-"))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    (data / "signing.pem").write_bytes(pem)
    os.environ.update(
        DJANGO_SETTINGS_MODULE="tests.idp.settings",
        IDP_DATA_DIR=str(data),
        IDP_SECRET_KEY=secrets.token_hex(32),
    )
    os.environ.setdefault("IDP_CONTROL_TOKEN", secrets.token_hex(16))

    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from oauth2_provider.models import Application

    call_command("migrate", verbosity=0)
    for name, groups in PEOPLE.items():
        user = User.objects.create_user(name, email=f"{name}@example.test", password=PASSWORD)
        user.groups.set([Group.objects.get_or_create(name=g)[0] for g in groups])
    Application.objects.create(
        name="reviewqueue",
        client_id=args.client_id,
        client_secret=args.client_secret,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=f"{args.rp}/oidc/callback/",
        post_logout_redirect_uris=f"{args.rp}/login/",
        algorithm=Application.RS256_ALGORITHM,
        skip_authorization=True,
    )

    from django.core.wsgi import get_wsgi_application

    server = make_server("127.0.0.1", 0, get_wsgi_application(), ThreadingServer, QuietHandler)
    print(f"READY {server.server_port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
