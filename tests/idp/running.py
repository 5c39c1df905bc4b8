"""Start and drive the test identity provider from a test (``serve.py``)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class RunningProvider:
    process: subprocess.Popen[str]
    port: int
    client_id: str
    client_secret: str
    control_token: str

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}/o"

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set_groups(self, username: str, groups: list[str]) -> None:
        """Move a person between groups at the provider, as its administrator would."""
        request = urllib.request.Request(
            f"{self.origin}/control/groups/",
            data=json.dumps({"username": username, "groups": groups}).encode(),
            headers={"X-Control-Token": self.control_token, "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_provider(rp_url: str) -> RunningProvider:
    """The provider, serving once this returns; its only client is the site at ``rp_url``."""
    secret = secrets.token_urlsafe(24)
    token = secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    env["IDP_CONTROL_TOKEN"] = token
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.idp.serve", "--rp", rp_url, "--client-secret", secret],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()  # blocks until the provider serves (or exits)
    if not line.startswith("READY "):
        process.kill()
        raise RuntimeError(f"the test identity provider did not start: {line!r}")
    return RunningProvider(process, int(line.split()[1]), "reviewqueue", secret, token)
