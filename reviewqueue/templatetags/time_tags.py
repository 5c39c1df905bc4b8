"""Times as a person reads them on the review page."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

register = template.Library()

JUST_NOW_SECONDS = 60


@register.filter(name="ago")
def ago(value: datetime | None, now: datetime | None = None) -> str:
    """ "just now" under a minute (Django's timesince would say "0 minutes"),
    else the largest unit: "3 minutes ago", "2 hours ago"."""
    if value is None:
        return ""
    now = now or timezone.now()
    if (now - value).total_seconds() < JUST_NOW_SECONDS:
        return "just now"
    return f"{timesince(value, now, depth=1)} ago"
