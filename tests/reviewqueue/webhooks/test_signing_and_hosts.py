"""Signing (against an independent HMAC computation), the callback host check's
edges, and the retry schedule's bounds."""

from __future__ import annotations

import base64
import hashlib
import hmac
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewqueue import webhooks
from reviewqueue.webhooks import CallbackRefused, check_callback_url

SECRET = "whsec_" + base64.b64encode(b"test secret, 32 bytes of key....").decode()
HEADERS = {"webhook-id": "evt_1", "webhook-timestamp": "1000"}


def independent_hmac(secret: str, event_id: str, timestamp: int, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = hmac.new(key, f"{event_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def test_the_signature_is_hmac_sha256_of_id_dot_timestamp_dot_raw_body() -> None:
    body = '{"id":"evt_1","note":"naïve \\u2028"}'.encode()
    assert webhooks.signature(SECRET, "evt_1", 1_700_000_000, body) == independent_hmac(
        SECRET, "evt_1", 1_700_000_000, body
    )


def test_verify_accepts_the_signed_body_and_refuses_any_change() -> None:
    body = b'{"id":"evt_1"}'
    signed = {**HEADERS, "webhook-signature": webhooks.signature(SECRET, "evt_1", 1_000, body)}
    other = "whsec_" + base64.b64encode(b"another key").decode()
    assert webhooks.verify(SECRET, signed, body, now=1_010)
    assert not webhooks.verify(SECRET, signed, body + b" ", now=1_010)
    assert not webhooks.verify(other, signed, body, now=1_010)
    assert not webhooks.verify(SECRET, {**signed, "webhook-timestamp": "1001"}, body, now=1_010)
    assert not webhooks.verify(SECRET, {**signed, "webhook-id": "evt_2"}, body, now=1_010), "the id is signed"
    assert not webhooks.verify(SECRET, signed, body, now=1_000 + 301), "a stale timestamp is a replay"
    assert not webhooks.verify(SECRET, {k: v for k, v in signed.items() if k != "webhook-timestamp"}, body, now=1_010)
    # several v1 values (during a rotation) verify if any matches
    rotated = {**HEADERS, "webhook-signature": f"v1,{'A' * 44} {independent_hmac(SECRET, 'evt_1', 1000, body)}"}
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


def recipe() -> Any:
    """The ``verify`` a receiver copies from docs/API.md."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "API.md").read_text()
    text = doc.split("**Verifying.**", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(text, "API.md", "exec"), namespace)  # noqa: S102 - the project's own docs
    return namespace["verify"]


def test_the_verification_recipe_in_the_api_docs_verifies_our_signature() -> None:
    """The Python a receiver copies from docs/API.md accepts what we send and
    refuses a tampered body or another id."""
    import time

    verify = recipe()
    body = b'{"id":"evt_9","type":"item.decided"}'
    stamp = int(time.time())
    signed = {"webhook-id": "evt_9", "webhook-timestamp": str(stamp)}
    signed["webhook-signature"] = webhooks.signature(SECRET, "evt_9", stamp, body)
    assert verify(SECRET, signed, body) == "evt_9"
    assert verify(SECRET, signed, body.replace(b"9", b"8")) is None
    assert verify(SECRET, {**signed, "webhook-id": "evt_8"}, body) is None


fuzz_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="0123456789\u00b2\u0663\uff11 .-", max_size=450),
    st.builds(lambda parts: " ".join(parts), st.lists(st.text(alphabet="v1,=+/aA\u00e9", max_size=12), max_size=4)),
    st.none(),
    st.integers(),
    st.binary(max_size=20),
)
fuzz_headers = st.builds(
    lambda i, t, s: {
        k: v for k, v in (("webhook-id", i), ("webhook-timestamp", t), ("webhook-signature", s)) if v is not None
    },
    fuzz_text,
    fuzz_text,
    fuzz_text,
)


@settings(max_examples=300, deadline=None)
@given(fuzz_headers)
def test_fuzzed_headers_are_refused_by_the_servers_helper_and_the_docs_recipe(fuzzed: dict[str, Any]) -> None:
    """Every malformed header ends in the documented answer: False from the
    server's helper, None from the recipe in docs/API.md; never an exception."""
    body = b'{"id":"evt_1"}'
    assert webhooks.verify(SECRET, fuzzed, body, now=1_000) is False
    assert RECIPE(SECRET, fuzzed, body) is None


RECIPE = recipe()


# Past the timestamp: a fresh one, so the id and the signature values are
# what each verifier reads (the fuzz above is mostly refused for its time).
fresh_headers = st.builds(
    lambda i, s, ids: {"webhook-id": "evt_1" if ids else i, "webhook-signature": s},
    fuzz_text,
    st.one_of(
        fuzz_text,
        st.builds(lambda parts: " ".join(parts), st.lists(st.text(max_size=50), max_size=4)),
        st.builds(lambda v: "v1," + v, st.text(max_size=60)),
        st.builds(lambda n: "v1," + "A" * n, st.integers(0, 5000)),
    ),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(fresh_headers, st.sampled_from([b'{"id":"evt_1"}', b"", b"\xff\x00", b"[1]"]))
def test_fuzzed_ids_and_signatures_with_a_fresh_timestamp_are_refused_by_all_three(
    fuzzed: dict[str, Any], body: bytes
) -> None:
    """The client's verify_signature ends in a documented error, the server's
    helper in False and the docs' recipe in None, for ids and signature
    values of any text (non-ASCII, control characters, thousands of
    characters, many entries) once the timestamp holds."""
    import time

    from reviewqueue.client import InvalidEvent, SignatureError, verify_signature

    stamp = int(time.time())
    headers = {k: v for k, v in {**fuzzed, "webhook-timestamp": str(stamp)}.items() if v is not None and k is not None}
    try:
        verify_signature(SECRET, headers, body, now=stamp)
    except SignatureError as refused:
        assert refused.code in {"malformed_signature", "signature_mismatch"}
    except InvalidEvent:
        pytest.fail("an unsigned body was parsed")
    else:
        pytest.fail("a fuzzed signature verified")
    assert webhooks.verify(SECRET, headers, body, now=stamp) is False
    assert RECIPE(SECRET, headers, body) is None
