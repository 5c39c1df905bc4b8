"""Signing (against an independent HMAC computation), the callback host check's
edges, and the retry schedule's bounds."""

from __future__ import annotations

import hashlib
import hmac
import random
from typing import Any

import pytest

from reviewqueue import webhooks
from reviewqueue.webhooks import CallbackRefused, check_callback_url

SECRET = "whsec_test-secret"


def independent_hmac(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()


def test_the_signature_is_hmac_sha256_of_timestamp_dot_raw_body() -> None:
    body = '{"id":"evt_1","note":"naïve \\u2028"}'.encode()
    header = webhooks.signature(SECRET, 1_700_000_000, body)
    assert header == f"t=1700000000,v1={independent_hmac(SECRET, 1_700_000_000, body)}"


def test_verify_accepts_the_signed_body_and_refuses_any_change() -> None:
    body = b'{"id":"evt_1"}'
    header = webhooks.signature(SECRET, 1_000, body)
    assert webhooks.verify(SECRET, header, body, now=1_010)
    assert not webhooks.verify(SECRET, header, body + b" ", now=1_010)
    assert not webhooks.verify("whsec_other", header, body, now=1_010)
    assert not webhooks.verify(SECRET, header.replace("t=1000", "t=1001"), body, now=1_010)
    assert not webhooks.verify(SECRET, header, body, now=1_000 + 301), "a stale timestamp is a replay"
    assert not webhooks.verify(SECRET, "v1=" + header.split("v1=")[1], body, now=1_010), "no timestamp"
    # several v1 values (during a rotation) verify if any matches
    rotated = f"t=1000,v1={'0' * 64},v1={independent_hmac(SECRET, 1000, body)}"
    assert webhooks.verify(SECRET, rotated, body, now=1_000)


@pytest.fixture
def allow(settings: Any) -> Any:
    def set_hosts(*hosts: str) -> None:
        settings.WEBHOOK_ALLOWED_HOSTS = list(hosts)

    return set_hosts


@pytest.mark.parametrize(
    ("hosts", "url"),
    [
        (["hooks.example.com"], "https://hooks.example.com/rq"),
        (["hooks.example.com"], "https://HOOKS.Example.com:443/rq"),
        (["hooks.example.com"], "http://hooks.example.com/rq?x=1"),
        (["hooks.example.com:8443"], "https://hooks.example.com:8443/rq"),
        (["127.0.0.1:9000"], "http://127.0.0.1:9000/hook"),
        (["[::1]:9000"], "http://[::1]:9000/hook"),
        (["[::1]"], "http://[0:0::1]/hook"),
        (["HOOKS.example.com"], "https://hooks.example.com./rq"),
    ],
)
def test_listed_hosts_are_allowed(allow: Any, hosts: list[str], url: str) -> None:
    allow(*hosts)
    assert check_callback_url(url) == url


@pytest.mark.parametrize(
    ("hosts", "url", "code", "named"),
    [
        ([], "https://hooks.example.com/rq", "callback_url_not_allowed", "hooks.example.com"),
        (
            ["hooks.example.com"],
            "https://hooks.example.com:8443/rq",
            "callback_url_not_allowed",
            "hooks.example.com:8443",
        ),
        (["hooks.example.com:8443"], "https://hooks.example.com/rq", "callback_url_not_allowed", "hooks.example.com"),
        (
            ["hooks.example.com"],
            "https://evil.hooks.example.com/rq",
            "callback_url_not_allowed",
            "evil.hooks.example.com",
        ),
        (
            ["hooks.example.com"],
            "https://hooks.example.com.evil.net/",
            "callback_url_not_allowed",
            "hooks.example.com.evil.net",
        ),
        (["127.0.0.1:9000"], "http://127.0.0.1:9001/hook", "callback_url_not_allowed", "127.0.0.1:9001"),
        (["127.0.0.1:9000"], "http://localhost:9000/hook", "callback_url_not_allowed", "localhost:9000"),
        (["[::1]:9000"], "http://[::2]:9000/hook", "callback_url_not_allowed", "[::2]:9000"),
        (["hooks.example.com"], "https://user:pw@hooks.example.com/rq", "callback_url_invalid", ""),
        (["hooks.example.com"], "https://hooks.example.com@127.0.0.1/rq", "callback_url_invalid", ""),
        (["hooks.example.com"], "ftp://hooks.example.com/rq", "callback_url_invalid", ""),
        (["hooks.example.com"], "file:///etc/passwd", "callback_url_invalid", ""),
        (["hooks.example.com"], "hooks.example.com/rq", "callback_url_invalid", ""),
        (["hooks.example.com"], "https://hooks.example.com:99999/rq", "callback_url_invalid", ""),
        (["hooks.example.com"], "https://hooks.example.com/r q", "callback_url_invalid", ""),
        (["hooks.example.com"], "https:///rq", "callback_url_invalid", ""),
        (["hooks.example.com"], "https://hooks.example.com/" + "a" * 2000, "callback_url_invalid", ""),
    ],
)
def test_anything_else_is_refused_with_a_code_naming_the_host(
    allow: Any, hosts: list[str], url: str, code: str, named: str
) -> None:
    allow(*hosts)
    with pytest.raises(CallbackRefused) as refused:
        check_callback_url(url)
    assert refused.value.code == code
    if named:
        assert refused.value.host == named
        assert named in refused.value.detail


def test_backoff_grows_exponentially_within_full_jitter_bounds(settings: Any) -> None:
    settings.WEBHOOK_RETRY_FIRST_SECONDS = 10
    settings.WEBHOOK_RETRY_MAX_SECONDS = 3600
    rng = random.Random(7)
    for attempts, ceiling in [(1, 10), (2, 20), (3, 40), (6, 320), (9, 2560), (10, 3600), (60, 3600)]:
        draws = [webhooks.backoff_seconds(attempts, rng) for _ in range(400)]
        assert all(1.0 <= d <= ceiling for d in draws), (attempts, min(draws), max(draws))
        # full jitter: the draws spread over the whole range, not bunched at the ceiling
        assert min(draws) < ceiling * 0.15 + 1 and max(draws) > ceiling * 0.85


def test_backoff_over_a_day_gives_about_two_dozen_attempts(settings: Any) -> None:
    """The documented schedule: with the defaults, an event that never gets
    through is tried roughly 25-50 times before it is given up."""
    settings.WEBHOOK_RETRY_FIRST_SECONDS, settings.WEBHOOK_RETRY_MAX_SECONDS = 10, 3600
    rng = random.Random(3)
    elapsed, attempts = 0.0, 0
    while elapsed < 86_400:
        attempts += 1
        elapsed += webhooks.backoff_seconds(attempts, rng)
    assert 25 <= attempts <= 60


def test_the_verification_recipe_in_the_api_docs_verifies_our_signature() -> None:
    """The Python a receiver copies from docs/API.md accepts what we send and
    refuses a tampered body."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "API.md").read_text()
    recipe = doc.split("**Verifying.**", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(recipe, "API.md", "exec"), namespace)  # noqa: S102 - the project's own docs
    body = b'{"id":"evt_9","type":"item.decided"}'
    import time

    header = webhooks.signature(SECRET, int(time.time()), body)
    assert namespace["verify"](SECRET, header, body)
    assert not namespace["verify"](SECRET, header, body.replace(b"9", b"8"))
