from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from reviewqueue import services
from reviewqueue.models import QueuePolicy, ReviewItem, Verdict

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def rita_client(client, reviewer):
    client.force_login(reviewer)
    return client


def claim_for(user):
    return services.claim(reviewer=user)


def test_it_sends_anonymous_visitors_to_login(client, db):
    response = client.get(reverse("review:queue"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_it_refuses_the_review_page_to_a_user_without_the_reviewer_role(client, operator):
    client.force_login(operator)
    assert client.get(reverse("review:queue")).status_code == 403
    assert client.post(reverse("review:next")).status_code == 403


def test_it_refuses_claiming_to_an_operator_even_by_direct_post(client, operator, admit_item):
    item = admit_item().item
    client.force_login(operator)
    client.post(reverse("review:next"), **HX)
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.PENDING


def test_it_shows_a_start_button_and_claims_nothing_on_get(rita_client, admit_item):
    item = admit_item().item
    response = rita_client.get(reverse("review:queue"))
    assert response.status_code == 200
    assert b"Start reviewing" in response.content
    assert b"1 item waiting" in response.content
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.PENDING


def test_it_claims_the_next_item_on_post_and_answers_htmx_with_the_card(rita_client, reviewer, admit_item):
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


def test_it_redirects_a_plain_form_claim_back_to_the_page(rita_client, admit_item):
    item = admit_item(task_description="Plain form task").item
    response = rita_client.post(reverse("review:next"))
    assert response.status_code == 302
    page = rita_client.get(response["Location"])
    assert f"Item #{item.pk}".encode() in page.content
    assert b"Plain form task" in page.content


def test_it_shows_exactly_the_task_output_and_why_it_is_here(rita_client, reviewer, admit_item):
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
    body = rita_client.get(reverse("review:queue")).content.decode()
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


def test_it_escapes_agent_text_in_every_field(rita_client, reviewer, admit_item):
    evil = '<script>alert(1)</script><img src=x onerror="alert(2)"><a href="javascript:alert(3)">x</a>'
    admit_item(task_description=evil, final_output=evil, last_error=evil)
    claim_for(reviewer)
    body = rita_client.get(reverse("review:queue")).content.decode()
    assert "<script>alert" not in body
    assert "<img src=x" not in body
    assert '<a href="javascript:' not in body
    assert body.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 3


def test_it_highlights_code_output_with_pygments(rita_client, reviewer, admit_item):
    admit_item(final_output="def is_even(n):\n    return n % 2 == 0\n")
    claim_for(reviewer)
    body = rita_client.get(reverse("review:queue")).content.decode()
    assert '<div class="hl">' in body
    assert '<span class="k">def</span>' in body


def test_it_shows_the_whole_of_a_long_output(rita_client, reviewer, admit_item):
    lines = [f"line {n} of the agent's long answer" for n in range(5000)]
    admit_item(final_output="\n".join(lines))
    claim_for(reviewer)
    body = rita_client.get(reverse("review:queue")).content.decode()
    assert "line 0 of the" in body
    assert "line 4999 of the" in body
    assert 'class="output"' in body


def test_it_warns_when_the_stored_output_was_cut(rita_client, reviewer, admit_item, settings):
    settings.REVIEWQUEUE_MAX_OUTPUT_CHARS = 100
    admit_item(final_output="word " * 100)
    claim_for(reviewer)
    body = rita_client.get(reverse("review:queue")).content.decode()
    assert "was cut when it was stored" in body
    assert "characters omitted" in body


def test_it_records_an_approval_and_swaps_in_the_next_item(rita_client, reviewer, admit_item):
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


def test_it_records_a_rejection_with_label_and_note(rita_client, reviewer, admit_item):
    item = admit_item().item
    claim_for(reviewer)
    rita_client.post(
        reverse("review:decide", args=[item.pk]),
        {"decision": "reject", "reason_label": "logic_error", "note": "off by one"},
        **HX,
    )
    verdict = Verdict.objects.get(item=item)
    assert (verdict.decision, verdict.reason_label, verdict.note) == ("reject", "logic_error", "off by one")


def test_it_requires_a_reason_to_reject_and_keeps_the_note(rita_client, reviewer, admit_item):
    item = admit_item().item
    claim_for(reviewer)
    url = reverse("review:decide", args=[item.pk])
    response = rita_client.post(url, {"decision": "reject", "note": "my careful note"}, **HX)
    assert response.status_code == 200
    body = response.content.decode()
    assert "A rejection needs a reason" in body
    assert "my careful note" in body
    assert f'data-item="{item.pk}"' in body
    assert not Verdict.objects.filter(item=item).exists()
    plain = rita_client.post(url, {"decision": "reject"})
    assert plain.status_code == 400


def test_it_asks_for_a_decision_when_none_was_posted(rita_client, reviewer, admit_item):
    item = admit_item().item
    claim_for(reviewer)
    response = rita_client.post(reverse("review:decide", args=[item.pk]), {"decision": "maybe"}, **HX)
    assert "Choose Approve or Reject" in response.content.decode()
    assert not Verdict.objects.filter(item=item).exists()


def test_it_answers_a_double_submit_with_already_recorded(rita_client, reviewer, admit_item):
    item = admit_item().item
    admit_item()
    claim_for(reviewer)
    url = reverse("review:decide", args=[item.pk])
    rita_client.post(url, {"decision": "approve"}, **HX)
    again = rita_client.post(url, {"decision": "approve"}, **HX)
    assert again.status_code == 200
    assert "already recorded" in again.content.decode()
    assert Verdict.objects.filter(item=item).count() == 1


def test_it_explains_a_lease_that_expired_before_the_verdict(rita_client, reviewer, admit_item):
    item = admit_item().item
    claim_for(reviewer)
    ReviewItem.objects.filter(pk=item.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    response = rita_client.post(reverse("review:decide", args=[item.pk]), {"decision": "approve"}, **HX)
    assert response.status_code == 200
    assert "ran out before the verdict" in response.content.decode()
    assert not Verdict.objects.filter(item=item).exists()


def test_it_explains_an_item_held_by_another_reviewer(rita_client, make_user, admit_item):
    item = admit_item().item
    claim_for(make_user("ravi", "reviewer"))
    response = rita_client.post(reverse("review:decide", args=[item.pk]), {"decision": "approve"}, **HX)
    assert "held by another reviewer" in response.content.decode()
    assert not Verdict.objects.filter(item=item).exists()


def test_it_gives_a_skipped_item_back_to_the_queue(rita_client, reviewer, admit_item):
    item = admit_item().item
    claim_for(reviewer)
    response = rita_client.post(reverse("review:skip", args=[item.pk]), **HX)
    assert f"Skipped item #{item.pk}" in response.content.decode()
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.PENDING
    assert item.lease_holder is None


def test_it_undoes_the_last_verdict_and_gives_back_the_item_shown_meanwhile(rita_client, reviewer, admit_item):
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


def test_it_says_when_there_is_nothing_to_undo(rita_client, reviewer):
    response = rita_client.post(reverse("review:undo"), **HX)
    assert "Nothing to undo" in response.content.decode()


def test_it_renews_the_lease_with_a_lease_fragment(rita_client, reviewer, admit_item):
    item = admit_item().item
    claim_for(reviewer)
    soon = timezone.now() + timedelta(seconds=20)
    ReviewItem.objects.filter(pk=item.pk).update(lease_expires_at=soon)
    response = rita_client.post(reverse("review:renew", args=[item.pk]), **HX)
    body = response.content.decode()
    assert body.lstrip().startswith('<span id="lease"')
    item.refresh_from_db()
    assert item.lease_expires_at > soon


def test_it_replaces_the_whole_card_when_the_lease_cannot_be_renewed(rita_client, make_user, admit_item):
    item = admit_item().item
    claim_for(make_user("ravi", "reviewer"))
    response = rita_client.post(reverse("review:renew", args=[item.pk]), **HX)
    assert response["HX-Retarget"] == "#card"
    assert "Nothing was lost" in response.content.decode()


def test_it_polls_while_the_queue_is_empty_and_offers_next_once_items_wait(rita_client, admit_item):
    empty = rita_client.get(reverse("review:waiting"), **HX).content.decode()
    assert 'hx-trigger="every 5s"' in empty
    assert "The queue is empty" in empty
    item = admit_item().item
    waiting = rita_client.get(reverse("review:waiting"), **HX).content.decode()
    assert "every 5s" not in waiting
    assert "Start reviewing" in waiting
    item.refresh_from_db()
    assert item.status == ReviewItem.Status.PENDING


def test_it_shows_the_reviewers_pace_and_recent_verdicts(rita_client, reviewer, admit_item):
    items = [admit_item().item for _ in range(3)]
    for item in items:
        claim_for(reviewer)
        ReviewItem.objects.filter(pk=item.pk).update(claimed_at=timezone.now() - timedelta(seconds=30))
        services.decide(item_id=item.pk, reviewer=reviewer, approve=True)
    body = rita_client.get(reverse("review:queue")).content.decode()
    assert "<strong>3</strong> verdicts in the last hour" in body
    assert f"#{items[-1].pk}" in body
    assert "median <strong>–</strong>" not in body
    assert "about <strong>120</strong> an hour at that pace" in body


def test_it_shows_a_banner_in_draft_mode(rita_client, db):
    QueuePolicy.current()
    QueuePolicy.objects.filter(pk=1).update(mode="draft")
    body = rita_client.get(reverse("review:queue")).content.decode()
    assert 'class="banner draft"' in body


def test_it_sends_a_get_on_an_action_url_back_to_the_page(rita_client, reviewer, admit_item):
    item = admit_item().item
    claim_for(reviewer)
    for url in (reverse("review:decide", args=[item.pk]), reverse("review:next"), reverse("review:undo")):
        response = rita_client.get(url)
        assert response.status_code == 302
        assert response["Location"] == reverse("review:queue")
    assert not Verdict.objects.exists()


def test_it_rejects_renew_by_get(rita_client, reviewer, admit_item):
    item = admit_item().item
    claim_for(reviewer)
    assert rita_client.get(reverse("review:renew", args=[item.pk])).status_code == 405


def test_it_carries_notices_as_messages_after_a_plain_form_decision(rita_client, reviewer, admit_item):
    item = admit_item().item
    claim_for(reviewer)
    response = rita_client.post(reverse("review:decide", args=[item.pk]), {"decision": "approve"}, follow=True)
    assert f"Approved item #{item.pk}" in response.content.decode()


def test_it_shows_which_attempt_is_reviewed_its_grade_and_the_failing_checks_descriptions(
    rita_client, reviewer, admit_item
):
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
    body = rita_client.get(reverse("review:queue")).content.decode()
    assert "regression: later attempts got worse" in body
    assert "attempt 3 of 5, the best: 4 of 5 checks" in body
    assert "Error of attempt 3" in body and "AssertionError at check_5 (attempt 3)" in body
    assert "<code>check_5</code> subtractive &lt;b&gt;forty&lt;/b&gt;" in body  # escaped like all stored text


def test_it_says_last_error_and_lists_no_checks_when_the_last_attempt_is_reviewed(rita_client, reviewer, admit_item):
    admit_item(attempt_count=4, reviewed_attempt=4, checks_passed=1, checks_total=2, failing_checks=[{"id": "c2"}])
    claim_for(reviewer)
    body = rita_client.get(reverse("review:queue"), **HX).content.decode()
    assert "attempt 4 of 4, the best: 1 of 2 checks" in body
    assert "Last error" in body and "Error of attempt" not in body
    assert '<code>c2</code> <span class="muted">(no description)</span>' in body


def test_it_shows_a_scored_attempts_estimated_quality(rita_client, reviewer, admit_item):
    admit_item(attempt_count=6, reviewed_attempt=4, reviewed_score=0.8375)
    claim_for(reviewer)
    body = rita_client.get(reverse("review:queue")).content.decode()
    assert "attempt 4 of 6, the best: estimated quality 0.84" in body
    assert "Failing checks" not in body
