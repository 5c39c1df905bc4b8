"""Edit and approve, and send back, through the review page's views (htmx
and plain forms), the card's history of earlier versions, and the item's own
page: who may read it, the edit shown as an escaped diff, capped when large."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from reviewqueue import services
from reviewqueue.models import LoopRun, ReviewItem, Verdict
from reviewqueue.selectors.review_item import DIFF_MAX_LINES, output_diff

HX = {"HTTP_HX_REQUEST": "true"}
AdmitItem = Callable[..., Any]


@pytest.fixture
def rita(client: Client, reviewer: User) -> Client:
    client.force_login(reviewer)
    return client


def _hold(admit_item: AdmitItem, reviewer: User, **fields: Any) -> ReviewItem:
    item = admit_item(**fields).item
    assert services.claim(reviewer=reviewer).pk == item.pk
    return item


def _edit(client: Client, item: ReviewItem, text: str, **headers: Any) -> Any:
    url = reverse("review:decide", args=[item.pk])
    return client.post(url, {"decision": "edit", "edited_output": text}, **headers)


def _send_back(client: Client, item: ReviewItem, note: str, **headers: Any) -> Any:
    return client.post(reverse("review:send_back", args=[item.pk]), {"note": note}, **headers)


# --- the card


def test_the_card_offers_both_actions_with_the_editor_prefilled(
    rita: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    _hold(admit_item, reviewer, final_output="\nfirst line starts after a blank one")
    body = rita.get(reverse("review:queue")).content.decode()
    assert 'id="edit-button"' in body and 'id="send-back-button"' in body
    assert 'id="edit-panel"' in body and 'id="send-back-panel"' in body
    # The newline after <textarea> is eaten by the parser, so a leading blank line survives.
    assert (
        '<textarea id="edited-output" name="edited_output" rows="12" spellcheck="false" autocomplete="off">\n\nfirst line'
        in body
    )
    assert "<kbd>e</kbd>" in body and "<kbd>b</kbd>" in body  # the shortcut help


def test_edit_and_approve_records_the_edit_and_shows_the_next_item(
    rita: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    item = _hold(admit_item, reviewer)
    admit_item()
    body = _edit(rita, item, "def is_even(n):\r\n    return not n % 2\r\n", **HX).content.decode()
    verdict = Verdict.objects.get(item=item)
    assert verdict.decision == "edit" and verdict.edited_output == "def is_even(n):\n    return not n % 2\n"
    assert f"Approved with your edits: item #{item.pk}" in body
    assert 'data-item="' in body and f'data-item="{item.pk}"' not in body  # the next item


def test_an_unchanged_edit_is_recorded_and_named_as_a_plain_approval(
    rita: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    item = _hold(admit_item, reviewer)
    body = _edit(rita, item, item.final_output.replace("\n", "\r\n"), **HX).content.decode()
    assert Verdict.objects.get(item=item).decision == "approve"
    assert "the output was not changed" in body


def test_an_edit_over_the_limit_comes_back_in_its_editor_with_the_text_kept(
    rita: Client, reviewer: User, admit_item: AdmitItem, settings: Any
) -> None:
    item = _hold(admit_item, reviewer)
    settings.REVIEWQUEUE_MAX_OUTPUT_CHARS = 50
    too_long = "y" * 51
    response = _edit(rita, item, too_long, **HX)
    body = response.content.decode()
    assert response.status_code == 200 and not Verdict.objects.exists()
    assert 'id="edit-panel" class="panel edit-panel" open' in body
    assert "too long" in body and too_long in body
    assert _edit(rita, item, too_long).status_code == 400  # a plain form gets the honest status


@pytest.mark.parametrize("emptied", ["", "  \r\n\t"])
def test_an_emptied_edit_is_refused_in_its_editor_not_approved_as_the_original(
    rita: Client, reviewer: User, admit_item: AdmitItem, emptied: str
) -> None:
    item = _hold(admit_item, reviewer)
    response = _edit(rita, item, emptied, **HX)
    body = response.content.decode()
    assert response.status_code == 200 and not Verdict.objects.exists()
    assert f'data-item="{item.pk}"' in body  # still the same item, still held
    assert 'id="edit-panel" class="panel edit-panel" open' in body
    assert "The corrected output is empty" in body
    assert _edit(rita, item, emptied).status_code == 400  # a plain form gets the honest status
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.CLAIMED


def test_send_back_without_a_note_keeps_the_item_and_opens_the_note_field(
    rita: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    item = _hold(admit_item, reviewer)
    body = _send_back(rita, item, "   ", **HX).content.decode()
    assert not Verdict.objects.exists()
    assert 'id="send-back-panel" class="panel send-back-panel" open' in body
    assert "Sending back needs a note" in body
    assert f'data-item="{item.pk}"' in body


def test_send_back_records_it_and_says_what_happens_next(rita: Client, reviewer: User, admit_item: AdmitItem) -> None:
    item = _hold(admit_item, reviewer)
    body = _send_back(rita, item, "cover negative numbers", **HX).content.decode()
    verdict = Verdict.objects.get(item=item)
    assert verdict.decision == "send_back" and verdict.note == "cover negative numbers"
    assert f"Sent back item #{item.pk}: its producer gets your note" in body
    again = _send_back(rita, item, "cover negative numbers", **HX).content.decode()
    assert "already recorded" in again and Verdict.objects.count() == 1


def test_send_back_as_a_plain_form_redirects(rita: Client, reviewer: User, admit_item: AdmitItem) -> None:
    item = _hold(admit_item, reviewer)
    response = _send_back(rita, item, "a note")
    assert response.status_code == 302 and response["Location"] == reverse("review:queue")
    assert ReviewItem.objects.get(pk=item.pk).status == "sent_back"


def test_undo_of_a_started_send_back_says_why_it_stands(rita: Client, reviewer: User, admit_item: AdmitItem) -> None:
    item = _hold(admit_item, reviewer)
    run = LoopRun.objects.create(run_id="r", task_id="t", task={"id": "t", "description": "d", "kind": "open"})
    LoopRun.objects.filter(pk=run.pk).update(item=item)
    _send_back(rita, item, "again", **HX)
    LoopRun.objects.filter(resumed_from=run).update(deliveries=1)
    body = rita.post(reverse("review:undo"), {"current": ""}, **HX).content.decode()
    assert "Not undone" in body and "already started" in body
    assert ReviewItem.objects.get(pk=item.pk).status == "sent_back"


def test_undo_of_a_send_back_whose_revision_arrived_says_why_it_stands(
    rita: Client, reviewer: User, admit_item: AdmitItem, settings: Any
) -> None:
    """The producer's revision (version 2) is in: undoing the send-back would
    leave the original and its revision both waiting. (The producer's clock
    says the window has closed, the reviewer's not yet.)"""
    item = _hold(admit_item, reviewer)
    _send_back(rita, item, "again", **HX)
    window, settings.REVIEWQUEUE_UNDO_SECONDS = settings.REVIEWQUEUE_UNDO_SECONDS, 0
    revision = admit_item(final_output="version two", previous_version=item).item
    settings.REVIEWQUEUE_UNDO_SECONDS = window
    body = rita.post(reverse("review:undo"), {"current": ""}, **HX).content.decode()
    assert "Not undone" in body
    assert (
        f"Not undone: item #{item.pk} was sent back and its revision (item #{revision.pk}) has already arrived" in body
    )
    assert ReviewItem.objects.get(pk=item.pk).status == "sent_back"
    waiting = ReviewItem.objects.filter(status__in=ReviewItem.WAITING).values_list("pk", flat=True)
    assert list(waiting) == [revision.pk]
    assert Verdict.objects.get(item=item).decision == "send_back"


def test_the_card_shows_earlier_versions_and_their_notes_collapsed(
    rita: Client, reviewer: User, admit_item: AdmitItem, settings: Any
) -> None:
    settings.REVIEWQUEUE_UNDO_SECONDS = 0  # the send-back final at once: a revision may follow it
    v1 = _hold(admit_item, reviewer, final_output="version one output")
    services.send_back(item_id=v1.pk, reviewer=reviewer, note="please <b>shorten</b>")
    v2 = _hold(admit_item, reviewer, final_output="version two output", previous_version=v1)
    assert v2.version == 2
    body = rita.get(reverse("review:queue")).content.decode()
    history = body[body.index('<details class="history"') :]
    assert history.startswith('<details class="history" id="history">')  # collapsed
    assert "1 earlier version" in history and "version one output" in history
    assert "please &lt;b&gt;shorten&lt;/b&gt;" in history and "<b>shorten" not in history


def test_a_version_2_card_says_so_and_shows_what_changed_as_an_inert_diff(
    rita: Client, reviewer: User, admit_item: AdmitItem, settings: Any
) -> None:
    settings.REVIEWQUEUE_UNDO_SECONDS = 0  # the send-back final at once: a revision may follow it
    v1 = _hold(admit_item, reviewer, final_output="keep\n<script>alert(1)</script>\nold line")
    services.send_back(item_id=v1.pk, reviewer=reviewer, note="fix it")
    _hold(admit_item, reviewer, final_output="keep\n<img src=x onerror=alert(2)>\nnew line", previous_version=v1)
    body = rita.get(reverse("review:queue")).content.decode()
    head = body[body.index('<header class="item-head">') :]
    head = head[: head.index("</header>")]
    assert "version 2" in head
    diff = body[body.index('id="diff-1-2"') :]
    diff = diff[: diff.index("</details>")]
    assert "What changed in version 2" in diff
    assert '<span class="del">-&lt;script&gt;alert(1)&lt;/script&gt;</span>' in diff
    assert '<span class="add">+&lt;img src=x onerror=alert(2)&gt;</span>' in diff
    assert '<span class="add">+new line</span>' in diff and '<span class="same"> keep</span>' in diff
    assert "<script>alert(1)" not in body and "<img src=x" not in body


def test_a_huge_revision_diff_is_cut_and_said_to_be(
    rita: Client, reviewer: User, admit_item: AdmitItem, settings: Any
) -> None:
    settings.REVIEWQUEUE_UNDO_SECONDS = 0  # the send-back final at once: a revision may follow it
    v1 = _hold(admit_item, reviewer, final_output="\n".join(f"a{n}" for n in range(50_000)))
    services.send_back(item_id=v1.pk, reviewer=reviewer, note="again")
    _hold(admit_item, reviewer, final_output="\n".join(f"b{n}" for n in range(50_000)), previous_version=v1)
    body = rita.get(reverse("review:queue")).content.decode()
    assert "Only the first 2000 lines of each version are compared." in body


# --- the item's page


def _decided_with_edit(admit_item: AdmitItem, reviewer: User, original: str, edited: str) -> ReviewItem:
    item = _hold(admit_item, reviewer, final_output=original)
    services.decide(item_id=item.pk, reviewer=reviewer, approve=True, edited_output=edited)
    return item


def test_the_item_page_shows_the_edit_as_an_escaped_diff(rita: Client, reviewer: User, admit_item: AdmitItem) -> None:
    item = _decided_with_edit(admit_item, reviewer, "keep\nold <i>line</i>\n", "keep\nnew <script>x</script>\n")
    body = rita.get(reverse("review_item", args=[item.pk])).content.decode()
    assert '<span class="del">-old &lt;i&gt;line&lt;/i&gt;</span>' in body
    assert '<span class="add">+new &lt;script&gt;x&lt;/script&gt;</span>' in body
    assert "<script>x" not in body
    assert "Approved with edits" in body


def test_a_large_diff_is_capped_and_says_so() -> None:
    original = "\n".join(f"line {i}" for i in range(DIFF_MAX_LINES + 500))
    edited = "\n".join(f"line {i} changed" for i in range(DIFF_MAX_LINES + 500))
    diff = output_diff(original, edited)
    assert diff.cut == f"Only the first {DIFF_MAX_LINES} lines of each version are compared."
    assert diff.lines[2] == ("hunk", f"@@ -1,{DIFF_MAX_LINES} +1,{DIFF_MAX_LINES} @@")
    wide = output_diff("\n".join("a" * 1000 for _ in range(200)), "\n".join("b" * 1000 for _ in range(200)))
    assert wide.cut.startswith("The diff is cut after 100,000 characters")
    assert sum(len(text) for _, text in wide.lines) <= 100_000
    assert not output_diff("a\nb", "a\nc").cut


def test_who_may_read_an_item(client: Client, make_user: Any, reviewer: User, admit_item: AdmitItem) -> None:
    decided = _decided_with_edit(admit_item, reviewer, "a", "b")
    held_by_rita = _hold(admit_item, reviewer)
    waiting = admit_item().item
    url = lambda item: reverse("review_item", args=[item.pk])
    assert client.get(url(decided)).status_code == 302  # anonymous: to sign in
    client.force_login(reviewer)
    assert client.get(url(decided)).status_code == 200  # decided by rita
    assert client.get(url(held_by_rita)).status_code == 200  # held by rita
    assert client.get(url(waiting)).status_code == 404  # neither
    assert client.post(url(decided)).status_code == 405
    client.force_login(make_user("rob", "reviewer"))
    assert client.get(url(decided)).status_code == 404  # another reviewer's
    client.force_login(make_user("olga", "operator"))
    assert client.get(url(decided)).status_code == 200  # operators read every item
    assert client.get(url(waiting)).status_code == 200
    client.force_login(make_user("nobody"))
    assert client.get(url(decided)).status_code == 403


def test_a_refused_skip_names_the_item_as_every_notice_does(
    rita: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    """A service's message said alone starts a sentence and writes the item
    as #N, like the notices written in the view."""
    item = admit_item().item
    body = rita.post(reverse("review:skip", args=[item.pk]), **HX).content.decode()
    assert f"Item #{item.pk} is not claimed by you." in body


def test_a_skip_is_remembered_even_when_fifty_later_ids_were_skipped_before(
    rita: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    """The session keeps the 50 most recent skips, in the order they were made,
    not the 50 highest ids."""
    item = _hold(admit_item, reviewer)
    session = rita.session
    session["review_skipped"] = list(range(10_000, 10_050))
    session.save()
    rita.post(reverse("review:skip", args=[item.pk]), **HX)
    kept = rita.session["review_skipped"]
    assert kept[-1] == item.pk and len(kept) == 50 and 10_000 not in kept
