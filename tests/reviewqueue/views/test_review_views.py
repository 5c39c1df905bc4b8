"""The reviewer's page through its views: who may open it, what the card
shows, each action (claim, decide, skip, undo, renew) with htmx and as a plain
form, and the words for every verdict that could not be recorded."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone
from pytest_django.fixtures import Settings

from reviewqueue import services
from reviewqueue.models import Queue, ReviewItem, Verdict

HX = {"HTTP_HX_REQUEST": "true"}
AdmitItem = Callable[..., Any]


@pytest.fixture
def rita_client(client: Client, reviewer: User) -> Client:
    """A client signed in as the reviewer rita."""
    client.force_login(reviewer)
    return client


@pytest.fixture
def held_item(admit_item: AdmitItem, reviewer: User) -> ReviewItem:
    """An item rita holds under a lease, the only one admitted so far."""
    item = admit_item().item
    claim_for(reviewer)
    return item


def claim_for(user: User) -> ReviewItem | None:
    return services.claim(reviewer=user)


def queue_page(client: Client, **headers: str) -> str:
    """The review page as the client sees it now."""
    return client.get(reverse("review:queue"), **headers).content.decode()


# --- who may review ----------------------------------------------------------------------------------


def test_it_sends_anonymous_visitors_to_login(client: Client, db: None) -> None:
    response = client.get(reverse("review:queue"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_it_refuses_the_review_page_to_a_user_without_the_reviewer_role(client: Client, operator: User) -> None:
    client.force_login(operator)
    # Operators review by default; a team that keeps the roles apart turns that off.
    with override_settings(REVIEWQUEUE_OPERATORS_REVIEW=False):
        assert client.get(reverse("review:queue")).status_code == 403
        assert client.post(reverse("review:next")).status_code == 403


def test_it_refuses_claiming_to_an_operator_even_by_direct_post(
    client: Client, operator: User, admit_item: AdmitItem
) -> None:
    item = admit_item().item
    client.force_login(operator)
    with override_settings(REVIEWQUEUE_OPERATORS_REVIEW=False):
        client.post(reverse("review:next"), **HX)
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.PENDING


# --- claiming: a GET never claims, a POST does -------------------------------------------------------


def test_it_shows_a_start_button_and_claims_nothing_on_get(rita_client: Client, admit_item: AdmitItem) -> None:
    item = admit_item().item
    response = rita_client.get(reverse("review:queue"))
    assert response.status_code == 200
    assert b"Start reviewing" in response.content
    assert b"1 item waiting" in response.content
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.PENDING


def test_it_claims_the_next_item_on_post_and_answers_htmx_with_the_card(
    rita_client: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    item = admit_item(task_description="Sort the list").item
    response = rita_client.post(reverse("review:next"), **HX)
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="card"')
    assert "Sort the list" in body
    assert 'id="context"' in body and "hx-swap-oob" in body
    assert "<html" not in body
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.CLAIMED
    assert item.lease_holder == reviewer


def test_it_redirects_a_plain_form_claim_back_to_the_page(rita_client: Client, admit_item: AdmitItem) -> None:
    item = admit_item(task_description="Plain form task").item
    response = rita_client.post(reverse("review:next"))
    assert response.status_code == 302
    page = rita_client.get(response["Location"])
    assert f"Item #{item.pk}".encode() in page.content
    assert b"Plain form task" in page.content


def test_it_polls_while_the_queue_is_empty_and_offers_next_once_items_wait(
    rita_client: Client, admit_item: AdmitItem
) -> None:
    empty = rita_client.get(reverse("review:waiting"), **HX).content.decode()
    assert 'hx-trigger="every 5s"' in empty
    assert "The queue is empty" in empty
    item = admit_item().item
    waiting = rita_client.get(reverse("review:waiting"), **HX).content.decode()
    assert "every 5s" not in waiting
    assert "Start reviewing" in waiting
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.PENDING


# --- what the card shows -----------------------------------------------------------------------------


def test_it_shows_exactly_the_task_output_and_why_it_is_here(
    rita_client: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    admit_item(
        task_description="Write fizzbuzz",
        final_output="Here it is, as asked.",
        last_error="AssertionError: case 15",
        attempt_count=7,
        cutoff_reason="oscillation",
        draft=True,
        label="sampled",
    )
    claim_for(reviewer)
    body = queue_page(rita_client)
    task, output, why = (
        body.index("Write fizzbuzz"),
        body.index("Here it is"),
        body.index("oscillation between failures"),
    )
    assert task < output < why
    assert "AssertionError: case 15" in body
    assert "7 attempts" in body
    assert 'class="badge sampled"' in body
    assert 'class="badge draft"' in body
    assert "confidence" not in body.lower()


def test_it_escapes_agent_text_in_every_field(rita_client: Client, reviewer: User, admit_item: AdmitItem) -> None:
    evil = '<script>alert(1)</script><img src=x onerror="alert(2)"><a href="javascript:alert(3)">x</a>'
    admit_item(task_description=evil, final_output=evil, last_error=evil)
    claim_for(reviewer)
    body = queue_page(rita_client)
    assert "<script>alert" not in body
    assert "<img src=x" not in body
    assert '<a href="javascript:' not in body
    # The task, the output, the last error, and the editor (e) prefilled with the output.
    assert body.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 4


def test_it_highlights_code_output_with_pygments(rita_client: Client, reviewer: User, admit_item: AdmitItem) -> None:
    admit_item(final_output="def is_even(n):\n    return n % 2 == 0\n")
    claim_for(reviewer)
    body = queue_page(rita_client)
    assert '<div class="hl">' in body
    assert '<span class="k">def</span>' in body


def test_it_shows_the_whole_of_a_long_output(rita_client: Client, reviewer: User, admit_item: AdmitItem) -> None:
    lines = [f"line {n} of the agent's long answer" for n in range(5000)]
    admit_item(final_output="\n".join(lines))
    claim_for(reviewer)
    body = queue_page(rita_client)
    assert "line 0 of the" in body
    assert "line 4999 of the" in body
    assert 'class="output"' in body


def test_it_warns_when_the_stored_output_was_cut(
    rita_client: Client, reviewer: User, admit_item: AdmitItem, settings: Settings
) -> None:
    settings.REVIEWQUEUE_MAX_OUTPUT_CHARS = 100
    admit_item(final_output="word " * 100)
    claim_for(reviewer)
    body = queue_page(rita_client)
    assert "was cut when it was stored" in body
    assert "characters omitted" in body


def test_it_renders_the_task_description_as_markdown(
    rita_client: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    admit_item(task_description="# Goal\n\nWrite `is_even`:\n\n- handles *n = 0*\n- <b>no</b> imports")
    claim_for(reviewer)
    body = queue_page(rita_client)
    task = body[body.index('class="task prose"') :]
    assert "<h3>Goal</h3>" in task
    assert "<code>is_even</code>" in task
    assert "<li>handles <em>n = 0</em></li>" in task
    assert "<li>&lt;b&gt;no&lt;/b&gt; imports</li>" in task


def test_it_explains_the_draft_badge(rita_client: Client, reviewer: User, admit_item: AdmitItem) -> None:
    admit_item(draft=True)
    claim_for(reviewer)
    body = queue_page(rita_client)
    assert 'class="badge draft"' in body
    assert "<strong>Draft</strong>: made while the queue was over its high watermark" in body


def test_it_shows_a_banner_in_draft_mode(rita_client: Client, db: None) -> None:
    Queue.objects.filter(pk=Queue.current().pk).update(mode="draft")
    body = queue_page(rita_client)
    assert 'class="banner draft"' in body


def test_it_shows_which_attempt_is_reviewed_its_grade_and_the_failing_checks_descriptions(
    rita_client: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    admit_item(
        attempt_count=5,
        reviewed_attempt=3,
        checks_passed=4,
        checks_total=5,
        cutoff_reason="regression",
        last_error="AssertionError at check_5 (attempt 3)",
        failing_checks=[{"id": "check_5", "about": "subtractive <b>forty</b>"}],
    )
    claim_for(reviewer)
    body = queue_page(rita_client)
    assert "regression: later attempts got worse" in body
    assert "attempt 3 of 5, the best: 4 of 5 checks" in body
    assert "Error of attempt 3" in body and "AssertionError at check_5 (attempt 3)" in body
    assert "<code>check_5</code> subtractive &lt;b&gt;forty&lt;/b&gt;" in body  # escaped like all stored text


def test_it_says_last_error_and_lists_no_checks_when_the_last_attempt_is_reviewed(
    rita_client: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    admit_item(attempt_count=4, reviewed_attempt=4, checks_passed=1, checks_total=2, failing_checks=[{"id": "c2"}])
    claim_for(reviewer)
    body = queue_page(rita_client, **HX)
    assert "attempt 4 of 4, the best: 1 of 2 checks" in body
    assert "Last error" in body and "Error of attempt" not in body
    assert '<code>c2</code> <span class="muted">(no description)</span>' in body


def test_it_shows_a_scored_attempts_estimated_quality(
    rita_client: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    admit_item(attempt_count=6, reviewed_attempt=4, reviewed_score=0.8375)
    claim_for(reviewer)
    body = queue_page(rita_client)
    assert "attempt 4 of 6, the best: estimated quality 0.84" in body
    assert "Failing checks" not in body


def test_it_shows_the_queue_instructions_as_sanitised_markdown(rita_client: Client, db: None) -> None:
    Queue.objects.filter(pk=Queue.current().pk).update(
        instructions="**Approve** only what you would ship.\n\n<script>alert(1)</script> [x](javascript:alert(2))"
    )
    body = queue_page(rita_client)
    # On the page and in the ? help.
    assert body.count("<strong>Approve</strong> only what you would ship.") == 2
    assert "<script>alert(1)" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert 'href="javascript:' not in body


def test_it_explains_what_approve_means_by_default(rita_client: Client, db: None) -> None:
    body = queue_page(rita_client)
    assert "How to judge" in body
    assert "<strong>Approve</strong> only output you would accept" in body


# --- deciding ----------------------------------------------------------------------------------------


def test_it_records_an_approval_and_swaps_in_the_next_item(
    rita_client: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    first = admit_item().item
    second = admit_item(task_description="The second task").item
    claim_for(reviewer)
    response = rita_client.post(reverse("review:decide", args=[first.pk]), {"decision": "approve"}, **HX)
    assert response.status_code == 200
    body = response.content.decode()
    assert f"Approved item #{first.pk}" in body
    assert f'data-item="{second.pk}"' in body
    assert "The second task" in body
    verdict = Verdict.objects.get(item=first)
    assert verdict.decision == "approve"
    assert verdict.reviewer == reviewer
    assert "decide;dur=" in response["Server-Timing"]


def test_it_records_a_rejection_with_label_and_note(rita_client: Client, held_item: ReviewItem) -> None:
    rita_client.post(
        reverse("review:decide", args=[held_item.pk]),
        {"decision": "reject", "reason_label": "logic_error", "note": "off by one"},
        **HX,
    )
    verdict = Verdict.objects.get(item=held_item)
    assert (verdict.decision, verdict.reason_label, verdict.note) == ("reject", "logic_error", "off by one")


def test_it_requires_a_reason_to_reject_and_keeps_the_note(rita_client: Client, held_item: ReviewItem) -> None:
    url = reverse("review:decide", args=[held_item.pk])
    response = rita_client.post(url, {"decision": "reject", "note": "my careful note"}, **HX)
    assert response.status_code == 200
    body = response.content.decode()
    assert "A rejection needs a reason" in body
    assert "my careful note" in body
    assert f'data-item="{held_item.pk}"' in body
    assert not Verdict.objects.filter(item=held_item).exists()
    plain = rita_client.post(url, {"decision": "reject"})
    assert plain.status_code == 400


def test_it_asks_for_a_decision_when_none_was_posted(rita_client: Client, held_item: ReviewItem) -> None:
    response = rita_client.post(reverse("review:decide", args=[held_item.pk]), {"decision": "maybe"}, **HX)
    assert "Choose Approve or Reject" in response.content.decode()
    assert not Verdict.objects.filter(item=held_item).exists()


def test_it_carries_notices_as_messages_after_a_plain_form_decision(rita_client: Client, held_item: ReviewItem) -> None:
    response = rita_client.post(reverse("review:decide", args=[held_item.pk]), {"decision": "approve"}, follow=True)
    assert f"Approved item #{held_item.pk}" in response.content.decode()


# --- a verdict that is not recorded, and why ---------------------------------------------------------


def test_it_answers_a_double_submit_with_already_recorded(
    rita_client: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    item = admit_item().item
    admit_item()
    claim_for(reviewer)
    url = reverse("review:decide", args=[item.pk])
    rita_client.post(url, {"decision": "approve"}, **HX)
    again = rita_client.post(url, {"decision": "approve"}, **HX)
    assert again.status_code == 200
    assert "already recorded" in again.content.decode()
    assert Verdict.objects.filter(item=item).count() == 1


def test_it_says_a_lease_that_ran_out_gave_the_same_item_back(
    rita_client: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    item = admit_item().item
    admit_item()
    claim_for(reviewer)
    ReviewItem.objects.filter(pk=item.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    response = rita_client.post(
        reverse("review:decide", args=[item.pk]),
        {"decision": "reject", "reason_label": "code_error", "note": "my careful note"},
        **HX,
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "ran out before your verdict arrived, so the verdict was not recorded" in body
    # The same item comes back, and the page says so instead of "the next item".
    assert f'data-item="{item.pk}"' in body
    assert "yours again under a new lease: decide it again" in body
    assert "next item" not in body
    assert "my careful note" in body
    assert 'value="code_error" checked' in body
    assert not Verdict.objects.filter(item=item).exists()


def test_it_says_another_reviewer_took_an_item_whose_lease_ran_out(
    rita_client: Client, reviewer: User, make_user: Callable[..., User], admit_item: AdmitItem
) -> None:
    item = admit_item().item
    other = admit_item().item
    claim_for(reviewer)
    ReviewItem.objects.filter(pk=item.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    services.expire_leases()
    assert claim_for(make_user("ravi", "reviewer")).pk == item.pk
    response = rita_client.post(reverse("review:decide", args=[item.pk]), {"decision": "approve"}, **HX)
    body = response.content.decode()
    assert "the verdict was not recorded. Another reviewer has it now. Here is item" in body
    assert f'data-item="{other.pk}"' in body
    assert not Verdict.objects.filter(item=item).exists()


def test_it_tells_the_second_tab_what_the_first_recorded(
    rita_client: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    item = admit_item().item
    admit_item()
    claim_for(reviewer)
    services.decide(item_id=item.pk, reviewer=reviewer, approve=True)  # the first tab
    response = rita_client.post(
        reverse("review:decide", args=[item.pk]), {"decision": "reject", "reason_label": "logic_error"}, **HX
    )
    body = response.content.decode()
    assert f"Item #{item.pk} was already approved just now by you, in another tab or window" in body
    assert "this rejection was not recorded" in body
    assert "Undo (u) within 15 s of that verdict takes it back" in body
    assert Verdict.objects.get(item=item).decision == "approve"


def test_it_names_the_other_reviewer_whose_verdict_came_first(
    rita_client: Client, reviewer: User, make_user: Callable[..., User], held_item: ReviewItem
) -> None:
    ReviewItem.objects.filter(pk=held_item.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    services.expire_leases()
    ravi = make_user("ravi", "reviewer")
    claim_for(ravi)
    services.decide(item_id=held_item.pk, reviewer=ravi, approve=False, reason_label="hallucination")
    response = rita_client.post(reverse("review:decide", args=[held_item.pk]), {"decision": "approve"}, **HX)
    body = response.content.decode()
    assert (
        f"Item #{held_item.pk} was already rejected (hallucination) by ravi, just now; your approval was not recorded"
        in body
    )
    assert Verdict.objects.get(item=held_item).reviewer == ravi


def test_it_explains_an_item_held_by_another_reviewer(
    rita_client: Client, make_user: Callable[..., User], admit_item: AdmitItem
) -> None:
    item = admit_item().item
    claim_for(make_user("ravi", "reviewer"))
    response = rita_client.post(reverse("review:decide", args=[item.pk]), {"decision": "approve"}, **HX)
    assert "held by another reviewer" in response.content.decode()
    assert not Verdict.objects.filter(item=item).exists()


# --- skipping ----------------------------------------------------------------------------------------


def test_it_gives_a_skipped_item_back_to_the_queue(rita_client: Client, held_item: ReviewItem) -> None:
    response = rita_client.post(reverse("review:skip", args=[held_item.pk]), **HX)
    body = response.content.decode()
    assert f"Skipped item #{held_item.pk}" in body
    # The only item is the one just skipped: it is not handed straight back.
    assert 'data-item=""' in body
    assert "No other item waits right now" in body
    held_item.refresh_from_db()
    assert held_item.status == ReviewItem.Status.PENDING
    assert held_item.lease_holder is None


def test_it_moves_on_to_the_next_item_after_a_skip(rita_client: Client, reviewer: User, admit_item: AdmitItem) -> None:
    first = admit_item().item
    second = admit_item(task_description="The second task").item
    claim_for(reviewer)
    response = rita_client.post(reverse("review:skip", args=[first.pk]), **HX)
    body = response.content.decode()
    assert f"Skipped item #{first.pk}" in body
    assert f'data-item="{second.pk}"' in body
    assert "The second task" in body
    second.refresh_from_db()
    assert second.lease_holder == reviewer


def test_it_moves_on_after_a_plain_form_skip_too(rita_client: Client, reviewer: User, admit_item: AdmitItem) -> None:
    first = admit_item().item
    second = admit_item().item
    claim_for(reviewer)
    page = rita_client.post(reverse("review:skip", args=[first.pk]), follow=True).content.decode()
    assert f"Skipped item #{first.pk}" in page
    assert f'data-item="{second.pk}"' in page


# --- undo and the lease ------------------------------------------------------------------------------


def test_it_undoes_the_last_verdict_and_gives_back_the_item_shown_meanwhile(
    rita_client: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    first = admit_item().item
    second = admit_item().item
    claim_for(reviewer)
    rita_client.post(reverse("review:decide", args=[first.pk]), {"decision": "approve"}, **HX)
    response = rita_client.post(reverse("review:undo"), {"current": str(second.pk)}, **HX)
    body = response.content.decode()
    assert f"Verdict on item #{first.pk} taken back" in body
    assert f'data-item="{first.pk}"' in body
    assert not Verdict.objects.filter(item=first).exists()
    second.refresh_from_db()
    assert second.status == ReviewItem.Status.PENDING


def test_it_says_when_there_is_nothing_to_undo(rita_client: Client, reviewer: User) -> None:
    response = rita_client.post(reverse("review:undo"), **HX)
    assert "Nothing to undo" in response.content.decode()


def test_it_renews_the_lease_with_a_lease_fragment(rita_client: Client, held_item: ReviewItem) -> None:
    soon = timezone.now() + timedelta(seconds=20)
    ReviewItem.objects.filter(pk=held_item.pk).update(lease_expires_at=soon)
    response = rita_client.post(reverse("review:renew", args=[held_item.pk]), **HX)
    body = response.content.decode()
    assert body.lstrip().startswith('<span id="lease"')
    held_item.refresh_from_db()
    assert held_item.lease_expires_at > soon


def test_it_replaces_the_whole_card_when_the_lease_cannot_be_renewed(
    rita_client: Client, make_user: Callable[..., User], admit_item: AdmitItem
) -> None:
    item = admit_item().item
    claim_for(make_user("ravi", "reviewer"))
    response = rita_client.post(reverse("review:renew", args=[item.pk]), **HX)
    assert response["HX-Retarget"] == "#card"
    assert "Nothing was lost" in response.content.decode()


# --- actions are POSTs: a GET on one goes back to the page -------------------------------------------


def test_it_sends_a_get_on_an_action_url_back_to_the_page(rita_client: Client, held_item: ReviewItem) -> None:
    for url in (reverse("review:decide", args=[held_item.pk]), reverse("review:next"), reverse("review:undo")):
        response = rita_client.get(url)
        assert response.status_code == 302
        assert response["Location"] == reverse("review:queue")
    assert not Verdict.objects.exists()


def test_it_rejects_renew_by_get(rita_client: Client, held_item: ReviewItem) -> None:
    assert rita_client.get(reverse("review:renew", args=[held_item.pk])).status_code == 405


# --- the context panel: the reviewer's own pace and verdicts -----------------------------------------


def test_it_says_just_now_for_a_verdict_under_a_minute_old(
    rita_client: Client, reviewer: User, held_item: ReviewItem
) -> None:
    services.decide(item_id=held_item.pk, reviewer=reviewer, approve=True)
    body = queue_page(rita_client)
    assert "just now" in body
    assert "0\xa0minutes" not in body and "0 minutes" not in body


def test_it_claims_no_pace_before_the_first_verdict(rita_client: Client, reviewer: User, admit_item: AdmitItem) -> None:
    admit_item()
    claim_for(reviewer)
    body = queue_page(rita_client)
    assert "median" not in body
    assert "No verdicts yet" in body


def test_it_says_under_1_s_rather_than_0_s_for_scripted_speed(
    rita_client: Client, reviewer: User, held_item: ReviewItem
) -> None:
    services.decide(item_id=held_item.pk, reviewer=reviewer, approve=True)
    body = queue_page(rita_client)
    assert "median <strong>under 1 s</strong>" in body
    assert "0 s</strong>" not in body


def test_it_shows_the_reviewers_pace_and_recent_verdicts(
    rita_client: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    items = [admit_item().item for _ in range(3)]
    for item in items:
        claim_for(reviewer)
        ReviewItem.objects.filter(pk=item.pk).update(claimed_at=timezone.now() - timedelta(seconds=30))
        services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    body = queue_page(rita_client)
    assert "<strong>3</strong> verdicts in the last hour" in body
    assert f"#{items[-1].pk}" in body
    assert "median <strong>–</strong>" not in body
    assert "about <strong>120</strong> an hour at that pace" in body


def _card(body: str) -> str:
    return body.split('id="card"', 1)[1].split("</section>", 1)[0]


def test_a_paused_reviewer_is_told_so_and_not_invited_to_start(
    rita_client: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    from reviewqueue.models import ReviewerStanding

    for _ in range(3):
        admit_item()
    now = timezone.now()
    ReviewerStanding.objects.create(reviewer=reviewer, flagged_at=now, paused_at=now)

    card = _card(rita_client.get(reverse("review:queue")).content.decode())
    assert "You are paused" in card
    assert "Start reviewing" not in card and "items waiting" not in card
    assert 'hx-trigger="every 5s"' in card  # a reinstatement shows by itself

    card = _card(rita_client.post(reverse("review:next"), HTTP_HX_REQUEST="true").content.decode())
    assert "You are paused" in card
    assert "Nothing waits right now" not in card
    assert "Start reviewing" not in card and "items waiting" not in card


def _held_from_default_with_docs_waiting(reviewer: User, admit_item: AdmitItem) -> tuple[Queue, ReviewItem]:
    """Rita reviews Default and Open tasks (docs), one item waits in each,
    and she holds Default's."""
    docs = services.create_queue(user=None, slug="docs", name="Open tasks")
    docs.members.add(reviewer)
    admit_item(queue="docs")
    held = admit_item(queue="default").item
    assert services.claim(reviewer=reviewer, queue=Queue.default()).pk == held.pk
    return docs, held


def test_an_item_held_from_another_queue_is_named_as_such_under_the_queue_in_view(
    rita_client: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    _, held = _held_from_default_with_docs_waiting(reviewer, admit_item)

    body = rita_client.get(reverse("review:queue") + "?queue=docs").content.decode()
    card = _card(body)
    assert f'data-item="{held.pk}"' in card
    assert f"Item #{held.pk} is from Default, not Open tasks" in card
    # In its own queue, or in all queues, nothing needs saying.
    for query in ("?queue=default", ""):
        assert "is from Default" not in _card(rita_client.get(reverse("review:queue") + query).content.decode())


def test_recent_verdicts_read_alike_and_a_pushed_output_without_attempts_says_so(
    rita_client: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    for decision in ("approve", "reject", "edit"):
        item = admit_item().item
        assert services.claim(reviewer=reviewer).pk == item.pk
        services.decide(
            item_id=item.pk,
            reviewer=reviewer,
            approve=decision != "reject",
            reason_label="logic_error" if decision == "reject" else "",
            edited_output="fixed\n" if decision == "edit" else "",
        )
    pushed = admit_item(attempt_count=0).item
    assert services.claim(reviewer=reviewer).pk == pushed.pk
    body = rita_client.get(reverse("review:queue")).content.decode()
    recent = body.split('class="recent"')[1].split("</ol>")[0]
    for words in ("Approved</span>", "Rejected</span>", "Approved with edits</span>"):
        assert words in recent
    assert "Approve</span>" not in recent and "approved with edits" not in recent
    cutoff = body.split('id="cutoff"')[1].split("</dl>")[0]
    assert "0 attempts" not in cutoff and "not reported by its producer" in cutoff


def test_the_side_panel_tells_the_mode_of_the_queue_whose_waiting_count_it_shows(
    rita_client: Client, reviewer: User, admit_item: AdmitItem
) -> None:
    docs, _ = _held_from_default_with_docs_waiting(reviewer, admit_item)
    Queue.objects.filter(pk=docs.pk).update(mode="draft")

    body = rita_client.get(reverse("review:queue") + "?queue=docs").content.decode()
    panel = body.split('id="context"', 1)[1].split("</aside>", 1)[0]
    assert "Queue Open tasks" in panel
    assert "mode: <strong>draft</strong>" in panel
    assert "of Default" not in panel and "normal" not in panel


@pytest.mark.double_review
def test_items_that_wait_for_someone_else_are_not_offered_as_work(
    rita_client: Client, reviewer: User, make_user: Any, admit_item: AdmitItem
) -> None:
    """Rita answered the only item; it waits for a second reviewer. The page
    must not say "1 item waiting / Start reviewing" beside "Nothing waits
    right now": it says none of the waiting items is hers to take, and
    keeps saying so on its poll until something new arrives."""
    make_user("sam", "reviewer")
    Queue.objects.filter(pk=Queue.default().pk).update(double_review_rate=1.0)
    item = admit_item().item
    assert services.claim(reviewer=reviewer).pk == item.pk
    services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    assert ReviewItem.objects.get(pk=item.pk).status == ReviewItem.Status.PENDING  # waits for sam

    card = _card(rita_client.post(reverse("review:next"), HTTP_HX_REQUEST="true").content.decode())
    assert "Nothing waits right now" not in card and "Start reviewing" not in card
    assert "Nothing for you right now" in card
    assert "1 item waits in Default for another reviewer or an operator" in card
    poll = re.search(r'hx-get="([^"]+)"', card)
    assert poll is not None
    polled = _card(rita_client.get(html.unescape(poll.group(1)), HTTP_HX_REQUEST="true").content.decode())
    assert "Nothing for you right now" in polled and "Start reviewing" not in polled

    admit_item()  # something new: perhaps hers
    polled = _card(rita_client.get(html.unescape(poll.group(1)), HTTP_HX_REQUEST="true").content.decode())
    assert "Start reviewing" in polled
