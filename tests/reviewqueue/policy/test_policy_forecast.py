"""The breach forecast and the alert episodes in the pure policy."""

from __future__ import annotations

import random

import pytest

from reviewqueue.policy import (
    AlertState,
    Forecast,
    Mode,
    Watermarks,
    forecast,
    forecast_words,
    minutes_to_high_watermark,
    minutes_to_sla_breach,
    next_mode,
    step_alert,
)

MARKS = Watermarks(capacity=50, high=0.8, low=0.3)  # draft above depth 40


def test_no_forecast_when_review_keeps_up() -> None:
    assert minutes_to_high_watermark(10, MARKS, 2.0, 3.0) is None
    assert minutes_to_high_watermark(10, MARKS, 3.0, 3.0) is None


def test_the_forecast_is_near_the_fluid_estimate_when_the_drift_dominates() -> None:
    fluid = (41 - 10) / 9.0
    assert minutes_to_high_watermark(10, MARKS, 12.0, 3.0) == pytest.approx(fluid, rel=0.1)
    assert minutes_to_high_watermark(10, MARKS, 12.0, 3.0) <= fluid  # ups and downs only bring it sooner


def test_already_above_is_now() -> None:
    assert minutes_to_high_watermark(41, MARKS, 1.0, 3.0) == 0.0


def test_an_item_already_past_the_sla_is_a_breach_now() -> None:
    assert minutes_to_sla_breach(depth=3, oldest_minutes=31, sla_minutes=30, arrivals_per_min=0, reviews_per_min=1) == 0


def test_with_nobody_reviewing_the_oldest_breaches_when_its_age_reaches_the_sla() -> None:
    got = minutes_to_sla_breach(depth=3, oldest_minutes=22, sla_minutes=30, arrivals_per_min=0, reviews_per_min=0)
    assert got == pytest.approx(8)


def test_a_fast_reviewer_gets_to_the_oldest_in_time() -> None:
    assert (
        minutes_to_sla_breach(depth=3, oldest_minutes=22, sla_minutes=30, arrivals_per_min=1, reviews_per_min=2) is None
    )


def test_the_words_follow_the_numbers() -> None:
    text = forecast_words(Forecast(12.2, 8.4), sla_minutes=30, mode=Mode.NORMAL)
    assert text == "At this pace: draft mode in about 12 min; the oldest item passes its 30-min target in about 8 min."
    assert forecast_words(Forecast(None, None), sla_minutes=30, mode=Mode.NORMAL) == "At this pace: stable."
    fc = forecast(
        mode=Mode.NORMAL,
        depth=5,
        marks=MARKS,
        arrivals_per_min=1,
        reviews_per_min=2,
        oldest_minutes=1,
        sla_minutes=30,
    )
    assert fc.stable


def test_an_alert_fires_once_per_episode_and_recovers_after_the_hold() -> None:
    state, sent = AlertState(), []
    for t, holds in [(0, True), (10, True), (20, False), (30, True), (40, False), (400, False)]:
        state, message = step_alert(state, holds, t, hold_seconds=300)
        if message:
            sent.append((t, message))
    assert sent == [(0, "fired"), (400, "recovered")]


def test_a_depth_flapping_around_the_watermark_for_ten_minutes_sends_at_most_two_alerts() -> None:
    rng = random.Random(7)
    mode, depth, state, sent = Mode.NORMAL, 38, AlertState(), []
    for second in range(0, 600, 5):  # ten simulated minutes, looked at every 5 s
        depth = max(0, min(49, depth + rng.choice((-6, -3, 3, 6))))  # jumps across both watermarks
        mode = next_mode(mode, depth, MARKS)
        state, message = step_alert(state, mode is not Mode.NORMAL, second, hold_seconds=300)
        if message:
            sent.append(message)
    assert 1 <= len(sent) <= 2
