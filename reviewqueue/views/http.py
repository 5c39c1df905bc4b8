"""The request type the signed-in views see (django-htmx's ``HtmxHttpRequest``
pattern): ``HtmxMiddleware`` has set ``htmx``, and the login and role checks
have made ``user`` a real user, so views read both without casts."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """An HttpRequest as a signed-in, role-checked view receives it."""

    htmx: HtmxDetails
    user: User  # never AnonymousUser here: the login and role checks ran first
