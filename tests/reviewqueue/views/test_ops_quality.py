"""The review-quality page, its POSTs (settle, reinstate, retire) and the
Mark as gold form on an item's page: who may use them, what they change,
and what a refused form gives back."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from reviewqueue import services
from reviewqueue.forms import PolicyForm
from reviewqueue.models import GoldItem, Judgement, Queue, ReviewerStanding, ReviewItem, Verdict
from reviewqueue.views import quality as quality_view

pytestmark = [pytest.mark.double_review, pytest.mark.django_db]

HX = {"HTTP_HX_REQUEST": "true"}


def report(**overrides: Any) -> dict[str, Any]:
    """A quality report in the shape reviewqueue.agreement returns."""
    base: dict[str, Any] = {
        "decision_alpha": {"value": 0.71, "ci95": [0.55, 0.84], "items": 42},
        "label_alpha": {"value": None, "ci95": None, "items": 3},
        "pairs": [
            {"a": "rita", "b": "rob", "a_id": 1, "b_id": 2, "items": 14, "kappa": 0.85, "ci95": [0.6, 0.97]},
            {"a": "rita", "b": "sam", "a_id": 1, "b_id": 3, "items": 4, "kappa": None, "ci95": None},
        ],
        "reviewers": [],
        "double_review": {
            "awaiting_second": 5,
            "awaiting_third": 2,
            "awaiting_operator": 1,
            "settled": {"reviewer": 3, "agreement": 10, "tiebreak": 2, "operator": 1},
        },
        "gold": {"active": 1, "answers": 12},
        "min_pair_overlap": 10,
    }
    base.update(overrides)
    return base


@pytest.fixture(autouse=True)
def _no_double_review_or_gold() -> None:
    # Items here are decided by hand; the services must not serve copies or second reviews.
    Queue.objects.filter(pk=Queue.current().pk).update(double_review_rate=0, gold_rate=0)


@pytest.fixture
def fixed_report(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    found = report()
    monkeypatch.setattr(quality_view.agreement, "cached_quality_report", lambda: found)
    return found


@pytest.fixture
def ops_client(client: Client, operator: User) -> Client:
    client.force_login(operator)
    return client


def flagged(make_user: Any, name: str, *, paused: bool) -> tuple[User, dict[str, Any]]:
    user = make_user(name, "reviewer")
    from django.utils import timezone

    now = timezone.now()
    ReviewerStanding.objects.create(reviewer=user, flagged_at=now, paused_at=now if paused else None)
    row = {
        "id": user.pk,
        "reviewer": name,
        "gold_answers": 12,
        "gold_correct": 6,
        "accuracy": 0.5,
        "ci95": [0.25, 0.75],
        "label_answers": 4,
        "label_correct": 3,
        "error_rate": 0.3,
        "flagged": True,
        "paused": paused,
    }
    return user, row


def disagreement(admit_item: Any, make_user: Any, *, round_: int, decisions: list[tuple[str, str]]) -> ReviewItem:
    """A double-reviewed item waiting in ``round_`` with the reviewers' answers."""
    item = admit_item().item
    ReviewItem.objects.filter(pk=item.pk).update(review_round=round_)
    for n, (decision, label) in enumerate(decisions, start=1):
        judge = make_user(f"judge-{item.pk}-{n}", "reviewer")
        Judgement.objects.create(
            item=item, reviewer=judge, kind=Judgement.Kind.REVIEW, round=n, decision=decision, reason_label=label
        )
    item.refresh_from_db()
    return item


def decided(admit_item: Any, reviewer: User, *, approve: bool, label: str = "") -> ReviewItem:
    item = admit_item().item
    claimed = services.claim(reviewer=reviewer)
    assert claimed is not None and claimed.pk == item.pk
    services.decide(item_id=item.pk, reviewer=reviewer, approve=approve, reason_label=label)
    item.refresh_from_db()
    return item


# --- who may use it ---------------------------------------------------------------------


def test_an_anonymous_visitor_is_sent_to_sign_in(client: Client, db: None) -> None:
    response = client.get(reverse("ops:quality"))
    assert response.status_code == 302 and response["Location"].startswith("/login/?next=/ops/quality/")


def test_a_reviewer_gets_403_on_the_page_and_every_post(client: Client, reviewer: User, admit_item: Any) -> None:
    item = admit_item().item
    gold = GoldItem.objects.create(item=admit_item().item, expected_decision="approve")
    ReviewerStanding.objects.create(reviewer=reviewer, flagged_at="2026-01-01T00:00:00Z")
    client.force_login(reviewer)
    assert client.get(reverse("ops:quality")).status_code == 403
    posts = {
        reverse("ops:quality_settle", args=[item.pk]): {f"settle-{item.pk}-decision": "approve"},
        reverse("ops:quality_reinstate", args=[reviewer.pk]): {},
        reverse("ops:gold_retire", args=[gold.pk]): {},
        reverse("ops:gold_mark", args=[item.pk]): {"expected_decision": "approve"},
    }
    for url, data in posts.items():
        assert client.post(url, data).status_code == 403, url
        assert client.post(url, data, **HX).status_code == 403, url
    assert ReviewerStanding.objects.get(reviewer=reviewer).flagged_at is not None
    assert GoldItem.objects.get(pk=gold.pk).retired_at is None
    assert not GoldItem.objects.filter(item=item).exists()


# --- what the page says -------------------------------------------------------------------


def test_the_page_reads_the_numbers_in_words(ops_client: Client, fixed_report: dict[str, Any]) -> None:
    body = ops_client.get(reverse("ops:quality")).content.decode()
    assert "0.71" in body and "0.55 to 0.84" in body and "42 items" in body
    assert "Tentative" in body  # 0.71 lies between 0.667 and 0.8
    assert "Too little data: 3 double-reviewed items so far" in body  # the label alpha is None
    assert "rita and rob" in body and "almost perfect" in body
    assert "too few shared items" in body  # a pair below the overlap has no kappa
    assert "1 waiting for an operator, 2 waiting for a third reviewer, 5 waiting for a second review" in body
    assert 'aria-current="page">Review quality' in body


@pytest.mark.parametrize(
    ("value", "words"),
    [(0.85, "Reliable"), (0.8, "Reliable"), (0.7, "Tentative"), (0.667, "Tentative"), (0.5, "Unreliable")],
)
def test_alpha_is_read_with_krippendorffs_thresholds(value: float, words: str) -> None:
    text, _ = quality_view.alpha_reading({"value": value, "ci95": [0, 1], "items": 20})
    assert text.startswith(words)


def test_alpha_on_a_handful_of_items_is_not_read_at_all() -> None:
    text, tone = quality_view.alpha_reading({"value": -0.5, "ci95": [-0.5, -0.5], "items": 2}, 10)
    assert text.startswith("Too little data: 2 double-reviewed items") and tone == ""


def test_flagged_and_paused_reviewers_get_badges_and_a_reinstate_button(
    ops_client: Client, fixed_report: dict[str, Any], make_user: Any
) -> None:
    _, paused_row = flagged(make_user, "paula", paused=True)
    good = make_user("gina", "reviewer")
    fixed_report["reviewers"] = [
        paused_row,
        {**paused_row, "id": good.pk, "reviewer": "gina", "flagged": False, "paused": False, "accuracy": 0.9},
    ]
    body = ops_client.get(reverse("ops:quality")).content.decode()
    paula = body.split(f'id="reviewer-{paused_row["id"]}"')[1].split("</tr>")[0]
    gina = body.split(f'id="reviewer-{good.pk}"')[1].split("</tr>")[0]
    assert "paused" in paula and "flagged" in paula and "Reinstate" in paula
    assert "in good standing" in gina and "Reinstate" not in gina
    # The accuracy interval is drawn: the range from 25 % to 75 %, the policy's bar at 70 %.
    assert 'class="ci-range" x="25.0" y="2" width="50.0"' in paula
    assert 'class="ci-threshold" x1="70.0"' in paula


def test_disagreements_show_the_answers_side_by_side(
    ops_client: Client, fixed_report: dict[str, Any], admit_item: Any, make_user: Any
) -> None:
    third = disagreement(admit_item, make_user, round_=3, decisions=[("approve", ""), ("reject", "logic_error")])
    operator_turn = disagreement(
        admit_item,
        make_user,
        round_=4,
        decisions=[("approve", ""), ("reject", "code_error"), ("send_back", "")],
    )
    second = disagreement(admit_item, make_user, round_=2, decisions=[("approve", "")])
    Judgement.objects.filter(item=operator_turn, round=3).update(note="try a loop instead")
    body = ops_client.get(reverse("ops:quality")).content.decode()
    assert f'id="disagreement-{second.pk}"' not in body  # waiting for a second review: only counted
    # The operator's turn comes first.
    assert body.index(f'id="disagreement-{operator_turn.pk}"') < body.index(f'id="disagreement-{third.pk}"')
    block = body.split(f'id="disagreement-{operator_turn.pk}"')[1].split("</article>")[0]
    assert "waits for an operator" in block
    assert block.count('class="judgement"') == 3
    assert "code error" in block and "try a loop instead" in block and "Sent back</span>" in block


def test_a_settle_form_without_a_label_comes_back_with_the_error_and_the_note(
    ops_client: Client, fixed_report: dict[str, Any], admit_item: Any, make_user: Any
) -> None:
    item = disagreement(admit_item, make_user, round_=4, decisions=[("approve", ""), ("reject", "logic_error")])
    prefix = f"settle-{item.pk}"
    url = reverse("ops:quality_settle", args=[item.pk])
    data = {f"{prefix}-decision": "reject", f"{prefix}-note": "kept as typed"}
    response = ops_client.post(url, data, **HX)
    assert response.status_code == 400
    body = response.content.decode()
    assert body.lstrip().startswith(f'<article class="disagreement" id="disagreement-{item.pk}"')
    assert "A rejection needs a reason label." in body
    assert "kept as typed" in body and re.search(r'value="reject"[^>]*checked', body)
    # Without htmx: the whole page, with the same error beside that item's form.
    page = ops_client.post(url, {f"{prefix}-decision": "send_back"})
    assert page.status_code == 400
    assert "Sending back needs a note" in page.content.decode()
    assert not Verdict.objects.filter(item=item).exists()


def test_the_policy_form_refuses_shares_outside_zero_to_one() -> None:
    data = {
        **{k: "" if v is None else v for k, v in Queue.current().snapshot().items()},
        "double_review_rate": 1.5,
        "gold_rate": -0.1,
        "gold_min_accuracy": 2,
    }
    form = PolicyForm(data, instance=Queue.current())
    assert not form.is_valid()
    assert form.errors["double_review_rate"] == ["The double-review rate is a share: from 0 to 1 (0.1 means 10 %)."]
    assert form.errors["gold_rate"] == ["The gold rate is a share: from 0 to 1 (0.02 means 2 %)."]
    assert "share" in form.errors["gold_min_accuracy"][0]
    assert form.fields["double_review_rate"].label == "Double-review rate"
    assert "does not see the first verdict" in form.fields["double_review_rate"].help_text


def test_the_dashboard_panel_links_to_the_page(
    ops_client: Client, fixed_report: dict[str, Any], make_user: Any
) -> None:
    _, row = flagged(make_user, "paula", paused=False)
    fixed_report["reviewers"] = [row]
    body = ops_client.get(reverse("ops:dashboard")).content.decode()
    panel = body.split('id="quality-panel"')[1].split("</section>")[0]
    assert 'href="/ops/quality/"' in panel
    assert re.search(r'id="quality-alpha">0\.71<', panel)
    assert "0.55 to 0.84" in panel
    assert re.search(r'id="quality-waiting">3<', panel)  # 2 for a third reviewer + 1 for an operator
    assert re.search(r'id="quality-flagged">1<', panel)


# --- through the services -------------------------------------------------------------------


def test_settling_from_the_page_records_the_operators_verdict(
    ops_client: Client, fixed_report: dict[str, Any], admit_item: Any, make_user: Any, operator: User
) -> None:
    item = disagreement(admit_item, make_user, round_=4, decisions=[("approve", ""), ("reject", "logic_error")])
    prefix = f"settle-{item.pk}"
    response = ops_client.post(
        reverse("ops:quality_settle", args=[item.pk]),
        {f"{prefix}-decision": "reject", f"{prefix}-reason_label": "logic_error"},
        **HX,
    )
    assert response.status_code == 200
    assert "settled" in response.content.decode()
    verdict = Verdict.objects.get(item=item)
    assert (verdict.decision, verdict.reason_label, verdict.settled_by) == ("reject", "logic_error", "operator")
    # Settled twice: the second answer says so beside the form, nothing is recorded again.
    again = ops_client.post(reverse("ops:quality_settle", args=[item.pk]), {f"{prefix}-decision": "approve"}, **HX)
    assert again.status_code == 400
    assert 'role="alert"' in again.content.decode()
    assert Verdict.objects.get(item=item).decision == "reject"


def test_reinstating_from_the_page_clears_the_flag_and_the_pause(
    ops_client: Client, fixed_report: dict[str, Any], make_user: Any
) -> None:
    user, _ = flagged(make_user, "paula", paused=True)
    response = ops_client.post(reverse("ops:quality_reinstate", args=[user.pk]), **HX)
    assert response.status_code == 200 and "reinstated" in response.content.decode()
    standing = ReviewerStanding.objects.get(reviewer=user)
    assert standing.flagged_at is None and standing.paused_at is None and standing.reinstated_at is not None


def test_marking_gold_from_the_item_page_and_retiring_it(
    ops_client: Client, fixed_report: dict[str, Any], admit_item: Any, reviewer: User
) -> None:
    item = decided(admit_item, reviewer, approve=False, label="code_error")
    page = ops_client.get(reverse("review_item", args=[item.pk])).content.decode()
    form = page.split('id="gold-form"')[1].split("</form>")[0]
    assert re.search(r'value="reject"[^>]*checked', form)  # prefilled from the verdict
    assert '<option value="code_error" selected>' in form

    response = ops_client.post(
        reverse("ops:gold_mark", args=[item.pk]), {"expected_decision": "reject", "expected_label": "code_error"}
    )
    assert response.status_code == 302 and response["Location"] == reverse("review_item", args=[item.pk])
    gold = GoldItem.objects.get(item=item)
    assert (gold.expected_decision, gold.expected_label) == ("reject", "code_error")
    assert "the expected answer is <strong>Reject</strong>" in ops_client.get(response["Location"]).content.decode()

    assert f'id="gold-{gold.pk}"' in ops_client.get(reverse("ops:quality")).content.decode()
    retired = ops_client.post(reverse("ops:gold_retire", args=[gold.pk]), **HX)
    assert retired.status_code == 200 and "retired" in retired.content.decode()
    gold.refresh_from_db()
    assert gold.retired_at is not None
    assert f'id="gold-{gold.pk}"' not in ops_client.get(reverse("ops:quality")).content.decode()


def test_a_refused_gold_mark_comes_back_on_the_item_page(ops_client: Client, admit_item: Any, reviewer: User) -> None:
    item = decided(admit_item, reviewer, approve=True)
    response = ops_client.post(
        reverse("ops:gold_mark", args=[item.pk]), {"expected_decision": "approve", "expected_label": "code_error"}
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert f"Item #{item.pk}" in body and "Only a rejection carries a label" in body
    assert not GoldItem.objects.filter(item=item).exists()


def test_an_undecided_item_offers_no_gold_form(ops_client: Client, admit_item: Any) -> None:
    item = admit_item().item
    assert 'id="gold-form"' not in ops_client.get(reverse("review_item", args=[item.pk])).content.decode()


# --- a gold copy looks like any other item to a reviewer --------------------------------------


def _same_page(html: str, *items: ReviewItem) -> str:
    """The page with what differs between two items of the same content taken out."""
    for item in items:
        html = re.sub(rf"([#/]){item.pk}\b", r"\1N", html)
    html = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", html)
    return re.sub(r'"X-CSRFToken": "[^"]+"', "", html)


def test_a_gold_copy_page_is_the_page_of_an_ordinary_item(
    client: Client, admit_item: Any, reviewer: User, operator: User
) -> None:
    source = decided(admit_item, reviewer, approve=True)
    gold = GoldItem.objects.create(item=source, expected_decision="approve", created_by=operator)
    fields = {"task_description": "Same task", "final_output": "same output", "task_id": "same-task"}
    ordinary = admit_item(idempotency_key="same-a", **fields).item
    copy = admit_item(idempotency_key="same-b", **fields).item
    held = {"status": ReviewItem.Status.CLAIMED, "lease_holder": reviewer}
    ReviewItem.objects.filter(pk=ordinary.pk).update(**held)
    ReviewItem.objects.filter(pk=copy.pk).update(gold=gold, **held)
    client.force_login(reviewer)

    def page(item: ReviewItem) -> str:
        response = client.get(reverse("review_item", args=[item.pk]))
        assert response.status_code == 200
        return response.content.decode()

    assert _same_page(page(copy), copy) == _same_page(page(ordinary), ordinary)
    assert "gold" not in page(copy).lower()

    # Answered: the copy shows the reviewer's own answer, as an ordinary verdict would.
    ReviewItem.objects.filter(pk=copy.pk).update(status=ReviewItem.Status.GOLD, lease_holder=None)
    Judgement.objects.create(item=copy, reviewer=reviewer, kind=Judgement.Kind.GOLD, decision="approve", correct=True)
    answered = page(copy)
    assert "gold" not in answered.lower()
    assert f'<dd class="item-status">{ReviewItem.Status.APPROVED.label}</dd>' in answered
    assert f"Approved</span> by {reviewer.get_username()}" in answered

    # Another reviewer gets the 404 any item they never saw gives.
    other = Client()
    other.force_login(User.objects.create_user("ray", password="x"))
    from reviewqueue.access import ensure_groups

    ensure_groups()["reviewer"].user_set.add(User.objects.get(username="ray"))
    assert other.get(reverse("review_item", args=[copy.pk])).status_code == 404

    # An operator is told what it is.
    client.force_login(operator)
    assert f'A copy of gold item <a href="/review/items/{source.pk}/">' in page(copy)


def test_the_page_after_a_change_is_not_a_cached_copy(ops_client: Client, make_user: Any) -> None:
    user, _ = flagged(make_user, "paula", paused=True)
    row = f'id="reviewer-{user.pk}"'
    before = ops_client.get(reverse("ops:quality")).content.decode()  # the report is cached now
    assert "Reinstate" in before.split(row)[1].split("</tr>")[0]
    response = ops_client.post(reverse("ops:quality_reinstate", args=[user.pk]))
    assert response.status_code == 302
    after = ops_client.get(response["Location"]).content.decode()
    assert "paula is reinstated." in after
    assert row not in after or "Reinstate" not in after.split(row)[1].split("</tr>")[0]


def test_a_second_answer_on_a_gold_copy_is_told_as_on_any_item(
    admit_item: Any, reviewer: User, make_user: Any, operator: User
) -> None:
    from reviewqueue.notices import _already_decided

    source = decided(admit_item, reviewer, approve=True)
    gold = GoldItem.objects.create(item=source, expected_decision="approve", created_by=operator)
    copy = admit_item().item
    ReviewItem.objects.filter(pk=copy.pk).update(gold=gold, status=ReviewItem.Status.GOLD)
    Judgement.objects.create(
        item=copy, reviewer=reviewer, kind=Judgement.Kind.GOLD, decision="reject", reason_label="unclear", correct=False
    )
    mine = _already_decided(copy.pk, reviewer, approve=True, reason_label="")
    assert mine.text.startswith(f"Item #{copy.pk} was already rejected (unclear) just now by you, in another tab")
    ray = make_user("ray", "reviewer")
    other = _already_decided(copy.pk, ray, approve=True, reason_label="")
    # Named, as another reviewer's verdict on a real item is: a nameless notice gave copies away.
    assert other.text == (
        f"Item #{copy.pk} was already rejected (unclear) by {reviewer.get_username()}, just now; "
        "your approval was not recorded."
    )
    real = decided(admit_item, reviewer, approve=False, label="unclear")
    told = _already_decided(real.pk, ray, approve=True, reason_label="").text
    assert (
        told.replace(f"#{real.pk}", "#N").split(" by ")[1] == other.text.replace(f"#{copy.pk}", "#N").split(" by ")[1]
    )
    assert "gold" not in (mine.text + other.text).lower()


def test_pages_with_debug_on_carry_no_script_that_swaps_a_refusal_over_the_whole_page(
    ops_client: Client, settings: Any
) -> None:
    """django-htmx's debug script replaces the document with any 400 answer,
    which is how a refused settle form wiped the page in the demo (DEBUG=1)."""
    settings.DEBUG = True
    body = ops_client.get(reverse("ops:quality")).content.decode()
    assert "htmx-2.min.js" in body
    assert "django-htmx.js" not in body


def test_no_pair_yet_says_after_how_many_shared_items_one_appears(
    ops_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = report(pairs=[], min_pair_overlap=10)
    monkeypatch.setattr(quality_view.agreement, "cached_quality_report", lambda: found)
    body = ops_client.get(reverse("ops:quality")).content.decode()
    no_pairs = body.split('id="no-pairs"')[1].split("</p>")[0]
    assert "judged 10 of the same items" in no_pairs


def test_the_pairs_table_says_after_how_many_shared_items_a_pair_appears(
    ops_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(quality_view.agreement, "cached_quality_report", lambda: report())
    body = ops_client.get(reverse("ops:quality")).content.decode()
    said = body.split('id="pairs-when"')[1].split("</p>")[0]
    assert f"judged {quality_view.agreement.MIN_PAIR_OVERLAP} of the same items" in said


def test_a_disagreement_escalated_after_its_delay_waits_on_the_page_to_be_settled(
    ops_client: Client, fixed_report: dict[str, Any], admit_item: Any, make_user: Any, operator: User
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from reviewqueue.services import review_quality

    item = disagreement(admit_item, make_user, round_=3, decisions=[("approve", ""), ("reject", "logic_error")])
    Judgement.objects.filter(item=item).update(created_at=timezone.now() - timedelta(minutes=61))
    assert review_quality.escalate_overdue(now=timezone.now()) == 1  # the default delay: 60 minutes
    body = ops_client.get(reverse("ops:quality")).content.decode()
    block = body.split(f'id="disagreement-{item.pk}"')[1].split("</article>")[0]
    assert "waits for an operator" in block and "no third reviewer took it" in block
    assert 'class="settle-form"' in block
