"""Several queues: the serving rule, routing and queue slugs (reviewqueue.policy)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reviewqueue.policy import (
    PolicyError,
    QueueHead,
    RoutingRule,
    check_slug,
    next_queue,
    route,
    serving_key,
)


def head(slug: str, priority: int | None = 1, depth: int = 5, capacity: int = 10, arrived: float | None = 0.0):
    return QueueHead(slug=slug, priority=priority, depth=depth, capacity=capacity, arrived=arrived)


# --- serving rule -----------------------------------------------------------


def test_no_heads_and_nothing_waiting_give_none():
    assert next_queue([]) is None
    assert next_queue([head("a", priority=None, arrived=None), head("b", priority=None, arrived=None)]) is None


def test_a_queue_with_nothing_waiting_is_skipped_even_if_it_would_win():
    # "a" is fuller and would win on every key, but nothing in it is waiting.
    empty = head("a", priority=None, depth=10, arrived=None)
    assert next_queue([empty, head("b", priority=0, depth=1, arrived=9.0)]) == "b"


def test_serving_key_refuses_a_head_with_nothing_waiting():
    with pytest.raises(PolicyError):
        serving_key(head("a", priority=None, arrived=None))


def test_higher_priority_beats_fuller_and_older():
    low = head("a", priority=0, depth=10, arrived=0.0)
    high = head("b", priority=2, depth=1, arrived=50.0)
    assert next_queue([low, high]) == "b"


def test_equal_priority_fuller_queue_first_as_a_share_of_capacity():
    # 8 of 10 is fuller than 30 of 100, though 30 items are more than 8.
    small = head("small", depth=8, capacity=10, arrived=5.0)
    big = head("big", depth=30, capacity=100, arrived=1.0)
    assert next_queue([big, small]) == "small"


def test_equal_priority_and_fullness_older_head_first():
    assert (
        next_queue([head("a", depth=2, capacity=4, arrived=3.0), head("b", depth=5, capacity=10, arrived=1.5)]) == "b"
    )


def test_everything_equal_slug_decides():
    assert next_queue([head("beta"), head("alpha")]) == "alpha"


def test_queue_head_rejects_impossible_numbers():
    with pytest.raises(PolicyError):
        head("a", capacity=0)
    with pytest.raises(PolicyError):
        head("a", depth=-1)


heads_st = st.lists(
    st.builds(
        QueueHead,
        slug=st.sampled_from(["a", "b", "c", "d", "e"]),
        priority=st.one_of(st.none(), st.integers(0, 3)),
        depth=st.integers(0, 20),
        capacity=st.integers(1, 20),
        arrived=st.one_of(st.none(), st.floats(0, 100, allow_nan=False)),
    ),
    max_size=6,
    unique_by=lambda h: h.slug,
)


@given(heads_st)
def test_next_queue_does_not_depend_on_the_order_heads_are_listed(heads):
    answers = {next_queue(p) for p in itertools.islice(itertools.permutations(heads), 24)}
    assert len(answers) == 1


@given(heads_st)
def test_the_chosen_queue_has_something_waiting_and_no_waiting_head_beats_it(heads):
    chosen = next_queue(heads)
    waiting = [h for h in heads if h.waiting]
    if not waiting:
        assert chosen is None
        return
    winner = next(h for h in heads if h.slug == chosen)
    assert winner.waiting
    for other in waiting:
        assert winner.priority >= other.priority
        if other.priority == winner.priority:
            assert winner.depth * other.capacity >= other.depth * winner.capacity


@given(heads_st)
def test_serving_key_is_a_total_order_over_distinct_queues(heads):
    keys = [serving_key(h) for h in heads if h.waiting]
    assert len(set(keys)) == len(keys)


# --- routing --------------------------------------------------------------------

WORK = {"producer": "ci-bot", "task_kind": "code", "priority": 1, "task_id": "billing-42"}


def test_no_rules_route_to_the_default():
    assert route([], **WORK) == "default"
    assert route([], **WORK, default="catch-all") == "catch-all"


def test_a_rule_with_no_conditions_matches_everything():
    assert route([RoutingRule("all")], **WORK) == "all"


@pytest.mark.parametrize(
    ("rule", "matches"),
    [
        (RoutingRule("q", producer="ci-bot"), True),
        (RoutingRule("q", producer="ci"), False),
        (RoutingRule("q", producer="CI-BOT"), False),
        (RoutingRule("q", task_kind="code"), True),
        (RoutingRule("q", task_kind="prose"), False),
        (RoutingRule("q", min_priority=1), True),
        (RoutingRule("q", min_priority=2), False),
        (RoutingRule("q", max_priority=1), True),
        (RoutingRule("q", max_priority=0), False),
        (RoutingRule("q", min_priority=1, max_priority=1), True),
        (RoutingRule("q", min_priority=0, max_priority=2), True),
        (RoutingRule("q", min_priority=2, max_priority=3), False),
        (RoutingRule("q", task_id_prefix="billing-"), True),
        (RoutingRule("q", task_id_prefix="billing-42"), True),
        (RoutingRule("q", task_id_prefix="billing-420"), False),
        (RoutingRule("q", task_id_prefix="42"), False),
        (RoutingRule("q", producer="ci-bot", task_kind="prose"), False),
        (RoutingRule("q", producer="ci-bot", task_kind="code", min_priority=1, task_id_prefix="bill"), True),
    ],
)
def test_each_condition_alone_and_together(rule, matches):
    assert route([rule], **WORK) == ("q" if matches else "default")


@pytest.mark.parametrize(("priority", "expected"), [(0, "default"), (1, "mid"), (2, "mid"), (3, "mid"), (4, "default")])
def test_priority_range_is_inclusive_at_both_ends(priority, expected):
    rule = RoutingRule("mid", min_priority=1, max_priority=3)
    assert route([rule], producer="p", task_kind="k", priority=priority, task_id="t") == expected


def test_first_matching_rule_wins_in_the_order_given():
    specific = RoutingRule("billing", task_id_prefix="billing-")
    broad = RoutingRule("bots", producer="ci-bot")
    assert route([specific, broad], **WORK) == "billing"
    assert route([broad, specific], **WORK) == "bots"


def test_a_rule_that_does_not_match_is_passed_over():
    rules = [RoutingRule("prose", task_kind="prose"), RoutingRule("code", task_kind="code")]
    assert route(rules, **WORK) == "code"


def test_rule_validation():
    with pytest.raises(PolicyError) as err:
        RoutingRule("q", min_priority=3, max_priority=2)
    assert err.value.field == "min_priority"
    with pytest.raises(PolicyError):
        RoutingRule("")
    with pytest.raises(PolicyError):
        RoutingRule("Not A Slug")
    RoutingRule("q", min_priority=2, max_priority=2)  # a one-value range is allowed


@given(
    st.lists(
        st.builds(
            RoutingRule,
            queue=st.sampled_from(["a", "b", "c"]),
            producer=st.sampled_from(["", "x", "y"]),
            min_priority=st.one_of(st.none(), st.integers(0, 1)),
            max_priority=st.one_of(st.none(), st.integers(2, 3)),
        ),
        max_size=5,
    ),
    st.sampled_from(["x", "y", "z"]),
    st.integers(0, 3),
)
def test_route_answers_the_first_matching_rule_or_the_default(rules, producer, priority):
    work = {"producer": producer, "task_kind": "k", "priority": priority, "task_id": "t"}
    got = route(rules, **work)
    matching = [r for r in rules if r.matches(**work)]
    assert got == (matching[0].queue if matching else "default")


# --- slugs ------------------------------------------------------------------


@pytest.mark.parametrize("slug", ["a", "team-1", "z9", "a" * 50, "fleet-a-b-c"])
def test_good_slugs_pass(slug):
    assert check_slug(slug) == slug


@pytest.mark.parametrize(
    "slug", ["", "1team", "-team", "Team", "team_a", "team a", "a" * 51, "team\n", "tëam", "team/x"]
)
def test_bad_slugs_raise(slug):
    with pytest.raises(PolicyError) as err:
        check_slug(slug)
    assert err.value.field == "slug"


@given(st.text(max_size=60))
def test_check_slug_accepts_exactly_the_documented_shape(text):
    ok = (
        1 <= len(text) <= 50
        and text[0] in "abcdefghijklmnopqrstuvwxyz"
        and all(c in "abcdefghijklmnopqrstuvwxyz0123456789-" for c in text)
    )
    if ok:
        assert check_slug(text) == text
    else:
        with pytest.raises(PolicyError):
            check_slug(text)
