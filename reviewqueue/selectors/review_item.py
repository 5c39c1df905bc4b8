"""One review item as the reader is shown it: its earlier versions, an edit as
a diff, whether this user may see it, and the status and verdict a reviewer
is shown (a gold copy looks like any item). Every function here only reads."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from django.contrib.auth.models import User

from ..access import is_operator
from ..models import OPERATOR_ROUND, GoldItem, Judgement, Queue, ReasonLabel, ReviewItem, Verdict

# How many earlier versions an item's history shows; a longer chain says so.
HISTORY_DEPTH = 10


@dataclass
class Version:
    """One earlier version of an item: its output and the verdict that sent it back."""

    item: ReviewItem
    verdict: Verdict | None
    # What changed from this version to the next one (escaped in the template).
    diff: OutputDiff | None = None
    next_version: int = 0


def history(item: ReviewItem) -> list[Version]:
    """The item's earlier versions, newest first: each one's output, the
    reviewer's note that sent it back, and the diff to the version after it.
    No query for an item that is the first of its line, which nearly every
    item is."""
    versions: list[Version] = []
    previous_id = item.previous_version_id
    newer = item
    while previous_id is not None and len(versions) < HISTORY_DEPTH:
        earlier = ReviewItem.objects.select_related("verdict__reviewer").filter(pk=previous_id).first()
        if earlier is None:
            break
        diff = output_diff(
            earlier.final_output, newer.final_output, f"version {earlier.version}", f"version {newer.version}"
        )
        versions.append(
            Version(item=earlier, verdict=getattr(earlier, "verdict", None), diff=diff, next_version=newer.version)
        )
        previous_id, newer = earlier.previous_version_id, earlier
    return versions


# A diff reads at most this many lines of each side, and shows at most this
# many characters: difflib is quadratic at worst, and a page of a megabyte
# helps nobody. What is left out is said on the page.
DIFF_MAX_LINES = 2000


DIFF_MAX_CHARS = 100_000


@dataclass
class OutputDiff:
    """An edit against the original, as unified-diff lines (kind, text); the
    kinds are add, del, hunk, head and same. ``cut`` says what was left out."""

    lines: list[tuple[str, str]]
    cut: str = ""


def output_diff(original: str, edited: str, old_name: str = "original", new_name: str = "edited") -> OutputDiff:
    """The edit (or a revision) as a unified diff, line endings made the same
    first; capped (DIFF_MAX_LINES, DIFF_MAX_CHARS) so a large output stays fast."""
    before = original.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    after = edited.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    cut = ""
    if max(len(before), len(after)) > DIFF_MAX_LINES:
        cut = f"Only the first {DIFF_MAX_LINES} lines of each version are compared."
        before, after = before[:DIFF_MAX_LINES], after[:DIFF_MAX_LINES]
    lines: list[tuple[str, str]] = []
    shown = 0
    for line in difflib.unified_diff(before, after, old_name, new_name, lineterm="", n=3):
        shown += len(line)
        if shown > DIFF_MAX_CHARS:
            cut = f"The diff is cut after {DIFF_MAX_CHARS:,} characters. " + cut
            break
        lines.append((_diff_kind(line), line))
    return OutputDiff(lines=lines, cut=cut.strip())


def _diff_kind(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "head"
    if line.startswith("@@"):
        return "hunk"
    return {"+": "add", "-": "del"}.get(line[:1], "same")


def _may_see(user: User, item: ReviewItem, verdict: Verdict | None) -> bool:
    """Operators see every item of every queue; a reviewer, the items of the
    queues they review that they decided, answered (a double review or a
    gold copy) or hold."""
    if is_operator(user):
        return True
    if not Queue.objects.reviewable_by(user).filter(pk=item.queue_id).exists():
        return False
    if verdict is not None and verdict.reviewer_id == user.pk:
        return True
    if item.status == ReviewItem.Status.CLAIMED and item.lease_holder_id == user.pk:
        return True
    return Judgement.objects.filter(item=item, reviewer=user).exists()


# The status an item shows a reviewer after their own answer, when the item
# has no settled verdict to show (a gold copy, or a double review still open).
STATUS_AFTER = {
    Verdict.Decision.APPROVE: ReviewItem.Status.APPROVED,
    Verdict.Decision.EDIT: ReviewItem.Status.APPROVED,
    Verdict.Decision.REJECT: ReviewItem.Status.REJECTED,
    Verdict.Decision.SEND_BACK: ReviewItem.Status.SENT_BACK,
}


def _as_reviewer_sees_it(
    user: User, item: ReviewItem, verdict: Verdict | None
) -> tuple[str, Verdict | Judgement | None]:
    """The status and verdict a reviewer is shown. A gold copy must look like
    any other item (its answer measures the reviewer, who must not tell it
    apart): a settled copy shows the verdict a real item settled the same
    way would (``copy_verdict``) and the status it gives; while it, or a
    real double review, waits, a reviewer who answered it sees their own
    answer as the verdict and the status it would give."""
    status = item.get_status_display()
    if is_operator(user) or (verdict is not None and item.gold_id is None):
        return status, verdict
    settled = copy_verdict(item)
    if settled is not None:
        return _status_after(settled.decision), settled
    own = Judgement.objects.filter(item=item, reviewer=user).first()
    if own is None:
        # Held, not answered yet: a gold copy is "claimed" like any item.
        return status, None
    return _status_after(own.decision), own


def _status_after(decision: str) -> str:
    return ReviewItem.Status(STATUS_AFTER[Verdict.Decision(decision)]).label


def copy_verdict(item: ReviewItem) -> Verdict | None:
    """What a settled gold copy shows as its verdict (unsaved), as a real
    item settled the same way shows its own: the answer that settled it (the
    only one, the second that agreed, or the third that made a majority);
    after three answers that all differed, settled beside an operator's
    settlement (``review_quality.settle_copies_with``), its gold item's
    expected answer, by the operator who marked it gold. None for anything
    but a settled copy."""
    if item.gold_id is None or item.status != ReviewItem.Status.GOLD:
        return None
    if item.review_round >= OPERATOR_ROUND:
        gold = GoldItem.objects.select_related("created_by").get(pk=item.gold_id)
        label = ""
        if gold.expected_decision == GoldItem.Expected.REJECT:
            given = item.judgements.exclude(reason_label="").values_list("reason_label", flat=True).first()
            label = gold.expected_label or given or ReasonLabel.UNCLEAR
        return Verdict(
            item_id=item.pk,
            queue_id=None,  # shown, never saved: no queue to read
            reviewer=gold.created_by,
            decision=gold.expected_decision,
            reason_label=label,
            created_at=item.decided_at,
        )
    last = item.judgements.select_related("reviewer").order_by("-round", "-pk").first()
    return answer_as_verdict(last) if last is not None else None


def answer_as_verdict(answer: Judgement) -> Verdict:
    """One reviewer's answer said as a verdict, unsaved: what a reviewer is
    shown of an answer that is no item's verdict (a double review's, a
    gold copy's)."""
    return Verdict(
        item_id=answer.item_id,
        queue_id=None,  # shown, never saved: no queue to read
        reviewer=answer.reviewer,
        decision=answer.decision,
        reason_label=answer.reason_label,
        note=answer.note,
        edited_output=answer.edited_output,
        created_at=answer.created_at,
    )


def as_lineage(item: ReviewItem) -> ReviewItem:
    """Whose run and versions a reviewer is shown beside ``item``: a gold
    copy's source item's, since a copy has none of its own and must show
    what a real item of its kind shows (a loop-fed queue's "Run" row, its
    earlier versions); any other item's own."""
    if item.gold_id is None:
        return item
    source = ReviewItem.objects.filter(gold_spec__pk=item.gold_id).first()
    return source or item
