"""A provider whose answers each test writes: a real HTTP server on
127.0.0.1 serving discovery, keys, a token endpoint and userinfo, whose ID
token the test shapes (a wrong issuer, another key, an old nonce...). The
site talks to it over HTTP exactly as to a real provider."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class ScriptedProvider:
    def __init__(
        self, client_id: str = "reviewqueue", client_secret: str = "scripted-client-secret-long-enough-for-hs256"
    ) -> None:
        self.client_id = client_id
        self.client_secret = client_secret
        self.keys: dict[str, rsa.RSAPrivateKey] = {"k1": new_key()}
        self.published: list[str] = ["k1"]  # the kids the JWKS endpoint lists
        self.jwks_fetches = 0
        self.token_requests: list[dict[str, str]] = []
        self.challenges: dict[str, str] = {}  # code -> code_challenge the site sent
        # The test's hook: given the nonce the site asked for, the ID token to return.
        self.id_token: Callable[[str], str] = lambda nonce: self.sign(self.claims(nonce=nonce))
        self.userinfo: dict[str, Any] | None = None
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/o"

    def claims(self, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": self.client_id,
            "sub": "sub-alice",
            "iat": now,
            "exp": now + 300,
            "email": "alice@example.test",
            "preferred_username": "alice",
            "groups": ["reviewers"],
        }
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}

    def sign(self, claims: dict[str, Any], kid: str = "k1", key: rsa.RSAPrivateKey | None = None) -> str:
        return jwt.encode(claims, key or self.keys[kid], algorithm="RS256", headers={"kid": kid})

    def authorize(self, nonce: str, code: str = "code-1") -> None:
        """Remember the nonce for ``code`` as the provider's authorize step would."""
        self._pending[code] = nonce

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        provider = self
        self._pending: dict[str, str] = {}

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def _json(self, body: Any, status: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                base = provider.issuer
                if self.path == "/o/.well-known/openid-configuration":
                    self._json(
                        {
                            "issuer": base,
                            "authorization_endpoint": f"{base}/authorize/",
                            "token_endpoint": f"{base}/token/",
                            "userinfo_endpoint": f"{base}/userinfo/",
                            "jwks_uri": f"{base}/jwks/",
                            "end_session_endpoint": f"{base}/logout/",
                            "id_token_signing_alg_values_supported": ["RS256"],
                        }
                    )
                elif self.path == "/o/jwks/":
                    provider.jwks_fetches += 1
                    keys = []
                    for kid in provider.published:
                        jwk = json.loads(RSAAlgorithm.to_jwk(provider.keys[kid].public_key()))
                        keys.append({**jwk, "kid": kid, "use": "sig", "alg": "RS256"})
                    self._json({"keys": keys})
                elif self.path == "/o/userinfo/":
                    self._json(provider.userinfo if provider.userinfo is not None else {"sub": "nobody"})
                else:
                    self._json({"error": "not_found"}, 404)

            def do_POST(self) -> None:
                if self.path != "/o/token/":
                    self._json({"error": "not_found"}, 404)
                    return
                form = {
                    k: v[0] for k, v in parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode()).items()
                }
                provider.token_requests.append(form)
                nonce = provider._pending.pop(form.get("code", ""), None)
                challenge = provider.challenges.get(form.get("code", ""))
                verifier = form.get("code_verifier", "")
                digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
                if nonce is None or form.get("client_secret") != provider.client_secret or digest != challenge:
                    self._json({"error": "invalid_grant"}, 400)
                    return
                self._json(
                    {"access_token": "at-" + form["code"], "token_type": "Bearer", "id_token": provider.id_token(nonce)}
                )

        return Handler
