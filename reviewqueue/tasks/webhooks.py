"""Webhook delivery's Celery entry points: one attempt at one outbox row, and
the periodic sweep that announces rows whose announcement was lost or whose
retry is due. The work is in ``reviewqueue.webhooks``.

Both are safe to run twice, at once too: a row is attempted only under its
lease. They run on the default queue beside loops; an attempt costs at most a
few timeouts and each receiving origin has a cap on attempts in flight, so a
hanging receiver holds that many worker slots, never the pool
(docs/ARCHITECTURE.md, "Webhooks").
"""

from __future__ import annotations

from celery import shared_task

from .. import task_names, webhooks

__all__ = ["deliver", "sweep"]


@shared_task(
    name=task_names.DELIVER_WEBHOOK,
    ignore_result=True,
    acks_late=True,
    soft_time_limit=60,
    time_limit=90,
)
def deliver(delivery_pk: int) -> str:
    """Attempt one delivery if it is due and free; returns what happened."""
    return webhooks.deliver(int(delivery_pk))


@shared_task(name=task_names.SWEEP_WEBHOOKS, ignore_result=True, soft_time_limit=30, time_limit=60)
def sweep() -> int:
    """Announce due deliveries (bounded per run and per receiver); returns how many."""
    return webhooks.sweep()
