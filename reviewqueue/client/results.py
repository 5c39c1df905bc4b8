"""What the API answers, as typed, frozen dataclasses.

Each keeps the JSON it was built from in ``raw``, so a field the server adds
later is readable before the client learns its name, and a field the server
leaves out reads as its default rather than failing the call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# The statuses after which an item will not change on its own: a verdict, a
# filter rule, shedding, or a reviewer sending it back to the agent.
DECIDED_STATUSES = frozenset({"approved", "rejected", "filtered", "shed", "sent_back"})


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _object(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class Output:
    """``POST /api/outputs`` stored the output (201 enqueued; 200 shed,
    duplicate or filtered). ``backoff`` true means the queue is past its high
    watermark: keep producing slower. ``outcome == "shed"`` means this very
    output was dropped to make room (or was the lowest priority itself).
    ``queue`` is the slug of the queue the item went to."""

    outcome: str
    item_id: int
    status: str
    queue: str = ""
    mode: str = ""
    depth: int = 0
    capacity: int = 0
    backoff: bool = False
    truncated: bool = False
    shed_item_id: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    accepted: bool = True

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Output:
        return cls(
            outcome=str(body.get("outcome", "")),
            item_id=int(body["item_id"]),
            status=str(body.get("status", "")),
            queue=str(body.get("queue", "")),
            mode=str(body.get("mode", "")),
            depth=int(body.get("depth") or 0),
            capacity=int(body.get("capacity") or 0),
            backoff=bool(body.get("backoff", False)),
            truncated=bool(body.get("truncated", False)),
            shed_item_id=_int_or_none(body.get("shed_item_id")),
            raw=dict(body),
        )


@dataclass(frozen=True)
class Backpressure:
    """The server refused for now and said when to ask again: nothing new was
    queued. Repeat the same call (same idempotency key or run id) after
    ``retry_after`` seconds; repeating is safe by the API's idempotency.
    ``run_id`` is set for a task submission (the run may already be recorded)."""

    retry_after: float
    error: str = ""
    detail: str = ""
    status_code: int = 503
    run_id: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    accepted: bool = False
    backoff: bool = True


@dataclass(frozen=True)
class Verdict:
    """A reviewer's decision as the item reports it."""

    decision: str | None
    reason_label: str = ""
    note: str = ""
    edited_output: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Verdict:
        return cls(
            decision=_str_or_none(body.get("decision")),
            reason_label=str(body.get("reason_label") or ""),
            note=str(body.get("note") or ""),
            edited_output=_str_or_none(body.get("edited_output")),
            raw=dict(body),
        )


@dataclass(frozen=True)
class Item:
    """``GET /api/items/{id}``: an item's status and, once decided, its verdict.
    Never its output: the producer has that already."""

    item_id: int
    status: str
    decision: str | None = None
    label: str = ""
    verdict: Verdict | None = None
    version: int | None = None
    previous_item: int | None = None
    awaiting: str | None = None
    """While waiting: ``review``, ``second_review``, ``tiebreak`` or ``operator``."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """The JSON object pushed with the output (``{}`` when none was)."""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Item:
        verdict = body.get("verdict")
        decision = _str_or_none(body.get("decision"))
        return cls(
            item_id=int(body["item_id"]),
            status=str(body.get("status", "")),
            decision=decision or (_str_or_none(verdict.get("decision")) if isinstance(verdict, Mapping) else None),
            label=str(body.get("label") or ""),
            verdict=Verdict.from_json(verdict) if isinstance(verdict, Mapping) else None,
            version=_int_or_none(body.get("version")),
            previous_item=_int_or_none(body.get("previous_item")),
            awaiting=_str_or_none(body.get("awaiting")),
            metadata=_object(body.get("metadata")),
            raw=dict(body),
        )

    @property
    def decided(self) -> bool:
        """The item will not change on its own any more (see DECIDED_STATUSES)."""
        return self.status in DECIDED_STATUSES

    @property
    def sent_back(self) -> bool:
        return self.status == "sent_back"

    @property
    def note(self) -> str:
        """The reviewer's note: on the verdict when there is one, else on the item."""
        if self.verdict is not None and self.verdict.note:
            return self.verdict.note
        return str(self.raw.get("note") or "")


@dataclass(frozen=True)
class ItemPage:
    """``GET /api/items``: one page of the producer's items, newest first,
    and ``next``, the cursor of the following page (None on the last)."""

    items: list[Item]
    next: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> ItemPage:
        rows = body["items"]
        if not isinstance(rows, list):
            raise TypeError("items is not a list")
        return cls(items=[Item.from_json(row) for row in rows], next=_str_or_none(body.get("next")), raw=dict(body))


@dataclass(frozen=True)
class Run:
    """``POST /api/tasks`` and ``GET /api/tasks/{run_id}``: a loop run's outcome
    (``running`` until the worker finishes) and the item it produced, if any."""

    run_id: str
    task_id: str = ""
    outcome: str = ""
    item_id: int | None = None
    created: bool = False
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    accepted: bool = True

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Run:
        return cls(
            run_id=str(body["run_id"]),
            task_id=str(body.get("task_id") or ""),
            outcome=str(body.get("outcome") or ""),
            item_id=_int_or_none(body.get("item_id")),
            created=bool(body.get("created", False)),
            raw=dict(body),
        )

    @property
    def finished(self) -> bool:
        return self.outcome not in ("", "running")


@dataclass(frozen=True)
class Event:
    """A webhook event, returned by ``verify_signature`` once its signature holds."""

    id: str
    type: str
    created: str = ""
    item_id: int | None = None
    run_id: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Event:
        data = body.get("data")
        return cls(
            id=str(body.get("id") or ""),
            type=str(body.get("type") or ""),
            created=str(body.get("created") or ""),
            item_id=_int_or_none(body.get("item_id")),
            run_id=_str_or_none(body.get("run_id")),
            data=dict(data) if isinstance(data, Mapping) else {},
            raw=dict(body),
        )

    @property
    def metadata(self) -> dict[str, Any]:
        """An item event's ``metadata``: the object pushed with the item's
        output (``{}`` when none was, or for an event of no item)."""
        return _object(self.data.get("metadata"))
