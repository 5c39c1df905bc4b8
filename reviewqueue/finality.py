"""When a verdict becomes final: the one rule that decides what a producer may
be told (ARCHITECTURE.md rule 11: only the settled verdict reaches the
producer).

A verdict is stored the moment a reviewer gives it, but its reviewer may take
it back for ``REVIEWQUEUE_UNDO_SECONDS``. Until that window has closed the
verdict is not told to anyone outside: the ``item.decided`` and
``item.sent_back`` outbox rows are due only at ``final_at(decided_at)``, and
the item API shows the item as still under review until the same instant.
Undo is accepted strictly before it. So a producer hears only what can no
longer change.

Pure arithmetic on times and a setting: no database access, no lock.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings


def undo_window() -> timedelta:
    """How long a reviewer may take a verdict back."""
    return timedelta(seconds=max(0, int(settings.REVIEWQUEUE_UNDO_SECONDS)))


def final_at(decided_at: datetime) -> datetime:
    """The instant a verdict given at ``decided_at`` can no longer be undone."""
    return decided_at + undo_window()


def is_final(decided_at: datetime | None, now: datetime) -> bool:
    """Whether a verdict given at ``decided_at`` may be told by ``now``."""
    return decided_at is not None and now >= final_at(decided_at)


def undoable(decided_at: datetime, now: datetime) -> bool:
    """Whether a verdict given at ``decided_at`` may still be taken back:
    exactly while it is not final."""
    return not is_final(decided_at, now)
