"""Webhook delivery: reads the outbox (``services.outbox`` writes it) and sends
each event to its callback URL, signed, at least once, in order per item.

One attempt:
1. **Lease** the row with one conditional UPDATE (``locked_until`` = now +
   the timeout + a margin) that succeeds only if the row is pending, due, not
   leased, and no earlier pending row shares its ordering key; so two workers
   never attempt one row at once, and one item's events go out in order. A
   worker killed mid-attempt leaves a lease that simply runs out; the sweep
   then announces the row again.
2. **Cap** attempts in flight per receiver (scheme, normalised host and
   numeric port, read by the one URL parser, ``parse_callback``) at
   ``WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT``: a dead or hanging receiver can hold
   that many worker slots, never all of them, so other receivers' events flow.
3. **Sign** ``"<id>.<t>.<body>"`` with the producer's webhook secret
   (Standard Webhooks: HMAC-SHA256 in ``webhook-signature``) and POST it with httpx: no redirects, each phase bounded by
   ``WEBHOOK_TIMEOUT_SECONDS``, to the URL exactly as the allow-list check
   parsed it. No secret, a malformed URL or a host no longer allowed: the
   row fails with a clear ``last_error``; nothing is ever sent unsigned. Any
   other failure, whatever raises it, is recorded as the attempt's answer.
4. **Record** the answer: 2xx is delivered; anything else schedules the next
   attempt with exponential backoff and full jitter, and an event older than
   ``WEBHOOK_GIVE_UP_SECONDS`` is given up (status failed).

Locks: the lease and the result are single-row UPDATEs; on PostgreSQL the
cap's count and the lease run under a transaction-scoped advisory lock on the
receiver, so concurrent workers cannot both take the last slot.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import logging
import random
import re
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from .client.errors import InvalidEvent, SignatureError
from .client.signatures import ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign, signing_key, verify_signature
from .models import ApiToken, WebhookDelivery
from .services.cleaning import clean_text
from .services.outbox import announce

log = logging.getLogger("reviewqueue.webhooks")

# The deprecated headers, sent beside the standard ones for one release
# (docs/API.md, "Signatures"); ID_HEADER, TIMESTAMP_HEADER and SIGNATURE_HEADER
# are the Standard Webhooks ones.
LEGACY_EVENT_ID_HEADER = "Reviewqueue-Event-Id"
LEGACY_SIGNATURE_HEADER = "Reviewqueue-Signature"
USER_AGENT = "reviewqueue-webhooks/1"
# A lease outlives the attempt's timeout by this much (connect, send and read
# are each bounded by the timeout; the margin covers recording the answer).
LEASE_MARGIN_SECONDS = 10
# How much of a receiver's answer is kept in last_error.
ANSWER_EXCERPT = 300
# The sweep announces at most this many rows per run.
SWEEP_BATCH = 200
# The sweep leaves a first attempt this long to the announcement made at commit.
SWEEP_GRACE_SECONDS = 5
# A receiver checks the signature's timestamp against its clock within this.
SIGNATURE_TOLERANCE_SECONDS = 300
PENDING = WebhookDelivery.Status.PENDING


# --- callback URLs ----------------------------------------------------------------------


class CallbackRefused(ValueError):
    """A callback URL the server will not call; ``code`` is the API's error code."""

    def __init__(self, code: str, detail: str, host: str = "") -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.host = host


_DEFAULT_PORTS = {"http": 80, "https": 443}
# The authority as written: a bracketed IPv6 address or a name with no
# brackets or colons, then at most a port of ASCII digits (leading zeros
# allowed: ":08080" is port 8080, the same receiver). Anything else (an
# unclosed bracket, a zone id, "+80", "8_0") is refused before parsing.
_AUTHORITY = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[^\[\]:@]+)(?::[0-9]{0,12})?", re.ASCII)
# One DNS label (underscores allowed, as some internal names use them).
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?", re.ASCII)


@dataclass(frozen=True)
class Target:
    """A callback URL as the server reads it, once: ``url`` is what the sender
    posts to (httpx's own parse of it), ``host`` the normalised host
    (lower-case, IDNA ASCII, no trailing dot; IPv6 compressed in brackets) and
    ``port`` the numeric port, the scheme's default filled in."""

    url: httpx.URL
    scheme: str
    host: str
    port: int

    @property
    def receiver(self) -> str:
        """The canonical receiver, ``scheme://host:port``: what the in-flight cap counts."""
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def host_port(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def default_port(self) -> bool:
        return self.port == _DEFAULT_PORTS[self.scheme]


def _invalid(detail: str) -> CallbackRefused:
    return CallbackRefused("callback_url_invalid", detail)


def parse_callback(url: object) -> Target:
    """The one parser for callback URLs: the allow-list check, the in-flight
    cap and the sender all read a URL through it, so what is checked is what
    is called. CallbackRefused (``callback_url_invalid``) for anything the
    server could not call as written: never another exception. Pure."""
    if not isinstance(url, str) or not url or len(url) > 2000:
        raise _invalid("a callback URL is an http(s) URL of at most 2000 characters")
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        raise _invalid("a callback URL has no spaces or control characters")
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in _DEFAULT_PORTS:
        raise _invalid(f"scheme {scheme if sep else '(none)'!r} is not http or https")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" in authority:
        raise _invalid("a callback URL carries no user name or password")
    if not authority or not _AUTHORITY.fullmatch(authority):
        raise _invalid("the callback URL's host or port is malformed")
    try:
        parsed = httpx.URL(url)
        raw_host = parsed.raw_host.decode("ascii")
        port = _DEFAULT_PORTS[scheme] if parsed.port is None else parsed.port
    except (httpx.InvalidURL, ValueError, TypeError, UnicodeError):
        # what httpx cannot parse (an invalid international name, a port out of range)
        raise _invalid("the callback URL's host or port is malformed") from None
    if not 0 < port < 65536:
        raise _invalid("the callback URL's port is not a number in 1-65535")
    return Target(parsed, scheme, _normalised_host(raw_host), port)


def _normalised_host(raw_host: str) -> str:
    if ":" in raw_host:  # IPv6: httpx drops the brackets the allow-list keeps
        try:
            return f"[{ipaddress.IPv6Address(raw_host).compressed}]"
        except ValueError:
            raise _invalid("the callback URL's IPv6 address is not valid") from None
    # One trailing dot is the same name written fully qualified; more, or an
    # empty label anywhere ("localhost..", "a..b"), is no name at all.
    name = raw_host.lower().removesuffix(".")
    if not name or len(name) > 253 or not all(_LABEL.fullmatch(label) for label in name.split(".")):
        raise _invalid("the callback URL's host is not a valid host name")
    return name


def allowed_hosts() -> frozenset[str]:
    """``WEBHOOK_ALLOWED_HOSTS`` read by the same parser as callback URLs:
    ``host`` or ``host:port`` entries (IPv6 in brackets, ``[::1]:8080``),
    normalised; an entry the parser cannot read is kept lower-cased (and so
    matches nothing a URL can normalise to)."""
    entries: set[str] = set()
    for raw in getattr(settings, "WEBHOOK_ALLOWED_HOSTS", []):
        entry = raw.strip().lower()
        if not entry:
            continue
        try:
            target = parse_callback(f"http://{entry}/")
        except CallbackRefused:
            entries.add(entry)
            continue
        has_port = entry.rsplit("]", 1)[-1].count(":") == 1
        entries.add(target.host_port if has_port else target.host)
    return frozenset(entries)


def check_callback_url(url: str) -> str:
    """The URL, if the server may call it: http or https, no user info, and its
    host listed in ``WEBHOOK_ALLOWED_HOSTS`` exactly (``host`` allows the
    scheme's default port only; ``host:port`` that port). Raises
    CallbackRefused (``callback_url_not_allowed`` names the host;
    ``callback_url_invalid`` for any malformed URL). Pure."""
    checked_target(url)
    return url


def checked_target(url: str) -> Target:
    """``check_callback_url``'s parse: the target the sender may post to."""
    target = parse_callback(url)
    allowed = allowed_hosts()
    if target.host_port in allowed or (target.default_port and target.host in allowed):
        return target
    shown = target.host if target.default_port else target.host_port
    raise CallbackRefused(
        "callback_url_not_allowed",
        f"callbacks to {shown} are not allowed; an operator lists allowed hosts in WEBHOOK_ALLOWED_HOSTS",
        host=shown,
    )


@functools.lru_cache(maxsize=4096)
def receiver_key(url: str) -> str:
    """The canonical receiver of a stored URL (``scheme://host:port``); a URL
    the parser refuses is a receiver of its own (it fails at its attempt)."""
    try:
        return parse_callback(url).receiver
    except CallbackRefused:
        return f"unparseable:{url}"


# --- signing ----------------------------------------------------------------------------


def signature(secret: str, event_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value (Standard Webhooks): ``v1,<base64
    HMAC-SHA256 of "<id>.<timestamp>.<raw body>">``, keyed with the secret's
    bytes (``whsec_`` and base64). The id and the timestamp are signed, so an
    old event cannot be replayed with a fresh time nor passed off as a new one
    with another id. Raises ValueError for a secret that is not base64."""
    return sign(secret, event_id, timestamp, body)


def legacy_signature(secret: str, timestamp: int, body: bytes) -> str:
    """The deprecated ``Reviewqueue-Signature`` value, still sent for one
    release so receivers can move to the standard headers without losing an
    event: ``t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`` keyed
    with the secret's text. It does not cover ``Reviewqueue-Event-Id``."""
    mac = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def verify(
    secret: str,
    headers: Mapping[str, Any],
    body: bytes,
    *,
    now: float | None = None,
    tolerance: int = SIGNATURE_TOLERANCE_SECONDS,
) -> bool:
    """What a receiver does, as a yes or no: the client's ``verify_signature``
    (id, timestamp and raw body under the HMAC, compared in constant time,
    a timestamp further than ``tolerance`` seconds from its clock refused;
    any ``v1`` may match while a secret rotates). Any malformed header is a no."""
    try:
        verify_signature(secret, headers, body, tolerance, now=now)
    except (SignatureError, InvalidEvent, ValueError):
        return False
    return True


def secret_for(producer: str) -> str:
    """The producer's signing secret: its newest active token with one; blank if none."""
    token = (
        ApiToken.objects.filter(name=producer, revoked_at=None)
        .exclude(webhook_secret="")
        .order_by("-created_at", "-pk")
        .only("webhook_secret")
        .first()
    )
    return token.webhook_secret if token is not None else ""


# --- the retry schedule -----------------------------------------------------------------


def backoff_seconds(attempts: int, rng: random.Random | None = None) -> float:
    """The wait before attempt ``attempts + 1``: full jitter over an exponential
    ceiling (first delay doubled per attempt, capped at the longest), never
    under one second, so many failing events spread out instead of retrying
    together."""
    first = max(1, getattr(settings, "WEBHOOK_RETRY_FIRST_SECONDS", 10))
    longest = max(first, getattr(settings, "WEBHOOK_RETRY_MAX_SECONDS", 3600))
    ceiling = min(longest, first * 2 ** min(max(attempts - 1, 0), 40))
    return max(1.0, (rng or random).uniform(0, ceiling))


def timeout_seconds() -> float:
    return float(max(1, getattr(settings, "WEBHOOK_TIMEOUT_SECONDS", 5)))


def max_in_flight() -> int:
    """Attempts at once per receiver (keep it below the worker pool's size)."""
    return max(1, int(getattr(settings, "WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT", 2)))


# --- one attempt ------------------------------------------------------------------------


def _lease_free(now: datetime) -> Q:
    return Q(locked_until__isnull=True) | Q(locked_until__lt=now)


def _not_held_back() -> Exists:
    """True for a row with an earlier pending row of the same ordering key."""
    earlier = WebhookDelivery.objects.filter(
        status=PENDING, ordering_key=OuterRef("ordering_key"), pk__lt=OuterRef("pk")
    )
    return ~Exists(earlier)


def in_flight(url: str, now: datetime) -> int:
    """Attempts under way to ``url``'s receiver: leased pending rows whose URL
    names the same receiver, however spelled (``:8080``, ``:08080``, a
    capital or a trailing dot in the host). Leased rows are few (about one per
    worker slot), so they are compared here, through the one parser."""
    key = receiver_key(url)
    leased = WebhookDelivery.objects.filter(status=PENDING, locked_until__gte=now).values_list("url", flat=True)
    return sum(1 for other in leased if receiver_key(other) == key)


def _receiver_lock(url: str) -> None:
    """PostgreSQL: serialise cap checks per receiver for this transaction.
    SQLite serialises writers already."""
    if connection.vendor == "postgresql":
        key = zlib.crc32(receiver_key(url).encode()) - 2**31
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [0x5251, key])


def lease(pk: int, now: datetime) -> tuple[str, WebhookDelivery | None]:
    """Take row ``pk`` for one attempt: ``("leased", row)``, or why not
    (``missing``, ``done``, ``not_due``, ``leased_elsewhere``, ``held_back`` by
    an earlier event of the same item, ``busy``: the receiver's cap is reached)."""
    row = WebhookDelivery.objects.filter(pk=pk).only("status", "url", "next_attempt_at", "locked_until").first()
    if row is None:
        return "missing", None
    if row.status != PENDING:
        return "done", None
    if row.next_attempt_at > now:
        return "not_due", None
    until = now + timedelta(seconds=timeout_seconds() * 3 + LEASE_MARGIN_SECONDS)
    with transaction.atomic():
        _receiver_lock(row.url)
        if in_flight(row.url, now) >= max_in_flight():
            return "busy", None
        taken = (
            WebhookDelivery.objects.filter(_lease_free(now), pk=pk, status=PENDING, next_attempt_at__lte=now)
            .filter(_not_held_back())
            .update(locked_until=until, last_attempt_at=now, attempts=F("attempts") + 1)
        )
    if taken:
        return "leased", WebhookDelivery.objects.get(pk=pk)
    held = WebhookDelivery.objects.filter(pk=pk).filter(~_not_held_back()).exists()
    return ("held_back" if held else "leased_elsewhere"), None


@dataclass(frozen=True)
class Answer:
    """What one POST came back with: a status code, or an error in words."""

    status_code: int | None
    error: str

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def post(url: str | httpx.URL, body: bytes, headers: dict[str, str]) -> Answer:
    """POST once: no redirects, no proxies from the environment, each phase
    bounded by the timeout, at most a short excerpt of the answer read. Every
    failure comes back as an Answer with the error in words (httpx can raise
    more than its own errors, e.g. UnicodeError for a name IDNA refuses)."""
    timeout = timeout_seconds()
    try:
        with (
            httpx.Client(timeout=httpx.Timeout(timeout), follow_redirects=False, trust_env=False) as client,
            client.stream("POST", url, content=body, headers=headers) as response,
        ):
            excerpt = b""
            if not 200 <= response.status_code < 300:
                for chunk in response.iter_bytes():
                    excerpt += chunk
                    if len(excerpt) >= ANSWER_EXCERPT:
                        break
            error = "" if 200 <= response.status_code < 300 else _answer_error(response.status_code, excerpt)
            return Answer(response.status_code, error)
    except httpx.TimeoutException as exc:
        return Answer(None, f"timed out after {timeout:g} s ({type(exc).__name__})")
    except Exception as exc:  # noqa: BLE001 - any failure is this attempt's answer, recorded and retried
        return Answer(None, f"{type(exc).__name__}: {str(exc)[:ANSWER_EXCERPT]}")


def _answer_error(code: int, excerpt: bytes) -> str:
    text = excerpt[:ANSWER_EXCERPT].decode("utf-8", "replace").strip()
    return f"HTTP {code}" + (f": {text}" if text else "")


def headers_for(row: WebhookDelivery, secret: str, body: bytes, timestamp: int) -> dict[str, str]:
    """The standard headers (the id and timestamp signed with the body), and
    the deprecated ones beside them for this release."""
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        ID_HEADER: row.event_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature(secret, row.event_id, timestamp, body),
        LEGACY_EVENT_ID_HEADER: row.event_id,
        LEGACY_SIGNATURE_HEADER: legacy_signature(secret, timestamp, body),
    }


def refusal(row: WebhookDelivery) -> tuple[str, str, Target | None]:
    """Why this row must not be sent at all (``(error, secret, target)``): the
    URL is malformed or its host no longer allowed, or the producer has no
    secret to sign with. Else the secret and the target to post to."""
    try:
        target = checked_target(row.url)
    except CallbackRefused as exc:
        return f"refused: {exc.detail}", "", None
    secret = secret_for(row.producer)
    if not secret:
        return f"refused: producer {row.producer!r} has no active token with a webhook secret to sign with", "", None
    try:
        signing_key(secret)
    except ValueError:
        return f"refused: producer {row.producer!r}'s webhook secret is not whsec_ and base64; rotate it", "", None
    return "", secret, target


def attempt(row: WebhookDelivery, now: datetime) -> str:
    """Send a leased row once and record the answer; returns ``delivered``,
    ``retry`` or ``failed``."""
    error, secret, target = refusal(row)
    if error or target is None:
        return record(row, Answer(None, error), now, give_up=True)
    try:
        body = row.body.encode("utf-8")
        answer = post(target.url, body, headers_for(row, secret, body, int(time.time())))
    except Exception as exc:  # never leave a leased row unrecorded
        log.exception("webhook attempt failed before an answer", extra={"event_id": row.event_id})
        answer = Answer(None, f"{type(exc).__name__}: {str(exc)[:ANSWER_EXCERPT]}")
    return record(row, answer, timezone.now())


def record(row: WebhookDelivery, answer: Answer, now: datetime, *, give_up: bool = False) -> str:
    """Write one attempt's result on the row (if the lease is still ours, or it
    was delivered) and log it. The error is stored cleaned: a receiver's
    answer or an exception's text may hold a NUL or a lone surrogate, which
    PostgreSQL refuses, and a write that failed would leave the row leased
    and unrecorded, with no backoff."""
    attempts = row.attempts  # counted when the lease was taken: a killed attempt counts too
    next_at = None
    error = clean_text(answer.error[:1000])[0]
    fields: dict[str, object] = {
        "last_status_code": answer.status_code,
        "last_error": error,
        "locked_until": None,
    }
    if answer.delivered:
        outcome, fields["status"], fields["delivered_at"] = "delivered", WebhookDelivery.Status.DELIVERED, now
        mine = WebhookDelivery.objects.filter(pk=row.pk, status=PENDING)
    else:
        wait = backoff_seconds(attempts)
        too_old = now + timedelta(seconds=wait) - row.created_at > timedelta(
            seconds=getattr(settings, "WEBHOOK_GIVE_UP_SECONDS", 86_400)
        )
        outcome = "failed" if give_up or too_old else "retry"
        fields["status"] = WebhookDelivery.Status.FAILED if outcome == "failed" else PENDING
        fields["next_attempt_at"] = next_at = now + timedelta(seconds=wait)
        mine = WebhookDelivery.objects.filter(pk=row.pk, status=PENDING, locked_until=row.locked_until)
    written = mine.update(**fields)
    log.info(
        "webhook attempt",
        extra={
            "event_id": row.event_id,
            "event_type": row.event_type,
            "host": receiver_key(row.url),
            "attempt": attempts,
            "status_code": answer.status_code,
            "error": error[:200],
            "outcome": outcome if written else f"{outcome} (lease lost)",
            "next_attempt_at": next_at.isoformat() if next_at is not None and outcome == "retry" else None,
        },
    )
    return outcome


def deliver(pk: int) -> str:
    """One delivery task's work: lease, attempt, record. Then it hands on: the
    item's next event (after a delivery or a give-up) and the next due event
    for the same receiver are announced at once, so a receiver's backlog drains
    at its cap's pace, not the sweep's. Returns what happened."""
    now = timezone.now()
    state, row = lease(pk, now)
    if row is None:
        return state
    outcome = attempt(row, now)
    following = {_next_due_for_receiver(row, timezone.now())}
    if outcome != "retry":
        following.add(_next_in_order(row))
    for next_pk in sorted(pk for pk in following if pk is not None):
        announce(next_pk)
    return outcome


def _next_in_order(row: WebhookDelivery) -> int | None:
    return (
        WebhookDelivery.objects.filter(status=PENDING, ordering_key=row.ordering_key, pk__gt=row.pk)
        .order_by("pk")
        .values_list("pk", flat=True)
        .first()
    )


def _next_due_for_receiver(row: WebhookDelivery, now: datetime) -> int | None:
    """The oldest due, free, not-held-back event for ``row``'s receiver that no
    announcement is on its way for (a retry, or a first attempt past the
    sweep's grace), if any: a fresh event's own announcement is not doubled.
    Looks at the oldest ``SWEEP_BATCH`` candidates whose URL contains the
    host's normalised text; one further back, or spelling its host otherwise
    (an international name in Unicode), waits for the sweep."""
    grace = now - timedelta(seconds=SWEEP_GRACE_SECONDS)
    key = receiver_key(row.url)
    candidates = (
        WebhookDelivery.objects.filter(_lease_free(now), status=PENDING, next_attempt_at__lte=now)
        .filter(Q(attempts__gt=0) | Q(next_attempt_at__lte=grace))
        .exclude(pk=row.pk)
        .filter(_not_held_back())
    )
    host = key.partition("://")[2].rpartition(":")[0]
    if host and not host.startswith("["):
        candidates = candidates.filter(url__icontains=host)
    for pk, url in candidates.order_by("next_attempt_at", "pk").values_list("pk", "url")[:SWEEP_BATCH]:
        if receiver_key(url) == key:
            return pk
    return None


# --- the sweep and redelivery -----------------------------------------------------------


def due(now: datetime, limit: int = SWEEP_BATCH) -> list[tuple[int, str]]:
    """Pending rows that are due, not leased and not held back by an earlier
    event of their item, oldest due first: ``(pk, url)``. A first attempt is
    left to its announcement for a few seconds."""
    grace = now - timedelta(seconds=SWEEP_GRACE_SECONDS)
    rows = (
        WebhookDelivery.objects.filter(_lease_free(now), status=PENDING, next_attempt_at__lte=now)
        .filter(Q(attempts__gt=0) | Q(next_attempt_at__lte=grace))
        .filter(_not_held_back())
        .order_by("next_attempt_at", "pk")
        .values_list("pk", "url")[:limit]
    )
    return list(rows)


def sweep(now: datetime | None = None) -> int:
    """Announce due rows, no more per receiver than its free in-flight slots, so a
    dead receiver's backlog never floods the broker. Returns how many were
    announced. Safe to run concurrently: a row is attempted only under its lease."""
    now = now or timezone.now()
    slots: dict[str, int] = {}
    announced = 0
    for pk, url in due(now):
        key = receiver_key(url)
        if key not in slots:
            slots[key] = max_in_flight() - in_flight(url, now)
        if slots[key] <= 0:
            continue
        slots[key] -= 1
        announce(pk)
        announced += 1
    if announced:
        log.info("webhook sweep", extra={"announced": announced, "endpoints": len(slots)})
    return announced


def redeliver(pks: list[int], now: datetime | None = None) -> int:
    """Send delivered or failed events again with the same id and body (a
    receiver dedupes on the id): pending, due now, attempts kept. Returns how
    many went back to pending; each is announced after the commit."""
    now = now or timezone.now()
    with transaction.atomic():
        chosen = list(WebhookDelivery.objects.filter(pk__in=pks).exclude(status=PENDING).values_list("pk", flat=True))
        WebhookDelivery.objects.filter(pk__in=chosen).update(
            status=PENDING, next_attempt_at=now, locked_until=None, delivered_at=None
        )
        for pk in chosen:
            transaction.on_commit(lambda pk=pk: announce(pk))
    log.info("webhook redeliver", extra={"deliveries": chosen})
    return len(chosen)
