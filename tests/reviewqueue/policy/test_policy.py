"""The pure policy: every watermark transition and edge, shedding, the tuner, label rules."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reviewqueue.policy import (
    FILTER_GATES,
    REASON_LABELS,
    Candidate,
    Mode,
    PolicyError,
    TunerConfig,
    Watermarks,
    approve_rate,
    choose_victim,
    loop_runs_draft,
    next_mode,
    plain_enqueue_depths,
    plan_admission,
    proposed_filter_rules,
    sample_for_audit,
    tune_step_limit,
)

MARKS = Watermarks(capacity=50, high=0.8, low=0.3)  # high at depth 40, low at depth 15


# --- watermark state machine -------------------------------------------------------


def test_it_stays_normal_up_to_and_at_the_high_watermark() -> None:
    assert next_mode(Mode.NORMAL, 0, MARKS) is Mode.NORMAL
    assert next_mode(Mode.NORMAL, 39, MARKS) is Mode.NORMAL
    assert next_mode(Mode.NORMAL, 40, MARKS) is Mode.NORMAL  # exactly 80 %: not above


def test_it_turns_draft_just_above_the_high_watermark() -> None:
    assert next_mode(Mode.NORMAL, 41, MARKS) is Mode.DRAFT


def test_it_stays_draft_between_the_watermarks() -> None:
    for depth in (40, 30, 16, 15):  # 15 is exactly 30 %: not below
        assert next_mode(Mode.DRAFT, depth, MARKS) is Mode.DRAFT


def test_it_returns_to_normal_only_below_the_low_watermark() -> None:
    assert next_mode(Mode.DRAFT, 14, MARKS) is Mode.NORMAL
    assert next_mode(Mode.DRAFT, 0, MARKS) is Mode.NORMAL


def test_it_sheds_exactly_at_capacity_from_any_mode() -> None:
    for mode in Mode:
        assert next_mode(mode, 50, MARKS) is Mode.SHEDDING
        assert next_mode(mode, 51, MARKS) is Mode.SHEDDING


def test_it_leaves_shedding_for_draft_not_normal_when_depth_drops_between_the_marks() -> None:
    assert next_mode(Mode.SHEDDING, 49, MARKS) is Mode.DRAFT
    assert next_mode(Mode.SHEDDING, 20, MARKS) is Mode.DRAFT
    assert next_mode(Mode.SHEDDING, 14, MARKS) is Mode.NORMAL


def test_it_runs_loops_as_drafts_only_outside_normal_mode() -> None:
    assert not loop_runs_draft(Mode.NORMAL)
    assert loop_runs_draft(Mode.DRAFT)
    assert loop_runs_draft(Mode.SHEDDING)


def test_it_walks_a_full_hysteresis_cycle() -> None:
    mode = Mode.NORMAL
    seen = []
    for depth in [*range(51), *range(50, -1, -1)]:
        new = next_mode(mode, depth, MARKS)
        if new is not mode:
            seen.append((depth, new))
        mode = new
    assert seen == [(41, Mode.DRAFT), (50, Mode.SHEDDING), (49, Mode.DRAFT), (14, Mode.NORMAL)]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"capacity": 0}, "capacity"),
        ({"high": 1.2}, "high_watermark"),
        ({"high": 0.0}, "high_watermark"),
        ({"low": 0.8, "high": 0.8}, "low_watermark"),
        ({"low": -0.1}, "low_watermark"),
    ],
)
def test_it_refuses_bad_watermarks_naming_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(PolicyError) as err:
        Watermarks(**kwargs)
    assert err.value.field == field


# --- shedding -----------------------------------------------------------------------


def test_it_sheds_the_lowest_priority() -> None:
    waiting = [Candidate(3, 1.0, "a"), Candidate(1, 5.0, "b"), Candidate(2, 0.0, "c")]
    assert choose_victim(waiting, Candidate(2, 9.0, "new")).key == "b"


def test_it_sheds_the_oldest_among_equal_priorities() -> None:
    waiting = [Candidate(1, 5.0, "young"), Candidate(1, 2.0, "old")]
    assert choose_victim(waiting, Candidate(1, 9.0, "new")).key == "old"


def test_it_sheds_the_incoming_item_when_it_is_the_lowest() -> None:
    waiting = [Candidate(2, 1.0, "a")]
    assert choose_victim(waiting, Candidate(1, 9.0, "new")).key == "new"


def test_it_admits_below_capacity_without_shedding() -> None:
    plan = plan_admission(mode=Mode.NORMAL, depth=49, marks=MARKS, incoming=Candidate(1, 0.0, "x"))
    assert plan.enqueue and plan.shed is None and plan.depth == 50 and plan.mode is Mode.SHEDDING


def test_it_swaps_in_a_higher_priority_arrival_at_capacity() -> None:
    plan = plan_admission(
        mode=Mode.SHEDDING,
        depth=50,
        marks=MARKS,
        incoming=Candidate(5, 10.0, "new"),
        sheddable=[Candidate(1, 1.0, "low")],
    )
    assert plan.enqueue and plan.shed is not None and plan.shed.key == "low" and plan.depth == 50


def test_it_refuses_an_arrival_at_capacity_when_nothing_waiting_is_sheddable() -> None:
    # Every item is under review: nothing can be displaced, so the arrival is shed.
    incoming = Candidate(9, 10.0, "new")
    plan = plan_admission(mode=Mode.SHEDDING, depth=50, marks=MARKS, incoming=incoming, sheddable=[])
    assert not plan.enqueue and plan.shed is incoming


def test_it_keeps_depth_at_capacity_while_shedding() -> None:
    plan = plan_admission(
        mode=Mode.DRAFT, depth=50, marks=MARKS, incoming=Candidate(1, 9.0, "n"), sheddable=[Candidate(1, 1.0, "o")]
    )
    assert plan.depth == 50 and plan.mode is Mode.SHEDDING


def is_plain_enqueue(mode: Mode, depth: int, marks: Watermarks) -> bool:
    plan = plan_admission(mode=mode, depth=depth, marks=marks, incoming=Candidate(1, 9.0, "n"), sheddable=[])
    return plan.enqueue and plan.shed is None and plan.mode is mode


def test_it_names_the_depths_where_an_arrival_is_a_plain_enqueue() -> None:
    # capacity 50, high at 40, low at 15: normal stays normal while the arrival
    # lands at 40 at most; draft stays draft while it lands at 15 or more and
    # below capacity; shedding stays shedding only if the arrival fills the queue.
    assert plain_enqueue_depths(Mode.NORMAL, MARKS) == range(40)
    assert plain_enqueue_depths(Mode.DRAFT, MARKS) == range(14, 49)
    assert plain_enqueue_depths(Mode.SHEDDING, MARKS) == range(49, 50)


@given(
    capacity=st.integers(min_value=1, max_value=300),
    high=st.floats(min_value=0.001, max_value=1.0),
    low_share=st.floats(min_value=0.0, max_value=0.999),
    mode=st.sampled_from(list(Mode)),
)
def test_the_plain_enqueue_depths_agree_with_plan_admission_at_every_depth(
    capacity: int, high: float, low_share: float, mode: Mode
) -> None:
    # The live queue's one-statement admission applies this range in SQL; at
    # every depth, in and out of it, it must say what plan_admission decides.
    marks = Watermarks(capacity=capacity, high=high, low=high * low_share)
    depths = plain_enqueue_depths(mode, marks)
    for depth in range(capacity + 3):
        assert (depth in depths) == is_plain_enqueue(mode, depth, marks), depth


# --- tuner ---------------------------------------------------------------------------

CFG = TunerConfig()


def test_it_leaves_the_step_limit_alone_on_an_empty_window() -> None:
    assert tune_step_limit(5, [], CFG) == 5
    assert approve_rate([], 10) is None


def test_it_leaves_the_step_limit_alone_on_a_partial_window() -> None:
    assert tune_step_limit(5, [True] * 9, CFG) == 5
    assert tune_step_limit(5, [False] * 9, CFG) == 5


def test_it_raises_the_limit_above_80_percent() -> None:
    assert tune_step_limit(5, [True] * 9 + [False] * 0 + [True], CFG) == 6  # 100 %


def test_it_holds_the_limit_at_exactly_80_percent() -> None:
    window = [True] * 8 + [False] * 2
    assert approve_rate(window, 10) == pytest.approx(0.8)
    assert tune_step_limit(5, window, CFG) == 5


def test_it_holds_the_limit_at_exactly_40_percent() -> None:
    assert tune_step_limit(5, [True] * 4 + [False] * 6, CFG) == 5


def test_it_lowers_the_limit_below_40_percent() -> None:
    assert tune_step_limit(5, [True] * 3 + [False] * 7, CFG) == 4


def test_it_looks_only_at_the_last_window_of_verdicts() -> None:
    old_rejections = [False] * 30
    assert tune_step_limit(5, old_rejections + [True] * 10, CFG) == 6


def test_it_clamps_at_the_bounds() -> None:
    assert tune_step_limit(15, [True] * 10, CFG) == 15
    assert tune_step_limit(3, [False] * 10, CFG) == 3
    assert tune_step_limit(20, [True] * 5 + [False] * 5, CFG) == 15  # out-of-range input comes back in


def test_it_refuses_inverted_tuner_bounds() -> None:
    with pytest.raises(PolicyError) as err:
        TunerConfig(min_steps=10, max_steps=5)
    assert err.value.field == "min_step_limit"
    with pytest.raises(PolicyError):
        TunerConfig(approve_low=0.9, approve_high=0.8)


# --- labels -> filter rules -----------------------------------------------------------


def test_it_proposes_a_rule_only_past_the_threshold() -> None:
    assert proposed_filter_rules({"code_error": 3}, threshold=3) == []
    assert proposed_filter_rules({"code_error": 4}, threshold=3) == ["code_error"]


def test_it_does_not_propose_a_rule_twice_or_for_a_label_without_a_gate() -> None:
    counts = {"code_error": 9, "unclear": 9, "format_issue": 5}
    assert proposed_filter_rules(counts, 3, already=["code_error"]) == ["format_issue"]
    assert "unclear" not in FILTER_GATES


def test_every_gate_is_keyed_by_a_known_label() -> None:
    assert set(FILTER_GATES) <= set(REASON_LABELS)


# --- sampling -------------------------------------------------------------------------


def test_it_samples_at_about_the_configured_rate() -> None:
    rng = random.Random(7)
    hits = sum(sample_for_audit(rng, 0.2) for _ in range(10_000))
    assert 1800 < hits < 2200  # 0.2 ± 5 standard deviations (sd = 40)
    assert not any(sample_for_audit(rng, 0.0) for _ in range(1000))
    assert all(sample_for_audit(rng, 1.0) for _ in range(1000))


def test_it_refuses_a_sampling_rate_outside_0_1() -> None:
    with pytest.raises(PolicyError):
        sample_for_audit(random.Random(0), 1.5)
