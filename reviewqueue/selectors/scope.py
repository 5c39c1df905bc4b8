"""Which queue an operator page is about, and how a page keeps it: the query
parameter ``queue=<slug>`` (a POST form carries it as a hidden field), the
default queue without it. An unknown slug is ``UnknownQueue``; the view
answers it with a 404 that names it (views/http.py, ``queue_scoped``)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import reverse

from ..models import DEFAULT_QUEUE, Queue


class UnknownQueue(LookupError):
    """No queue has this slug."""

    def __init__(self, slug: str) -> None:
        super().__init__(slug)
        self.slug = slug


def queue_for_operator(request: HttpRequest) -> Queue:
    """The queue an operator page is about: ``queue`` from the POST body, else
    from the query string, else the default queue. Raises UnknownQueue."""
    slug = request.POST.get("queue") if request.method == "POST" and "queue" in request.POST else None
    if slug is None:
        slug = request.GET.get("queue", "")
    if not slug:
        return Queue.default()
    queue = Queue.objects.filter(slug=slug).first()
    if queue is None:
        raise UnknownQueue(slug)
    return queue


def scope_query(queue: Queue) -> str:
    """The query string that keeps a page on ``queue`` (none for the default queue)."""
    return "" if queue.slug == DEFAULT_QUEUE else f"?queue={queue.slug}"


def scope_context(queue: Queue, *, switch_here: bool = True) -> dict[str, Any]:
    """What the ops navigation needs to show the queue switcher. On a page
    that is about one object of the queue (a rule, a run) rather than the
    queue, ``switch_here`` is False and the switcher opens the other queue's
    dashboard."""
    return {
        "scope": queue,
        "scope_query": scope_query(queue),
        "switch_action": "" if switch_here else reverse("ops:dashboard"),
        "scope_queues": list(Queue.objects.active().order_by("slug").values_list("slug", "name")),
    }


def scoped_url(name: str, queue: Queue, *args: Any) -> str:
    return reverse(name, args=args) + scope_query(queue)
