"""Agreement and gold statistics (reviewqueue/agreement.py): the numbers match
published examples and hand computations, the report reads the right rows,
and undefined statistics are None, never NaN."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any
from unittest import mock

import krippendorff
import numpy as np
import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from reviewqueue import agreement, policy
from reviewqueue.models import GoldItem, Judgement, Queue, ReviewerStanding, ReviewItem, Verdict
from reviewqueue.tokens import issue_token

pytestmark = pytest.mark.double_review

_keys = itertools.count()

# --- the statistics on fixed data -------------------------------------------------------

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", example C:
# four observers, twelve units, values 1..5, "." missing. Nominal alpha = 0.743.
KRIPPENDORFF_2011 = [
    "1 2 3 3 2 1 4 1 2 . . .",
    "1 2 3 3 2 2 4 1 2 5 . 3",
    ". 3 3 3 2 3 4 2 2 5 1 .",
    "1 2 3 3 2 4 4 1 2 5 1 .",
]


def _worked_example_units() -> list[list[str | None]]:
    observers = [row.split() for row in KRIPPENDORFF_2011]
    return [[None if obs[u] == "." else obs[u] for obs in observers] for u in range(12)]


def test_alpha_matches_krippendorffs_worked_example() -> None:
    estimate = agreement.krippendorff_alpha(_worked_example_units(), bootstrap=0)
    assert estimate.value == pytest.approx(0.743, abs=5e-4)
    assert estimate.n == 11  # the last unit has one value: it cannot be paired
    assert estimate.ci95 is None  # no resamples asked for


def test_kappa_matches_the_textbook_example() -> None:
    # 50 items: yes/yes 20, no/no 15, yes/no 5, no/yes 10. Observed agreement
    # 0.7, chance 0.5 * 0.6 + 0.5 * 0.4 = 0.5, kappa (0.7 - 0.5) / 0.5 = 0.4.
    a = ["yes"] * 20 + ["no"] * 15 + ["yes"] * 5 + ["no"] * 10
    b = ["yes"] * 20 + ["no"] * 15 + ["no"] * 5 + ["yes"] * 10
    estimate = agreement.cohen_kappa(a, b)
    assert estimate.value == pytest.approx(0.4)
    assert estimate.n == 50
    assert estimate.ci95 is not None
    low, high = estimate.ci95
    assert low < 0.4 < high


def test_kappa_and_alpha_are_none_where_they_are_undefined() -> None:
    # Everyone gave the same answer: chance agreement is 1, the ratio 0 / 0.
    assert agreement.cohen_kappa(["approve"] * 12, ["approve"] * 12) == agreement.Estimate(None, None, 12)
    assert agreement.krippendorff_alpha([["approve", "approve"]] * 12) == agreement.Estimate(None, None, 12)
    assert agreement.cohen_kappa([], []) == agreement.Estimate(None, None, 0)
    assert agreement.krippendorff_alpha([]) == agreement.Estimate(None, None, 0)
    # One unit with two values is not enough for alpha.
    assert agreement.krippendorff_alpha([["approve", "reject"], ["approve", None]]) == agreement.Estimate(None, None, 1)
    with pytest.raises(ValueError):
        agreement.cohen_kappa(["approve"], [])


def test_an_interval_is_none_when_some_resample_is_degenerate() -> None:
    # One disagreement in ten: the resamples that miss it have one category only.
    estimate = agreement.cohen_kappa(["approve"] * 10, ["approve"] * 9 + ["reject"])
    assert estimate.value == pytest.approx(0.0)
    assert estimate.ci95 is None


def _reference_ci(
    n: int, statistic: Callable[[np.ndarray], float], *, seed: int, resamples: int
) -> tuple[float, float]:
    """scipy's bootstrap with the library's own statistic, one resample at a time."""
    result = stats.bootstrap(
        (np.arange(n),),
        lambda idx: statistic(idx.astype(int)),
        vectorized=False,
        n_resamples=resamples,
        batch=agreement.BOOTSTRAP_BATCH,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return (result.confidence_interval.low, result.confidence_interval.high)


def test_the_vectorised_kappa_interval_equals_the_one_computed_with_the_library() -> None:
    rng = np.random.default_rng(7)
    categories = np.array(["approve", "reject", "send_back"])
    a = categories[rng.integers(0, 3, 60)]
    b = np.where(rng.random(60) < 0.6, a, categories[rng.integers(0, 3, 60)])
    estimate = agreement.cohen_kappa(list(a), list(b), bootstrap=400, seed=3)
    assert estimate.value == pytest.approx(cohen_kappa_score(a, b))
    expected = _reference_ci(60, lambda idx: cohen_kappa_score(a[idx], b[idx]), seed=3, resamples=400)
    assert estimate.ci95 == pytest.approx(expected)


def test_the_vectorised_alpha_interval_equals_the_one_computed_with_the_library() -> None:
    # Units with two or three coders and missing values; every unit is pairable.
    rng = np.random.default_rng(11)
    labels = ["code_error", "logic_error", "format_issue"]
    units: list[list[str | None]] = []
    for _ in range(40):
        first = labels[rng.integers(0, 3)]
        second = first if rng.random() < 0.7 else labels[rng.integers(0, 3)]
        third = labels[rng.integers(0, 3)] if rng.random() < 0.3 else None
        units.append([first, None, second, third] if rng.random() < 0.5 else [second, first, third, None])
    code = {label: float(i) for i, label in enumerate(labels)}
    data = np.array([[code[v] if v is not None else np.nan for v in unit] for unit in units])

    def library_alpha(idx: np.ndarray) -> float:
        return krippendorff.alpha(reliability_data=data[idx].T, level_of_measurement="nominal", value_domain=[0, 1, 2])

    estimate = agreement.krippendorff_alpha(units, bootstrap=300, seed=5)
    assert estimate.value == pytest.approx(library_alpha(np.arange(40)))
    assert estimate.ci95 == pytest.approx(_reference_ci(40, library_alpha, seed=5, resamples=300))


def test_the_wilson_interval_matches_a_known_value() -> None:
    low, high = agreement.wilson_interval(8, 10)  # type: ignore[misc]
    assert (round(low, 3), round(high, 3)) == (0.490, 0.943)
    assert agreement.wilson_interval(0, 0) is None


# --- the report from rows ---------------------------------------------------------------


@pytest.fixture
def fresh_cache(db: None) -> Iterator[None]:
    """The cached report of another test must not answer this one."""
    cache.delete(agreement.CACHE_KEY)
    yield
    cache.delete(agreement.CACHE_KEY)


def _item(**fields: Any) -> ReviewItem:
    n = next(_keys)
    values: dict[str, Any] = {
        "task_description": f"task {n}",
        "cutoff_reason": "step_limit",
        "idempotency_key": f"quality-{n}",
        "status": ReviewItem.Status.APPROVED,
    }
    values.update(fields)
    return ReviewItem.objects.create(**values)


def _answer(decision: str) -> tuple[str, str]:
    """ "reject:logic_error" -> ("reject", "logic_error"); "approve" -> ("approve", "")."""
    decision, _, label = decision.partition(":")
    return decision, label


def _double_review(answers: Sequence[tuple[Any, str]], *, settled_by: str = "agreement") -> ReviewItem:
    """An item judged blind by each (reviewer, "decision[:label]") in turn, rounds 1, 2, 3."""
    item = _item()
    for round_, (user, answer) in enumerate(answers, start=1):
        decision, label = _answer(answer)
        Judgement.objects.create(
            item=item, reviewer=user, kind=Judgement.Kind.REVIEW, round=round_, decision=decision, reason_label=label
        )
    decision, label = _answer(answers[0][1])
    note = "try again" if decision == "send_back" else ""
    edited = "fixed" if decision == "edit" else ""
    Verdict.objects.create(
        item=item,
        reviewer=answers[0][0],
        decision=decision,
        reason_label=label,
        note=note,
        edited_output=edited,
        settled_by=settled_by,
    )
    return item


def _pair(report: dict[str, Any], a: Any, b: Any) -> dict[str, Any] | None:
    return next((p for p in report["pairs"] if (p["a_id"], p["b_id"]) == (a.pk, b.pk)), None)


def test_two_reviewers_agree_as_the_textbook_example(make_user: Callable[..., Any], fresh_cache: None) -> None:
    ann, bob = make_user("ann", "reviewer"), make_user("bob", "reviewer")
    # approve/approve 20 (half of them edits), reject/reject 15, approve/reject 5, reject/approve 10.
    for i in range(20):
        _double_review([(ann, "edit" if i % 2 else "approve"), (bob, "approve" if i % 2 else "edit")])
    for _ in range(15):
        _double_review([(ann, "reject:code_error"), (bob, "reject:code_error")])
    for _ in range(5):
        _double_review([(ann, "approve"), (bob, "reject:code_error")])
    for _ in range(10):
        _double_review([(ann, "reject:code_error"), (bob, "approve")])

    report = agreement.quality_report(bootstrap=200)

    pair = _pair(report, ann, bob)
    assert pair is not None
    assert (pair["a"], pair["b"], pair["items"]) == ("ann", "bob", 50)
    assert pair["kappa"] == pytest.approx(0.4)
    assert pair["ci95"][0] < 0.4 < pair["ci95"][1]
    # Alpha from the coincidences: 100 values, 70 on the diagonal, 55 approvals,
    # 45 rejections: 1 - (1 - 70/100) / (1 - (55*54 + 45*44) / (100*99)) = 0.4.
    assert report["decision_alpha"]["items"] == 50
    assert report["decision_alpha"]["value"] == pytest.approx(
        1 - (1 - 70 / 100) / (1 - (55 * 54 + 45 * 44) / (100 * 99))
    )
    json.dumps(report, allow_nan=False)


def test_categories_are_mapped_before_they_are_compared(make_user: Callable[..., Any], fresh_cache: None) -> None:
    ann, bob = make_user("ann", "reviewer"), make_user("bob", "reviewer")
    # A = approve or edit, R = reject, S = send back.
    first = ["approve", "edit", "approve", "approve", "reject:unclear", "reject:unclear"]
    first += ["reject:unclear", "send_back", "send_back", "edit"]
    second = ["edit", "approve", "approve", "reject:unclear", "reject:unclear", "reject:unclear"]
    second += ["send_back", "send_back", "approve", "approve"]
    for x, y in zip(first, second, strict=True):
        _double_review([(ann, x), (bob, y)])

    report = agreement.quality_report(bootstrap=0)

    # By hand: categories A A A A R R R S S A against A A A R R R S S A A.
    # Agreement on 7 of 10; ann gave A 5, R 3, S 2, bob A 5, R 3, S 2.
    observed, expected = 7 / 10, (5 * 5 + 3 * 3 + 2 * 2) / 100
    assert _pair(report, ann, bob)["kappa"] == pytest.approx((observed - expected) / (1 - expected))  # type: ignore[index]
    # Alpha: 20 values, 14 on the diagonal; A 10, R 6, S 4 values in all.
    d_observed, d_expected = 1 - 14 / 20, 1 - (10 * 9 + 6 * 5 + 4 * 3) / (20 * 19)
    assert report["decision_alpha"]["value"] == pytest.approx(1 - d_observed / d_expected)
    assert report["decision_alpha"]["items"] == 10


def test_labels_count_only_on_rejections(make_user: Callable[..., Any], fresh_cache: None) -> None:
    ann, bob = make_user("ann", "reviewer"), make_user("bob", "reviewer")
    _double_review([(ann, "reject:code_error"), (bob, "reject:code_error")])
    _double_review([(ann, "reject:code_error"), (bob, "reject:code_error")])
    _double_review([(ann, "reject:logic_error"), (bob, "reject:logic_error")])
    _double_review([(ann, "reject:code_error"), (bob, "reject:logic_error")])
    # An approval has no label, even one stored by mistake: these units have one label each.
    for _ in range(3):
        _double_review([(ann, "reject:code_error"), (bob, "approve:logic_error")])

    report = agreement.quality_report(bootstrap=0)

    # Four units with two labels: 8 values, 6 on the diagonal, code_error 5, logic_error 3.
    assert report["label_alpha"]["items"] == 4
    d_observed, d_expected = 1 - 6 / 8, 1 - (5 * 4 + 3 * 2) / (8 * 7)
    assert report["label_alpha"]["value"] == pytest.approx(1 - d_observed / d_expected)
    assert report["decision_alpha"]["items"] == 7


def test_pairs_below_the_overlap_and_tie_breaks_are_left_out(make_user: Callable[..., Any], fresh_cache: None) -> None:
    ann, bob, cy = (make_user(name, "reviewer") for name in ("ann", "bob", "cy"))
    for i in range(agreement.MIN_PAIR_OVERLAP):
        _double_review([(ann, "approve"), (bob, "approve" if i % 3 else "reject:unclear")])
    for i in range(agreement.MIN_PAIR_OVERLAP - 1):
        _double_review([(ann, "approve"), (cy, "reject:unclear" if i % 2 else "approve")])
    # cy breaks ten ties between ann and bob: round 3 is not a blind answer.
    for _ in range(10):
        _double_review([(ann, "approve"), (bob, "reject:unclear"), (cy, "approve")], settled_by="tiebreak")

    report = agreement.quality_report(bootstrap=0)

    assert [(p["a"], p["b"], p["items"]) for p in report["pairs"]] == [("ann", "bob", 20)]
    assert report["decision_alpha"]["items"] == 2 * agreement.MIN_PAIR_OVERLAP - 1 + 10
    assert report["min_pair_overlap"] == agreement.MIN_PAIR_OVERLAP


def _gold(expected: str = "reject", label: str = "logic_error", **fields: Any) -> GoldItem:
    return GoldItem.objects.create(
        item=_item(), expected_decision=expected, expected_label=label if expected == "reject" else "", **fields
    )


def test_gold_accuracy_per_reviewer(make_user: Callable[..., Any], fresh_cache: None) -> None:
    ann, bob, cy = (make_user(name, "reviewer") for name in ("ann", "bob", "cy"))
    reject_spec, approve_spec = _gold("reject", "logic_error"), _gold("approve")
    _gold(retired_at=timezone.now())
    # ann: 10 answers, 8 right; 3 rejections of a rejection, whose label is judged: 2 right.
    answers = [
        (reject_spec, "reject", "logic_error", True, True),
        (reject_spec, "reject", "logic_error", True, True),
        (reject_spec, "reject", "code_error", True, False),
        *[(approve_spec, "approve", "", True, None)] * 5,
        *[(approve_spec, "reject", "unclear", False, None)] * 2,
    ]
    for spec, decision, label, correct, label_correct in answers:
        Judgement.objects.create(
            item=_item(gold=spec, status=ReviewItem.Status.GOLD),
            reviewer=ann,
            kind=Judgement.Kind.GOLD,
            decision=decision,
            reason_label=label,
            correct=correct,
            label_correct=label_correct,
        )
    now = timezone.now()
    ReviewerStanding.objects.create(reviewer=ann, flagged_at=now)
    # cy was flagged and paused, then reinstated: neither holds any more.
    ReviewerStanding.objects.create(
        reviewer=cy, flagged_at=now - timedelta(days=2), paused_at=now - timedelta(days=2), reinstated_at=now
    )
    Queue.objects.filter(pk=Queue.default().pk).update(
        reliability={"errors": {str(ann.pk): 0.15, "nobody": 0.5}, "default_error": 0.1}
    )
    _double_review([(bob, "approve"), (cy, "approve")])

    report = agreement.quality_report(bootstrap=0)

    rows = {row["reviewer"]: row for row in report["reviewers"]}
    assert set(rows) == {"ann", "bob", "cy"}
    assert rows["ann"] == {
        "id": ann.pk,
        "reviewer": "ann",
        "gold_answers": 10,
        "gold_correct": 8,
        "accuracy": pytest.approx(0.8),
        "ci95": [pytest.approx(0.490, abs=5e-4), pytest.approx(0.943, abs=5e-4)],
        "label_answers": 3,
        "label_correct": 2,
        "error_rate": pytest.approx(0.15),
        "flagged": True,
        "paused": False,
    }
    assert (rows["bob"]["gold_answers"], rows["bob"]["accuracy"], rows["bob"]["ci95"]) == (0, None, None)
    assert rows["bob"]["error_rate"] is None
    assert (rows["cy"]["flagged"], rows["cy"]["paused"]) == (False, False)
    assert report["gold"] == {"active": 2, "answers": 10}


def test_double_review_counts(make_user: Callable[..., Any], fresh_cache: None) -> None:
    ann, bob, cy = (make_user(name, "reviewer") for name in ("ann", "bob", "cy"))
    waiting = (ReviewItem.Status.PENDING, ReviewItem.Status.CLAIMED)
    for review_round, n in ((1, 4), (2, 3), (3, 2), (4, 1), (5, 1)):
        for i in range(n):
            _item(status=waiting[i % 2], review_round=review_round)
    _item(status=ReviewItem.Status.PENDING, review_round=2, gold=_gold())  # a gold copy is not double review
    _item(status=ReviewItem.Status.APPROVED, review_round=2)  # decided: waits for nothing
    _double_review([(ann, "approve"), (bob, "approve")])
    _double_review([(ann, "approve"), (bob, "reject:unclear"), (cy, "approve")], settled_by="tiebreak")

    report = agreement.quality_report(bootstrap=0)

    assert report["double_review"] == {
        "awaiting_second": 3,
        "awaiting_third": 2,
        "awaiting_operator": 2,
        "settled": {"reviewer": 0, "agreement": 1, "tiebreak": 1, "operator": 0},
    }


def _no_nan(value: Any) -> None:
    assert not (isinstance(value, float) and math.isnan(value))
    for child in value.values() if isinstance(value, dict) else value if isinstance(value, list) else ():
        _no_nan(child)


@pytest.mark.parametrize("case", ["no data", "one category", "one reviewer"])
def test_degenerate_data_gives_none(case: str, make_user: Callable[..., Any], fresh_cache: None) -> None:
    ann, bob = make_user("ann", "reviewer"), make_user("bob", "reviewer")
    if case == "one category":
        for _ in range(12):
            _double_review([(ann, "approve"), (bob, "edit")])
    elif case == "one reviewer":
        for _ in range(12):
            item = _item(status=ReviewItem.Status.PENDING, review_round=2)
            Judgement.objects.create(item=item, reviewer=ann, kind=Judgement.Kind.REVIEW, round=1, decision="approve")

    report = agreement.quality_report()

    assert report["decision_alpha"]["value"] is None and report["decision_alpha"]["ci95"] is None
    assert report["label_alpha"] == {"value": None, "ci95": None, "items": 0}
    if case == "one category":
        assert report["decision_alpha"]["items"] == 12
        assert [(p["items"], p["kappa"], p["ci95"]) for p in report["pairs"]] == [(12, None, None)]
    else:
        assert report["decision_alpha"]["items"] == 0
        assert report["pairs"] == []
    _no_nan(report)
    json.dumps(report, allow_nan=False)


def test_the_report_is_cached_for_a_minute(make_user: Callable[..., Any], fresh_cache: None) -> None:
    first = agreement.cached_quality_report()
    assert cache.get(agreement.CACHE_KEY) == first
    ann, bob = make_user("ann", "reviewer"), make_user("bob", "reviewer")
    _double_review([(ann, "approve"), (bob, "approve")])
    assert agreement.cached_quality_report() == first  # not recomputed while cached
    cache.delete(agreement.CACHE_KEY)
    assert agreement.cached_quality_report()["double_review"]["settled"]["agreement"] == 1


def test_a_cache_outage_computes_the_report(make_user: Callable[..., Any], fresh_cache: None) -> None:
    with (
        mock.patch.object(agreement.cache, "get", side_effect=ConnectionError("cache down")),
        mock.patch.object(agreement.cache, "set", side_effect=ConnectionError("cache down")),
    ):
        report = agreement.cached_quality_report()
    assert report["double_review"]["settled"] == dict.fromkeys(agreement.SETTLED_BY, 0)


def test_computing_the_report_writes_nothing(
    make_user: Callable[..., Any], fresh_cache: None, django_assert_max_num_queries: Any
) -> None:
    ann, bob = make_user("ann", "reviewer"), make_user("bob", "reviewer")
    for _ in range(agreement.MIN_PAIR_OVERLAP):
        _double_review([(ann, "approve"), (bob, "reject:unclear")])
    queues = list(Queue.objects.values())
    with django_assert_max_num_queries(20) as captured:
        agreement.quality_report(bootstrap=10)
    statements = [q["sql"].lstrip().upper() for q in captured.captured_queries]
    assert statements and all(s.startswith("SELECT") for s in statements)
    assert list(Queue.objects.values()) == queues


# --- /api/stats ---------------------------------------------------------------------------


def test_api_stats_shows_agreement_by_reviewer_id_only(
    client: Client, make_user: Callable[..., Any], fresh_cache: None
) -> None:
    ann, bob = make_user("reviewer-annabel", "reviewer"), make_user("reviewer-bartholomew", "reviewer")
    for i in range(agreement.MIN_PAIR_OVERLAP + 2):
        _double_review([(ann, "approve" if i % 3 else "reject:unclear"), (bob, "approve" if i % 4 else "edit")])
    spec = _gold()
    Judgement.objects.create(
        item=_item(gold=spec, status=ReviewItem.Status.GOLD),
        reviewer=ann,
        kind=Judgement.Kind.GOLD,
        decision="approve",
        correct=False,
    )
    _, plain = issue_token(name="producer-q", scopes=["outputs"])

    response = client.get("/api/stats", headers={"Authorization": f"Bearer {plain}"})

    assert response.status_code == 200
    shown = response.json()["agreement"]
    assert set(shown) == {"decision_alpha", "label_alpha", "pairs", "double_review", "min_pair_overlap"}
    assert shown["decision_alpha"]["items"] == agreement.MIN_PAIR_OVERLAP + 2
    assert shown["pairs"] == [
        {
            "a_id": ann.pk,
            "b_id": bob.pk,
            "items": agreement.MIN_PAIR_OVERLAP + 2,
            "kappa": pytest.approx(agreement.cohen_kappa(*_categories(ann, bob)).value),
            "ci95": shown["pairs"][0]["ci95"],
        }
    ]
    assert shown["double_review"]["settled"]["agreement"] == agreement.MIN_PAIR_OVERLAP + 2
    body = response.content.decode()
    assert "annabel" not in body and "bartholomew" not in body
    assert "reviewers" not in shown and "gold" not in shown  # accuracy stays on the operators' pages


def _categories(a: Any, b: Any) -> tuple[list[str], list[str]]:
    """Both reviewers' decision categories on the items they both judged, by item."""
    rows = Judgement.objects.filter(kind=Judgement.Kind.REVIEW).order_by("item_id", "round")
    by_item: dict[int, dict[int, str]] = {}
    for j in rows:
        by_item.setdefault(j.item_id, {})[j.reviewer_id] = policy.DECISION_CATEGORIES[j.decision]
    shared = [answers for answers in by_item.values() if a.pk in answers and b.pk in answers]
    return [s[a.pk] for s in shared], [s[b.pk] for s in shared]
