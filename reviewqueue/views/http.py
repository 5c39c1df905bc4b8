"""The request type the signed-in views see (django-htmx's ``HtmxHttpRequest``
pattern): ``HtmxMiddleware`` has set ``htmx``, and the login and role checks
have made ``user`` a real user, so views read both without casts. And
``queue_scoped``, which hands an operator view the queue its page is about
(selectors.scope)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django_htmx.middleware import HtmxDetails

from ..selectors.scope import UnknownQueue, queue_for_operator


class HtmxHttpRequest(HttpRequest):
    """An HttpRequest as a signed-in, role-checked view receives it."""

    htmx: HtmxDetails
    user: User  # never AnonymousUser here: the login and role checks ran first


V = TypeVar("V", bound=Callable[..., HttpResponse])


def unknown_queue_page(request: HttpRequest, slug: str) -> HttpResponse:
    return render(request, "ops/unknown_queue.html", {"slug": slug}, status=404)


def queue_scoped(view: V) -> V:
    """Pass the page's queue to ``view`` as ``queue``; an unknown slug is a 404
    naming it. Put it under @operator_required, so that only operators learn
    which slugs exist."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            queue = queue_for_operator(request)
        except UnknownQueue as exc:
            return unknown_queue_page(request, exc.slug)
        return view(request, *args, queue=queue, **kwargs)

    return wrapper  # type: ignore[return-value]
