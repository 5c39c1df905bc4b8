"""How far the reviewers' verdicts can be trusted: agreement on double-reviewed
items, accuracy on gold items, and where double reviews stand.

Read-only: nothing here writes. The work is bounded: the statistics read the
judgements of at most the ``MAX_DOUBLE_REVIEWED`` most recent double-reviewed
items and at most the ``MAX_GOLD_ANSWERS`` most recent gold answers; the
counts are aggregates.

Agreement is measured on the blind judgements only, rounds 1 and 2 of a double
review. A third reviewer is asked only after the first two disagreed, so
counting the tie-breaking judgement would weigh disagreements differently from
agreements and bias every statistic.

Decisions are compared by category (``policy.decision_category``): an edit is an
approval, as it is for the producer. Reason labels are compared only where
both reviewers rejected; a reviewer who did not reject gave no label, and that
value is missing, not a disagreement.

Undefined statistics are None, never NaN: kappa and alpha are undefined when
every answer falls in one category (chance agreement is then certain), and a
bootstrap interval is None when some resample has an undefined statistic, or
when there are fewer than two units to resample.

The numeric libraries (numpy, scipy, scikit-learn, krippendorff) take over a
second to import, so they are imported where a statistic is computed: a
process that only serves the cached report never loads them.
"""

from __future__ import annotations

import itertools
import logging
import math
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db.models import Count, Q

from . import policy
from .models import DEFAULT_QUEUE, GoldItem, Judgement, Queue, ReviewerStanding, ReviewItem, Verdict

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

MIN_PAIR_OVERLAP = 10
MAX_DOUBLE_REVIEWED = 5_000
MAX_GOLD_ANSWERS = 5_000
CACHE_KEY = "reviewqueue:quality"
CACHE_SECONDS = 60
# Resamples are evaluated this many at a time, which bounds the memory a
# bootstrap over 5,000 items takes.
BOOTSTRAP_BATCH = 200

SETTLED_BY = ("reviewer", "agreement", "tiebreak", "operator")


@dataclass(frozen=True)
class Estimate:
    """A statistic with its 95 % bootstrap interval; ``n`` is how many units
    (items) it was computed from. None where the statistic is undefined."""

    value: float | None
    ci95: tuple[float, float] | None
    n: int


# --- the statistics ---------------------------------------------------------------------


def _finite(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _bootstrap_ci(
    kinds: np.ndarray, width: int, statistic: Callable[[np.ndarray], np.ndarray], *, bootstrap: int, seed: int
) -> tuple[float, float] | None:
    """Percentile 95 % interval of a statistic over units resampled with
    replacement (scipy.stats.bootstrap).

    ``kinds`` gives each unit's kind, 0..width-1: units of one kind contribute
    alike (for kappa, the pair of categories given; for alpha, the counts of
    each category). ``statistic`` takes, for a batch of resamples, how many
    units of each kind were drawn, shape (resamples, width), and returns one value
    per resample. Resampling whole units keeps the answers on one item
    together (a paired bootstrap), and a batch is a few matrix products."""
    n = len(kinds)
    if n < 2 or bootstrap < 1:
        return None
    import numpy as np
    from scipy import stats

    def vectorised(drawn: np.ndarray, axis: int = -1) -> np.ndarray:
        drawn = np.moveaxis(drawn, axis, -1).astype(np.intp)
        rows = drawn.shape[0]
        flat = (drawn + (np.arange(rows) * width)[:, None]).ravel()
        return statistic(np.bincount(flat, minlength=rows * width).reshape(rows, width).astype(float))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a degenerate resample is reported as None below
        result = stats.bootstrap(
            (kinds,),
            vectorised,
            vectorized=True,
            n_resamples=bootstrap,
            batch=BOOTSTRAP_BATCH,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
    low, high = _finite(result.confidence_interval.low), _finite(result.confidence_interval.high)
    return None if low is None or high is None else (low, high)


def _codes(values: Sequence[str | None]) -> tuple[np.ndarray, int]:
    """Categories as numbers 0..k-1 (in sorted order), None as NaN; and k."""
    import numpy as np

    categories = sorted({v for v in values if v is not None})
    code = {c: float(i) for i, c in enumerate(categories)}
    return np.fromiter((code.get(v, math.nan) for v in values), dtype=float, count=len(values)), len(categories)


def cohen_kappa(a: Sequence[str], b: Sequence[str], *, bootstrap: int = 1000, seed: int = 0) -> Estimate:
    """Cohen's kappa of two raters' categories on the same items (a[i] and
    b[i] judge item i), with a paired bootstrap interval over the items."""
    if len(a) != len(b):
        raise ValueError("the two raters must judge the same items")
    n = len(a)
    if n == 0:
        return Estimate(None, None, 0)
    import numpy as np
    from sklearn.metrics import cohen_kappa_score

    codes, k = _codes([*a, *b])
    x, y = codes[:n].astype(np.intp), codes[n:].astype(np.intp)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one category only: kappa is NaN, reported as None
        value = _finite(cohen_kappa_score(x, y))
    if value is None:
        return Estimate(None, None, n)

    # An item's kind is the pair of categories (a, b) = divmod(kind, k).
    first, second = np.divmod(np.arange(k * k), k)
    agree = (first == second).astype(float)
    one_hot_a, one_hot_b = np.eye(k)[first], np.eye(k)[second]

    def kappas(drawn: np.ndarray) -> np.ndarray:
        observed = drawn @ agree / n
        expected = ((drawn @ one_hot_a) * (drawn @ one_hot_b)).sum(axis=-1) / (n * n)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(expected < 1 - 1e-12, (observed - expected) / (1 - expected), np.nan)

    return Estimate(value, _bootstrap_ci(x * k + y, k * k, kappas, bootstrap=bootstrap, seed=seed), n)


def _pairable_counts(matrix: np.ndarray, k: int) -> np.ndarray:
    """Each pairable unit's (2+ values) count of each category: units x k."""
    import numpy as np

    counts = np.stack([(matrix == c).sum(axis=1) for c in range(k)], axis=1).astype(float)
    return counts[counts.sum(axis=1) >= 2]


def _nominal_alpha(counts: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Krippendorff's nominal alpha of resampled units: ``counts`` has one
    row per kind of pairable unit (its count of each category), the
    statistic takes how many units of each kind were drawn. 1 - D_o / D_e,
    with the coincidence matrix summed over the drawn units (Krippendorff
    2011, "Computing Krippendorff's Alpha-Reliability", section C)."""
    import numpy as np

    values = counts.sum(axis=1)  # m_u, pairable values in the unit
    matching = (counts * (counts - 1)).sum(axis=1) / (values - 1)  # the unit's share of the diagonal

    def alphas(drawn: np.ndarray) -> np.ndarray:
        total = drawn @ values
        by_category = drawn @ counts
        observed = 1 - (drawn @ matching) / total
        expected = 1 - (by_category * (by_category - 1)).sum(axis=-1) / (total * (total - 1))
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(expected > 1e-12, 1 - observed / expected, np.nan)

    return alphas


def krippendorff_alpha(units: Sequence[Sequence[str | None]], *, bootstrap: int = 1000, seed: int = 0) -> Estimate:
    """Krippendorff's alpha (nominal) of units x coders, None = missing;
    rows may differ in length (the missing coders at the end). ``n`` counts
    the units with two or more values; the interval resamples those units."""
    import krippendorff
    import numpy as np

    width = max((len(unit) for unit in units), default=0)
    codes, k = _codes([v for unit in units for v in itertools.chain(unit, [None] * (width - len(unit)))])
    matrix = codes.reshape(len(units), width)
    counts = _pairable_counts(matrix, k) if k else np.zeros((0, 0))
    n = len(counts)
    if n < 2 or k < 2:
        return Estimate(None, None, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = _finite(
            krippendorff.alpha(
                reliability_data=matrix.T, level_of_measurement="nominal", value_domain=np.arange(k, dtype=float)
            )
        )
    if value is None:
        return Estimate(None, None, n)
    kinds, kind_of_unit = np.unique(counts, axis=0, return_inverse=True)
    ci = _bootstrap_ci(kind_of_unit.ravel(), len(kinds), _nominal_alpha(kinds), bootstrap=bootstrap, seed=seed)
    return Estimate(value, ci, n)


def wilson_interval(correct: int, answers: int) -> tuple[float, float] | None:
    """Wilson score 95 % interval of a proportion; None without answers."""
    if answers <= 0:
        return None
    from scipy import stats

    ci = stats.binomtest(correct, answers).proportion_ci(confidence_level=0.95, method="wilson")
    return (float(ci.low), float(ci.high))


# --- reading the rows -------------------------------------------------------------------


@dataclass(frozen=True)
class _Answer:
    reviewer_id: int | None
    category: str
    label: str | None  # the reason label of a rejection; None otherwise


def _double_reviews() -> dict[int, list[_Answer]]:
    """The blind answers (rounds 1 and 2) on the most recent double-reviewed
    items, by item. An item counts once its second answer exists."""
    recent = (
        Judgement.objects.filter(kind=Judgement.Kind.REVIEW, round=2)
        .order_by("-id")
        .values("item_id")[:MAX_DOUBLE_REVIEWED]
    )
    rows = (
        Judgement.objects.filter(kind=Judgement.Kind.REVIEW, round__in=(1, 2), item_id__in=recent)
        .order_by("item_id", "round", "id")
        .values_list("item_id", "reviewer_id", "decision", "reason_label")
    )
    by_item: dict[int, list[_Answer]] = defaultdict(list)
    for item_id, reviewer_id, decision, label in rows:
        category = policy.decision_category(decision)
        if category is not None:
            by_item[item_id].append(_Answer(reviewer_id, category, (label or None) if category == "reject" else None))
    return by_item


def _pairs(by_item: dict[int, list[_Answer]]) -> dict[tuple[int, int], tuple[list[str], list[str]]]:
    """For each pair of reviewers (lower id first), their categories on the
    items both judged, in the same order."""
    shared: dict[tuple[int, int], tuple[list[str], list[str]]] = defaultdict(lambda: ([], []))
    for answers in by_item.values():
        known = sorted((a for a in answers if a.reviewer_id is not None), key=lambda a: a.reviewer_id or 0)
        for first, second in itertools.combinations(known, 2):
            if first.reviewer_id == second.reviewer_id:
                continue
            a, b = shared[(first.reviewer_id, second.reviewer_id)]  # type: ignore[index]
            a.append(first.category)
            b.append(second.category)
    return shared


def _gold_answers() -> dict[int, dict[str, int]]:
    """Gold answers per reviewer over the most recent ``MAX_GOLD_ANSWERS``."""
    rows = (
        Judgement.objects.filter(kind=Judgement.Kind.GOLD, reviewer__isnull=False)
        .order_by("-id")
        .values_list("reviewer_id", "correct", "label_correct")[:MAX_GOLD_ANSWERS]
    )
    tally: dict[int, dict[str, int]] = defaultdict(
        lambda: dict.fromkeys(("answers", "correct", "labels", "labels_ok"), 0)
    )
    for reviewer_id, correct, label_correct in rows:
        counts = tally[reviewer_id]
        counts["answers"] += 1
        counts["correct"] += bool(correct)
        if label_correct is not None:
            counts["labels"] += 1
            counts["labels_ok"] += bool(label_correct)
    return tally


def _standing() -> dict[int, tuple[bool, bool]]:
    """(flagged, paused) per reviewer; a flag or pause older than the
    reviewer's reinstatement no longer holds."""

    def holds(at: datetime | None, reinstated: datetime | None) -> bool:
        return at is not None and (reinstated is None or at > reinstated)

    rows = ReviewerStanding.objects.values_list("reviewer_id", "flagged_at", "paused_at", "reinstated_at")
    return {rid: (holds(flagged, back), holds(paused, back)) for rid, flagged, paused, back in rows}


def _error_rates() -> dict[int, float]:
    """The tuner's estimated error rate per reviewer id, from the policy row."""
    # Read, not Queue.current(): that creates the row when it is missing.
    reliability = Queue.objects.filter(slug=DEFAULT_QUEUE).values_list("reliability", flat=True).first()
    errors = reliability.get("errors") if isinstance(reliability, dict) else None
    rates: dict[int, float] = {}
    for key, value in errors.items() if isinstance(errors, dict) else ():
        try:
            rid, rate = int(key), float(value)
        except (TypeError, ValueError):
            continue  # not a reviewer's rate: the field is JSON, written elsewhere
        if math.isfinite(rate):
            rates[rid] = rate
    return rates


def _usernames(ids: Iterable[int]) -> dict[int, str]:
    return dict(get_user_model().objects.filter(pk__in=set(ids)).values_list("pk", "username"))


# --- the report -------------------------------------------------------------------------


def _estimate_json(estimate: Estimate) -> dict[str, Any]:
    return {"value": estimate.value, "ci95": list(estimate.ci95) if estimate.ci95 else None, "items": estimate.n}


def _pair_rows(
    pairs: dict[tuple[int, int], tuple[list[str], list[str]]], names: dict[int, str], *, bootstrap: int, seed: int
) -> list[dict[str, Any]]:
    rows = []
    for (a_id, b_id), (a, b) in sorted(pairs.items()):
        if len(a) < MIN_PAIR_OVERLAP:
            continue
        kappa = cohen_kappa(a, b, bootstrap=bootstrap, seed=seed)
        rows.append(
            {
                "a": names.get(a_id, ""),
                "b": names.get(b_id, ""),
                "a_id": a_id,
                "b_id": b_id,
                "items": kappa.n,
                "kappa": kappa.value,
                "ci95": list(kappa.ci95) if kappa.ci95 else None,
            }
        )
    return rows


def _reviewer_rows(
    gold: dict[int, dict[str, int]],
    standing: dict[int, tuple[bool, bool]],
    errors: dict[int, float],
    names: dict[int, str],
) -> list[dict[str, Any]]:
    rows = []
    for rid, name in sorted(names.items(), key=lambda item: (item[1], item[0])):
        counts = gold.get(rid, dict.fromkeys(("answers", "correct", "labels", "labels_ok"), 0))
        ci = wilson_interval(counts["correct"], counts["answers"])
        flagged, paused = standing.get(rid, (False, False))
        rows.append(
            {
                "id": rid,
                "reviewer": name,
                "gold_answers": counts["answers"],
                "gold_correct": counts["correct"],
                "accuracy": counts["correct"] / counts["answers"] if counts["answers"] else None,
                "ci95": list(ci) if ci else None,
                "label_answers": counts["labels"],
                "label_correct": counts["labels_ok"],
                "error_rate": errors.get(rid),
                "flagged": flagged,
                "paused": paused,
            }
        )
    return rows


def double_review_counts() -> dict[str, Any]:
    """Items waiting for a second review, a third, an operator; verdicts by how they were settled."""
    waiting = ReviewItem.objects.filter(status__in=ReviewItem.WAITING, gold__isnull=True).aggregate(
        awaiting_second=Count("id", filter=Q(review_round=2)),
        awaiting_third=Count("id", filter=Q(review_round=3)),
        awaiting_operator=Count("id", filter=Q(review_round__gte=4)),
    )
    settled = dict.fromkeys(SETTLED_BY, 0)
    for settled_by, n in Verdict.objects.values_list("settled_by").annotate(n=Count("id")).order_by():
        settled[settled_by] = n
    return {**waiting, "settled": settled}


def quality_report(*, bootstrap: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Agreement, gold accuracy and double-review counts, JSON-serialisable
    (no NaN anywhere: an undefined statistic is None)."""
    by_item = _double_reviews()
    answers = list(by_item.values())
    decision = krippendorff_alpha([[a.category for a in unit] for unit in answers], bootstrap=bootstrap, seed=seed)
    label = krippendorff_alpha([[a.label for a in unit] for unit in answers], bootstrap=bootstrap, seed=seed)
    pairs = _pairs(by_item)
    gold, standing, errors = _gold_answers(), _standing(), _error_rates()
    reviewer_ids = {a.reviewer_id for unit in answers for a in unit if a.reviewer_id is not None}
    reviewer_ids |= set(gold) | {rid for rid, state in standing.items() if any(state)}
    names = _usernames(reviewer_ids | {rid for pair in pairs for rid in pair})
    return {
        "decision_alpha": _estimate_json(decision),
        "label_alpha": _estimate_json(label),
        "pairs": _pair_rows(pairs, names, bootstrap=bootstrap, seed=seed),
        "reviewers": _reviewer_rows(gold, standing, errors, {rid: names[rid] for rid in reviewer_ids if rid in names}),
        "double_review": double_review_counts(),
        "gold": {
            "active": GoldItem.objects.filter(retired_at__isnull=True).count(),
            "answers": Judgement.objects.filter(kind=Judgement.Kind.GOLD).count(),
        },
        "min_pair_overlap": MIN_PAIR_OVERLAP,
    }


def cached_quality_report() -> dict[str, Any]:
    """``quality_report()``, kept in the cache for a minute. A cache that
    cannot be reached costs a computation, never an error."""
    try:
        report = cache.get(CACHE_KEY)
    except Exception:  # noqa: BLE001 - the database answers without the cache
        log.warning("cache unreachable; computing the quality report")
        report = None
    if report is not None:
        return report  # type: ignore[no-any-return]
    report = quality_report()
    try:
        cache.set(CACHE_KEY, report, CACHE_SECONDS)
    except Exception:  # noqa: BLE001 - the report was computed; caching is optional
        log.warning("cache unreachable; quality report not cached")
    return report


def agreement_for_producers(report: dict[str, Any]) -> dict[str, Any]:
    """The part of the report that /api/stats shows producers: agreement
    and double-review counts, reviewers by id only. Gold accuracy stays on
    the operators' pages."""
    return {
        "decision_alpha": report["decision_alpha"],
        "label_alpha": report["label_alpha"],
        "pairs": [{key: pair[key] for key in ("a_id", "b_id", "items", "kappa", "ci95")} for pair in report["pairs"]],
        "double_review": report["double_review"],
        "min_pair_overlap": report["min_pair_overlap"],
    }
