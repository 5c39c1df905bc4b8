"""Alerts: look at each condition, keep its episode, and tell people once
(ARCHITECTURE.md, "Warn before it overflows").

``evaluate_alerts`` reads the conditions (the selectors in ``stats``), moves
each condition's episode with ``policy.step_alert`` under that episode row's
lock (one row per queue, condition and subject; nothing else is locked),
and, when an episode fires or recovers, writes an ``Alert`` and the queue's
signed webhook events (through the outbox, in the same transaction). The
Apprise channels are called after the commit, outside any lock, and each
outcome is recorded on the alert. The periodic task and every mode change
run it.

Channels are changed by operators (``channel_create``, ``channel_delete``,
``channel_test``), audited in the policy change log with their URLs masked.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import apprise
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from .. import policy, stats
from ..models import (
    Alert,
    AlertChannel,
    AlertCondition,
    AlertEpisode,
    ApiToken,
    EventType,
    PolicyAudit,
    Queue,
    ReviewerStanding,
    WebhookDelivery,
)
from . import outbox
from .errors import InvalidInput

log = logging.getLogger("reviewqueue.alerts")

# A webhook delivery retried or given up within this window counts as failing.
FAILING_DELIVERIES_WINDOW = timedelta(minutes=15)
# Conditions with a signed webhook event of their own (entering draft and
# escalating to shedding are both a mode change); every recovery of one is ``queue.recovered``.
EVENT_OF = {
    AlertCondition.MODE: EventType.QUEUE_MODE_CHANGED,
    AlertCondition.SHEDDING: EventType.QUEUE_MODE_CHANGED,
    AlertCondition.SLA_AT_RISK: EventType.QUEUE_SLA_AT_RISK,
    AlertCondition.SLA_BREACHED: EventType.QUEUE_SLA_BREACHED,
}
# A numeric condition, once firing, holds until its value drops below this share of its limit.
CLEAR_SHARE = 0.8


@dataclass(frozen=True)
class Reading:
    """One condition as it is now: whether it holds, and what to say about it."""

    condition: str
    holds: bool
    detail: str
    queue: Queue | None = None
    subject: str = ""
    data: dict[str, Any] | None = None

    @property
    def scope(self) -> str:
        return f"queue:{self.queue.pk}" if self.queue is not None else "team"


def hold_seconds() -> float:
    return float(settings.ALERT_HOLD_SECONDS)


# --- reading the conditions ------------------------------------------------------------


def queue_readings(queue: Queue, now: datetime, firing: set[str]) -> list[Reading]:
    """The queue's four conditions; ``firing`` names those whose episode is on
    (a numeric condition's band depends on it)."""
    flow = stats.rates(stats.RATE_WINDOWS[stats.DEFAULT_RATE_WINDOW], now=now, queue=queue)
    fc = stats.queue_forecast(queue, now=now, flow=flow)
    oldest_s = stats.oldest_waiting_age(now=now, queue=queue)
    oldest = None if oldest_s is None else oldest_s / 60
    sla = float(queue.sla_minutes)
    numbers = {
        "mode": queue.mode,
        "depth": queue.depth,
        "capacity": queue.capacity,
        "oldest_waiting_seconds": oldest_s,
        "sla_minutes": queue.sla_minutes,
        "minutes_to_sla_breach": fc.to_sla_breach,
        "minutes_to_high_watermark": fc.to_high_watermark,
    }
    at_risk = fc.to_sla_breach is not None and fc.to_sla_breach <= queue.sla_risk_minutes
    breached = policy.condition_holds(AlertCondition.SLA_BREACHED in firing, oldest, on=sla, off=CLEAR_SHARE * sla)
    readings = [
        Reading(AlertCondition.MODE, queue.mode != policy.Mode.NORMAL, f"mode {queue.mode}", queue, data=numbers),
        # Draft escalating to shedding is news of its own, with its own episode.
        Reading(AlertCondition.SHEDDING, queue.mode == policy.Mode.SHEDDING, f"mode {queue.mode}", queue, data=numbers),
        Reading(AlertCondition.SLA_AT_RISK, at_risk, _risk_words(fc, queue), queue, data=numbers),
        Reading(AlertCondition.SLA_BREACHED, breached, f"oldest waiting {_minutes(oldest)}", queue, data=numbers),
    ]
    if queue.alert_age_minutes is not None:
        limit = queue.alert_age_minutes
        over = policy.condition_holds(AlertCondition.OLDEST_AGE in firing, oldest, on=limit, off=CLEAR_SHARE * limit)
        readings.append(Reading(AlertCondition.OLDEST_AGE, over, f"oldest waiting {_minutes(oldest)}", queue))
    return readings


def _minutes(value: float | None) -> str:
    return "nothing" if value is None else f"{value:.0f} min"


def _risk_words(fc: policy.Forecast, queue: Queue) -> str:
    if fc.to_sla_breach is None:
        return "no breach forecast"
    return f"breach of the {queue.sla_minutes}-min SLA forecast in about {max(0, round(fc.to_sla_breach))} min"


def team_readings(now: datetime, firing_reviewers: Iterable[str]) -> list[Reading]:
    """The team's conditions: failing webhook deliveries, the sandbox, and
    each reviewer paused by gold (and those whose episode is still on)."""
    from loops import sandbox  # loops is pure; imported late to keep start-up light

    since = now - FAILING_DELIVERIES_WINDOW
    failing = WebhookDelivery.objects.filter(last_attempt_at__gte=since, attempts__gt=0).exclude(
        status=WebhookDelivery.Status.DELIVERED
    )
    n_failing = failing.count()
    box = sandbox.status()
    # REDLINE_SANDBOX=none is an operator's choice, shown on the dashboard; not an outage.
    unavailable = not box.sandboxed and box.mode != "none"
    readings = [
        Reading(
            AlertCondition.WEBHOOKS_FAILING,
            n_failing > 0,
            f"{n_failing} webhook {'delivery' if n_failing == 1 else 'deliveries'} failing",
        ),
        Reading(AlertCondition.SANDBOX_UNAVAILABLE, unavailable, box.reason or "sandbox available"),
    ]
    paused = set(ReviewerStanding.objects.filter(paused_at__isnull=False).values_list("reviewer__username", flat=True))
    for name in sorted(paused | set(firing_reviewers)):
        readings.append(
            Reading(AlertCondition.REVIEWER_PAUSED, name in paused, f"reviewer {name} paused by gold", subject=name)
        )
    return readings


# --- episodes --------------------------------------------------------------------------


def evaluate_alerts(*, now: datetime | None = None, queue: Queue | int | None = None) -> list[Alert]:
    """Look at every condition (one queue's alone when ``queue`` is given:
    the mode-change trigger) and send what fired or recovered. Returns the
    alerts written. Safe to repeat: an episode fires once, recovers once."""
    now = now or timezone.now()
    if queue is not None:
        queues = [Queue.current(queue)]
    else:
        queues = list(Queue.objects.active())
    firing = _firing_conditions()
    readings: list[Reading] = []
    for q in queues:
        readings += queue_readings(q, now, firing.get(f"queue:{q.pk}", set()))
    if queue is None:
        readings += team_readings(now, firing.get("reviewers", set()))
    alerts = [alert for r in readings if (alert := _step(r, now)) is not None]
    for alert in alerts:
        deliver_apprise(alert)
    return alerts


def _firing_conditions() -> dict[str, set[str]]:
    """{scope: conditions firing}, and under "reviewers" the reviewers whose pause episode is on."""
    out: dict[str, set[str]] = {}
    for scope, condition, subject in AlertEpisode.objects.filter(firing=True).values_list(
        "scope", "condition", "subject"
    ):
        if condition == AlertCondition.REVIEWER_PAUSED:
            out.setdefault("reviewers", set()).add(subject)
        out.setdefault(scope, set()).add(condition)
    return out


def _step(reading: Reading, now: datetime) -> Alert | None:
    """Move one episode under its row's lock; write the alert and the queue's
    webhook events if it fired or recovered."""
    stamp = now.timestamp()
    with transaction.atomic():
        AlertEpisode.objects.get_or_create(
            scope=reading.scope,
            condition=reading.condition,
            subject=reading.subject,
            defaults={"queue": reading.queue},
        )
        episode = AlertEpisode.objects.select_for_update().get(
            scope=reading.scope, condition=reading.condition, subject=reading.subject
        )
        state = policy.AlertState(
            episode.firing,
            episode.clear_since.timestamp() if episode.clear_since else None,
            episode.recovered_at.timestamp() if episode.recovered_at else None,
        )
        new, message = policy.step_alert(state, reading.holds, stamp, hold_seconds=hold_seconds())
        if new != state:
            episode.firing = new.firing
            episode.clear_since = _when(new.clear_since)
            episode.recovered_at = _when(new.recovered_at)
            if message == "fired":
                episode.detail = reading.detail[:200]
            episode.save()
        if message is None:
            return None
        alert = _write_alert(reading, message, episode.detail, now)
        _enqueue_events(alert, reading, now)
        return alert


def _when(stamp: float | None) -> datetime | None:
    return None if stamp is None else datetime.fromtimestamp(stamp, tz=timezone.get_current_timezone())


def _write_alert(reading: Reading, message: str, fired_detail: str, now: datetime) -> Alert:
    where = f"queue {reading.queue.slug}" if reading.queue is not None else "team"
    label = AlertCondition(reading.condition).label
    if message == "fired":
        title = f"[reviewqueue] {where}: {label}"
        body = f"{reading.detail}."
    else:
        title = f"[reviewqueue] {where}: recovered ({label})"
        body = f"Recovered: {fired_detail} no longer holds; now {reading.detail}."
    alert = Alert.objects.create(
        queue=reading.queue,
        condition=reading.condition,
        kind=Alert.Kind.FIRED if message == "fired" else Alert.Kind.RECOVERED,
        subject=reading.subject,
        title=title[:200],
        body=body,
        created_at=now,
    )
    log.warning("alert", extra={"alert": alert.pk, "title": alert.title})
    return alert


def _enqueue_events(alert: Alert, reading: Reading, now: datetime) -> None:
    """The queue's signed webhook events, written to the outbox in this
    transaction for each webhook channel that hears the queue."""
    event = EVENT_OF.get(AlertCondition(reading.condition))
    if event is None or reading.queue is None:
        return
    if alert.kind == Alert.Kind.RECOVERED:
        event = EventType.QUEUE_RECOVERED
    data = {"queue": reading.queue.slug, "condition": reading.condition, "alert_id": alert.pk, **(reading.data or {})}
    sent = []
    for channel in channels_for(reading.queue).filter(kind=AlertChannel.Kind.WEBHOOK):
        token = ApiToken.objects.filter(name=channel.producer, revoked_at__isnull=True).exclude(webhook_url="").first()
        if token is None:
            sent.append({"channel": channel.name, "kind": "webhook", "ok": False, "detail": "no active token URL"})
            continue
        delivery = outbox.record_event(event, url=token.webhook_url, producer=token.name, data=data, now=now)
        if delivery is not None:
            # One receiver's queue events in order, apart from every other receiver's.
            WebhookDelivery.objects.filter(pk=delivery.pk).update(ordering_key=f"queue-events:{token.pk}")
            sent.append({"channel": channel.name, "kind": "webhook", "ok": True, "detail": delivery.event_id})
    if sent:
        alert.deliveries = sent
        alert.save(update_fields=["deliveries"])


def channels_for(queue: Queue | None) -> Any:
    """The enabled channels that hear ``queue``'s alerts: its own and the team-wide
    ones (the team's alerts: team-wide ones only)."""
    channels = AlertChannel.objects.filter(enabled=True)
    if queue is None:
        return channels.filter(queue__isnull=True)
    return channels.filter(queue__isnull=True) | channels.filter(queue=queue)


# --- Apprise ---------------------------------------------------------------------------


def deliver_apprise(alert: Alert) -> Alert:
    """Send ``alert`` to each Apprise channel that hears it, recording each
    outcome on the alert. Call outside a transaction: it waits on the network."""
    results = list(alert.deliveries)
    for channel in channels_for(alert.queue).filter(kind=AlertChannel.Kind.APPRISE):
        ok, detail = send_apprise(channel.url, alert.title, alert.body)
        results.append({"channel": channel.name, "kind": "apprise", "ok": ok, "detail": detail})
    if results != alert.deliveries:
        alert.deliveries = results
        Alert.objects.filter(pk=alert.pk).update(deliveries=results)
    return alert


def send_apprise(url: str, title: str, body: str) -> tuple[bool, str]:
    """(delivered, what happened) for one Apprise URL; never raises."""
    notifier = apprise.Apprise()
    if not notifier.add(url):
        return False, "not an Apprise URL this version knows"
    try:
        ok = bool(notifier.notify(title=title, body=body))
    except Exception as exc:  # noqa: BLE001 - a plugin's failure is the channel's, not the evaluation's
        return False, f"error: {type(exc).__name__}"
    return ok, "sent" if ok else "the service refused it or could not be reached"


def masked(url: str) -> str:
    """The Apprise URL with its secrets hidden (Apprise's own privacy mode)."""
    plugin = apprise.Apprise.instantiate(url)
    if not plugin:
        return "(not an Apprise URL)"
    return str(plugin.url(privacy=True))


# --- operators' changes ----------------------------------------------------------------


def _audit(channel: AlertChannel, user: AbstractBaseUser | None, before: str | None, after: str | None) -> None:
    """The change in the policy change log of the channel's queue (team-wide: the default queue's)."""
    where = "team-wide" if channel.queue_id is None else "this queue"
    key = f"alert channel {channel.name} ({channel.kind}, {where})"
    queue = channel.queue or Queue.default()
    PolicyAudit.objects.create(queue=queue, user=user, changes={key: [before, after]})


def describe(channel: AlertChannel) -> str:
    """What the channel sends to, safe to show and to log."""
    if channel.kind == AlertChannel.Kind.WEBHOOK:
        return f"webhook of token {channel.producer}"
    return masked(channel.url)


def channel_create(
    *, user: AbstractBaseUser | None, name: str, kind: str, url: str = "", producer: str = "", queue: Queue | None
) -> AlertChannel:
    """A new channel, checked (an Apprise URL Apprise knows; a token that
    exists and has a webhook URL) and audited. Raises InvalidInput naming the field."""
    name = name.strip()
    if not name or len(name) > 100:
        raise InvalidInput("name", "is required, at most 100 characters")
    if kind not in AlertChannel.Kind.values:
        raise InvalidInput("kind", f"must be one of {', '.join(AlertChannel.Kind.values)}")
    if kind == AlertChannel.Kind.APPRISE:
        url, producer = url.strip(), ""
        if not url or not apprise.Apprise.instantiate(url):
            raise InvalidInput("url", "is not an Apprise URL (e.g. mailto://, slack://, json://, discord://)")
    else:
        url, producer = "", producer.strip()
        if not ApiToken.objects.filter(name=producer, revoked_at__isnull=True).exclude(webhook_url="").exists():
            raise InvalidInput("producer", f"no active token named {producer[:60]!r} with a webhook URL")
    with transaction.atomic():
        channel = AlertChannel.objects.create(
            name=name, kind=kind, url=url, producer=producer, queue=queue, created_by=user
        )
        _audit(channel, user, None, describe(channel))
    log.info("alert channel added", extra={"channel": channel.pk, "to": describe(channel)})
    return channel


def channel_delete(*, user: AbstractBaseUser | None, channel_id: int) -> None:
    """Remove a channel; audited. Safe to repeat: a second call finds nothing and changes nothing."""
    with transaction.atomic():
        channel = AlertChannel.objects.select_for_update().filter(pk=channel_id).first()
        if channel is None:
            return
        _audit(channel, user, describe(channel), None)
        channel.delete()


def channel_test(*, user: AbstractBaseUser | None, channel_id: int, now: datetime | None = None) -> Alert:
    """Send a test message to one channel now, recorded as an alert of kind
    "test" (and in the change log). Each call sends one more message."""
    channel = AlertChannel.objects.filter(pk=channel_id).first()
    if channel is None:
        raise InvalidInput("channel", f"no alert channel {channel_id}")
    now = now or timezone.now()
    title, body = "[reviewqueue] test", f"A test of the alert channel {channel.name}, sent by {user or 'the system'}."
    alert = Alert.objects.create(
        queue=channel.queue, condition=AlertCondition.MODE, kind=Alert.Kind.TEST, title=title, body=body, created_at=now
    )
    if channel.kind == AlertChannel.Kind.APPRISE:
        ok, detail = send_apprise(channel.url, title, body)
    else:
        ok, detail = False, "webhook channels receive queue events only; use the deliveries page to check them"
    alert.deliveries = [{"channel": channel.name, "kind": channel.kind, "ok": ok, "detail": detail}]
    alert.save(update_fields=["deliveries"])
    return alert


def acknowledge(*, alert_id: int, user: AbstractBaseUser, now: datetime | None = None) -> Alert:
    """Record who acknowledged an alert, once: the first acknowledgement stays. Safe to repeat."""
    now = now or timezone.now()
    Alert.objects.filter(pk=alert_id, acknowledged_at__isnull=True).update(acknowledged_by=user, acknowledged_at=now)
    alert = Alert.objects.filter(pk=alert_id).select_related("acknowledged_by").first()
    if alert is None:
        raise InvalidInput("alert", f"no alert {alert_id}")
    return alert
