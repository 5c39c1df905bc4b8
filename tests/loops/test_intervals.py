"""The Wilson interval behind the audit's "observed vs. true" rejection rate."""

from __future__ import annotations

import pytest

from loops.intervals import wilson_interval


def test_it_matches_the_textbook_wilson_interval() -> None:
    # Wilson (1927) worked by hand: p = 0.2, n = 50, z = 1.96.
    lo, hi = wilson_interval(10, 50)
    z = 1.96
    p, n = 0.2, 50
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = (z / (1 + z * z / n)) * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5)
    assert lo == pytest.approx(centre - half)
    assert hi == pytest.approx(centre + half)
    assert 0.11 < lo < 0.2 < hi < 0.34


def test_it_keeps_wilson_inside_zero_and_one_at_the_extremes() -> None:
    lo, hi = wilson_interval(0, 20)
    assert lo == 0.0 and 0.0 < hi < 0.2
    lo, hi = wilson_interval(20, 20)
    assert 0.8 < lo < 1.0 and hi == 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_it_narrows_wilson_with_more_samples() -> None:
    small = wilson_interval(5, 50)
    large = wilson_interval(50, 500)
    assert large[1] - large[0] < small[1] - small[0]


def test_it_rejects_impossible_wilson_counts() -> None:
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
