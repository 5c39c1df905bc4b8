"""What a queue operation answers when it cannot be done.

Every service raises a QueueError (or a subclass) with a stable ``code`` that
the API and the pages show; none of these takes a lock or touches a row.
"""

from __future__ import annotations

from collections.abc import Mapping


class QueueError(Exception):
    """A queue operation that cannot be done; ``code`` is stable for APIs and UIs."""

    code = "queue_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(QueueError):
    """A refused field. ``message`` names it ("queue: unknown queue 'x'") for
    pages and commands; ``fields`` maps each refused field to what is wrong
    with it, without the name, as the API's 400 body shows it. ``also`` adds
    other fields refused by the same request, so every one is reported."""

    code = "invalid"

    def __init__(self, field: str, message: str, *, also: Mapping[str, str] | None = None) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.fields: dict[str, str] = {field: message, **(also or {})}


class NotLeaseHolder(QueueError):
    code = "not_lease_holder"


class LeaseExpired(QueueError):
    code = "lease_expired"


class AlreadyDecided(QueueError):
    code = "already_decided"


class NothingToUndo(QueueError):
    code = "nothing_to_undo"


class UndoRefused(NothingToUndo):
    """The last verdict cannot be taken back: a send-back whose resumed run has started."""

    code = "undo_refused"


class UnknownGate(QueueError):
    """A filter rule whose gate this version does not know: it cannot be enabled."""

    code = "unknown_gate"
