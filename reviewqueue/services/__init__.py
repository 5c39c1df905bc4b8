"""The queue's services: every change to queue state goes through one of these.

Each is atomic and keyword-only; views, tasks and the API all call these and
nothing else to change queue state. A queue's row is locked first whenever a
call changes its depth or its tuner, so each queue's watermark transitions
and step-limit changes are serialised in every database, and queues do not
wait on each other. This package re-exports the public
names, so callers write ``services.admit(...)``; each capability lives in its
own module:

===================  ===========================================================
capability           module
===================  ===========================================================
admission            ``admission`` (checks, the general path, filter gates)
one-statement admit  ``admission_pg`` (PostgreSQL: its SQL and cursor state)
depth and mode       ``depth`` (kept depth, mode history, reconciling)
leases               ``leases`` (claim, release, renew, expiry)
verdicts and undo    ``verdicts`` (decide, send back, undo, tuner feedback, rule proposals)
operator decisions   ``queues`` (queues, policy settings, filter-rule decisions)
routing              ``routing`` (which queue work goes to: slug or routing rules)
review quality       ``review_quality`` (double review, gold items, standing, reliability)
input hygiene        ``cleaning`` (clean_text, clean_json)
errors               ``errors`` (QueueError and its subclasses)
===================  ===========================================================

Each module's docstring says which locks it takes.
"""

from __future__ import annotations

from .admission import admit, enabled_gates
from .cleaning import TRUNCATION_MARKER, clean_json, clean_text
from .depth import queue_depth, reconcile_depth
from .errors import (
    AlreadyDecided,
    InvalidInput,
    LeaseExpired,
    NothingToUndo,
    NotLeaseHolder,
    QueueError,
    UndoRefused,
    UnknownGate,
)
from .leases import claim, current_claim, expire_leases, release, release_lost_leases, renew
from .outcomes import AdmitResult
from .queues import archive_queue, create_queue, decide_rule, policy_update, set_reviewers
from .review_quality import is_paused, mark_gold, reestimate, reinstate, retire_gold
from .verdicts import decide, send_back, settle, undo

__all__ = [
    "TRUNCATION_MARKER",
    "AdmitResult",
    "AlreadyDecided",
    "InvalidInput",
    "LeaseExpired",
    "NotLeaseHolder",
    "NothingToUndo",
    "QueueError",
    "UndoRefused",
    "UnknownGate",
    "admit",
    "archive_queue",
    "claim",
    "clean_json",
    "clean_text",
    "create_queue",
    "current_claim",
    "decide",
    "decide_rule",
    "enabled_gates",
    "expire_leases",
    "is_paused",
    "mark_gold",
    "policy_update",
    "queue_depth",
    "reconcile_depth",
    "reestimate",
    "reinstate",
    "release",
    "release_lost_leases",
    "renew",
    "retire_gold",
    "send_back",
    "set_reviewers",
    "settle",
    "undo",
]
