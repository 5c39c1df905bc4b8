"""The item list's filters as a form, shared by the operators' list, the
reviewer's history, the bulk actions and ``GET /api/items``: one place says
what each filter accepts and what a bad value is told."""

from __future__ import annotations

from typing import Any

from django import forms
from django.db.models import QuerySet

from .formatting import decision_words
from .models import Queue, ReasonLabel, ReviewItem, Verdict
from .selectors.items import BadCursor, ItemFilter, decode_cursor

# Statuses a list may filter on: a gold copy's answered status is never listed.
# Each decision in the words the pages show it in.
DECISIONS = [(value, decision_words(value).capitalize()) for value in Verdict.Decision.values]
LISTED_STATUSES = [(value, label) for value, label in ReviewItem.Status.choices if value != ReviewItem.Status.GOLD]


def _blank(choices: list[tuple[str, str]], blank: str = "any") -> list[tuple[str, str]]:
    return [("", blank), *choices]


class ItemFilterForm(forms.Form):
    """Every filter is optional; ``queues`` is what the reader may see.
    ``fields_for`` leaves out what a reader may not filter on."""

    q = forms.CharField(required=False, max_length=200, label="Search task and output", strip=True)
    queue = forms.ChoiceField(required=False, label="Queue")
    status = forms.ChoiceField(required=False, choices=_blank(LISTED_STATUSES), label="Status")
    decision = forms.ChoiceField(required=False, choices=_blank(DECISIONS), label="Decision")
    label = forms.ChoiceField(required=False, choices=_blank(ReasonLabel.choices), label="Reason label")
    producer = forms.CharField(required=False, max_length=100, label="Producer")
    run = forms.CharField(required=False, max_length=200, label="Run id")
    version = forms.IntegerField(required=False, min_value=1, max_value=10_000, label="Version")
    since = forms.DateField(required=False, label="Admitted from", widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="Admitted to", widget=forms.DateInput(attrs={"type": "date"}))
    after = forms.CharField(required=False, max_length=200, widget=forms.HiddenInput)

    REVIEWER_FIELDS = ("q", "queue", "decision", "label", "version", "since", "until", "after")

    def __init__(self, data: Any = None, *, queues: QuerySet[Queue], reviewer: bool = False, **kwargs: Any) -> None:
        super().__init__(data, **kwargs)
        self.queues = {queue.slug: queue for queue in queues.order_by("slug")}
        self.fields["queue"].choices = _blank([(slug, queue.name) for slug, queue in self.queues.items()], "all")
        if reviewer:
            for name in list(self.fields):
                if name not in self.REVIEWER_FIELDS:
                    del self.fields[name]
            self.fields["decision"].label = "My answer"
            self.fields["label"].label = "My reason label"
            # The history lists answers: its days are those the answers were given.
            self.fields["since"].label = "Answered from"
            self.fields["until"].label = "Answered to"

    def clean_after(self) -> str:
        after = self.cleaned_data.get("after") or ""
        if after:
            try:
                decode_cursor(after)
            except BadCursor as exc:
                raise forms.ValidationError(str(exc)) from None
        return after

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            self.add_error("until", "must be on or after the start date")
        return data

    def described(self) -> list[tuple[str, str]]:
        """Each filter given, as the form words it: (label, value shown), a
        choice by its name ("Queue: Default"), not its stored value."""
        words = []
        for name, field in self.fields.items():
            value = str(self.data.get(name, "") or "")
            if not value or isinstance(field.widget, forms.HiddenInput):
                continue
            shown = dict(getattr(field, "choices", ())).get(value, value)
            words.append((str(field.label), str(shown)))
        return words

    def item_filter(self) -> ItemFilter:
        """The valid form as the selectors' filter (call after is_valid())."""
        data = self.cleaned_data
        return ItemFilter(
            queue=self.queues.get(data.get("queue") or ""),
            status=data.get("status", ""),
            decision=data.get("decision", ""),
            label=data.get("label", ""),
            producer=data.get("producer", ""),
            run=data.get("run", ""),
            version=data.get("version"),
            since=data.get("since"),
            until=data.get("until"),
            q=data.get("q", ""),
        )

    def messages(self) -> dict[str, str]:
        """Each bad field's first error, by field name."""
        return {name: str(errors[0]) for name, errors in self.errors.items()}


class BulkActionForm(forms.Form):
    """A bulk action on every item the filter matches (the filter comes
    beside it in the same POST, never a list of ids). ``seen`` is the count
    the operator confirmed; absent, the server only counts."""

    ACTIONS = [
        ("requeue", "Requeue"),
        ("reject", "Reject with a label"),
        ("move", "Move to another queue"),
        ("expire", "Expire"),
    ]
    # What the confirmation says will happen to the items.
    DONE = {"requeue": "requeued", "reject": "rejected", "move": "moved", "expire": "expired"}

    action = forms.ChoiceField(
        choices=ACTIONS,
        label="Action",
        help_text="Requeue puts items whose lease ran out back to waiting. Expire takes waiting items out, as shed, "
        "and tells their producers at once: it cannot be undone.",
    )
    reason_label = forms.ChoiceField(required=False, choices=_blank(ReasonLabel.choices, "choose"), label="Label")
    target = forms.ChoiceField(required=False, label="Move to")
    seen = forms.IntegerField(required=False, min_value=0, widget=forms.HiddenInput)

    def __init__(self, data: Any = None, *, queues: QuerySet[Queue], **kwargs: Any) -> None:
        super().__init__(data, **kwargs)
        self.queues = {queue.slug: queue for queue in queues.filter(archived_at__isnull=True).order_by("slug")}
        self.fields["target"].choices = _blank([(slug, q.name) for slug, q in self.queues.items()], "choose")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        action = data.get("action")
        if action == "reject" and not data.get("reason_label"):
            self.add_error("reason_label", "a rejection needs a reason label")
        if action == "move" and not data.get("target"):
            self.add_error("target", "choose the queue to move the items to")
        return data

    def target_queue(self) -> Queue | None:
        return self.queues.get(self.cleaned_data.get("target") or "")
