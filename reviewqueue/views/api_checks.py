"""What the producer API refuses in a body past its types, each field checked
on its own so that one 400 names every refused field (docs/API.md): the
queue, the callback URL, a revision's previous item, a task's spec and run
id. Only reads; the endpoints in views/api.py call these before they admit."""

from __future__ import annotations

from typing import Any

from .. import services
from ..api_io import _sent_back_item
from ..models import ApiToken
from ..services import admission, routing
from ..services.runs import is_reserved_run_id, parse_task
from ..webhooks import CallbackRefused, check_callback_url, secret_for


def producer_of(token: ApiToken) -> str:
    """The producer a token acts for: its name, as items and runs store it."""
    return token.name[:100]


class CallbackUrlRefused(Exception):
    """A callback URL the server will not call (400 with ``code``)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code, self.detail = code, detail


def callback_url_for(token: ApiToken, requested: str | None) -> str:
    """The callback URL for what this request creates: the one it names,
    checked against WEBHOOK_ALLOWED_HOSTS, or else the token's default (which
    delivery checks again). A producer with no webhook secret cannot name
    one: it could never verify our signature, and nothing is sent unsigned."""
    if requested is None or not requested.strip():
        return token.webhook_url
    try:
        url = check_callback_url(requested.strip())
    except CallbackRefused as exc:
        raise CallbackUrlRefused(exc.code, exc.detail) from None
    if not secret_for(producer_of(token)):
        raise CallbackUrlRefused(
            "callback_url_needs_secret",
            "this producer has no webhook signing secret; issue a token with create_api_token --webhook URL",
        )
    return url


def queue_refusal(values: dict[str, Any], producer: str, *, routed: bool = True) -> dict[str, str]:
    """What is wrong with the work's queue, if anything, as the 400 names it.
    ``routed``: without a slug the routing rules choose, from the fields as
    sent (a field of the wrong type counts as absent)."""
    queue = values.get("queue")
    if not routed and not queue:
        return {}
    kind, priority, task_id = values.get("task_kind"), values.get("priority"), values.get("task_id")
    try:
        routing.target_of(
            queue,
            producer=producer,
            task_kind=kind if isinstance(kind, str) else "",
            priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else 1,
            task_id=task_id if isinstance(task_id, str) else "",
        )
    except services.InvalidInput as exc:
        return exc.fields
    return {}


def callback_refusal(token: ApiToken, values: dict[str, Any]) -> tuple[dict[str, str], str | None]:
    url = values.get("callback_url")
    if not isinstance(url, str):
        return {}, None
    try:
        callback_url_for(token, url)
    except CallbackUrlRefused as exc:
        return {"callback_url": exc.detail}, exc.code
    return {}, None


Refusals = tuple[dict[str, str], str | None]


def output_refusals(token: ApiToken, values: dict[str, Any], skip: set[str] | frozenset[str] = frozenset()) -> Refusals:
    """Every field of an output the server refuses past its type, each checked
    on its own, and the callback URL's error code if it is refused."""
    producer = producer_of(token)
    refused = admission.field_refusals(values, skip=skip)
    previous = values.get("previous_item")
    if "previous_item" not in skip and isinstance(previous, int) and not isinstance(previous, bool):
        try:
            _sent_back_item(producer, previous)
        except services.InvalidInput as exc:
            refused.update(exc.fields)
    callback, code = callback_refusal(token, values) if "callback_url" not in skip else ({}, None)
    if "queue" not in skip:
        refused.update(queue_refusal(values, producer))
    return {**refused, **callback}, code


def task_refusals(token: ApiToken, values: dict[str, Any], skip: set[str] | frozenset[str] = frozenset()) -> Refusals:
    """Every field of a task submission the server refuses past its type."""
    refused: dict[str, str] = {}
    run_id = values.get("run_id")
    if "run_id" not in skip and isinstance(run_id, str) and not run_id.isprintable():
        # An identifier is refused, not cleaned: replacing a NUL with U+FFFD
        # would make two different run ids one (and PostgreSQL refuses NUL).
        refused["run_id"] = "must be printable text (no control characters)"
    elif "run_id" not in skip and isinstance(run_id, str) and is_reserved_run_id(run_id):
        refused["run_id"] = "must not end in ~v<number>: that form names the runs resumed after a send-back"
    task = values.get("task")
    if "task" not in skip and isinstance(task, dict):
        try:
            parse_task(task)
        except (TypeError, ValueError) as exc:  # a task spec's TaskError is a ValueError
            refused["task"] = str(exc)
    callback, code = callback_refusal(token, values) if "callback_url" not in skip else ({}, None)
    if "queue" not in skip:
        refused.update(queue_refusal(values, producer_of(token), routed=False))
    return {**refused, **callback}, code


def refuse(refusals: Refusals) -> None:
    """Raise the one 400 for ``refusals``, if any: a refused callback URL on
    its own keeps its own error code, else ``invalid`` naming every field."""
    refused, code = refusals
    if not refused:
        return
    if code is not None and list(refused) == ["callback_url"]:
        raise CallbackUrlRefused(code, refused["callback_url"])
    raise services.InvalidInput(*next(iter(refused.items())), also=refused)
