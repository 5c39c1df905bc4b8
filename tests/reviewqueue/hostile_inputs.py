"""Hostile inputs for admit(), shared by the tests that send them directly
(services/test_admission_hostile.py) and through POST /api/outputs
(test_bad_input_admit.py): the strategies, the limits they probe, and the
checks that a stored text is clean."""

from __future__ import annotations

import itertools
import re
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

LIMIT = 200  # small, so huge inputs stay cheap; the shipped default is 500 000
ERROR_LIMIT = 20_000
MARKER = re.compile(r"\n\n\[reviewqueue: output truncated, (\d+) of (\d+) characters omitted\]\Z")
MARKER_ROOM = 100  # the marker with two numbers of up to 40 digits each fits in this
FIELDS = {"idempotency_key", "task_description", "cutoff_reason", "label", "priority", "attempt_count"}
STORED_TEXT = ("task_description", "final_output", "last_error", "task_id", "task_kind", "producer", "source_run_id")

SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
LONE_SURROGATE = re.compile("[\ud800-\udfff]")

unique = itertools.count()

HUGE = 3 * LIMIT
nasty_chars = st.sampled_from(["\x00", "\ud800", "\udfff", "\ufffe", "\u202e", "\x1b[31m", "\r", "é", "𝔘", "\u200b"])
text = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=()), max_size=HUGE),
    st.lists(nasty_chars, max_size=40).map("".join),
    st.builds(lambda c, n: c * n, st.sampled_from(["x", "\x00", "\ud83d", "ü", "<b>"]), st.integers(0, HUGE)),
)
raw = st.one_of(st.binary(max_size=HUGE), st.binary(max_size=8).map(lambda b: b * 100))
anything = st.one_of(text, raw, st.none(), st.integers(), st.lists(st.integers(), max_size=3))
reasons = st.one_of(st.sampled_from(["step_limit", "stuck", "external", "draft"]), text)
integers = st.one_of(st.integers(-2000, 12_000), st.booleans(), st.none(), text)
# Mostly valid, so most examples get as far as storing the text fields.
valid_reason = st.sampled_from(["step_limit", "stuck", "oscillation", "external", "draft", "sampled"])
valid_label = st.sampled_from(["unverified", "sampled"])


def expected_text(value: Any) -> str:
    """What a field should read after cleaning, computed without admit's own helper."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        decoded = value.decode("utf-8", errors="replace")
    else:
        # A high+low surrogate pair is what a JSON "\\ud83d\\ude00" escape means: one character.
        paired = SURROGATE_PAIR.sub(
            lambda m: chr(0x10000 + ((ord(m[0][0]) - 0xD800) << 10) + ord(m[0][1]) - 0xDC00), str(value)
        )
        decoded = LONE_SURROGATE.sub("\ufffd", paired)
    return decoded.replace("\x00", "\ufffd")


def assert_clean(value: str, *, limit: int) -> bool:
    """Valid UTF-8, no NUL, within the limit plus marker; returns whether it was cut."""
    assert "\x00" not in value
    value.encode("utf-8")  # raises on a lone surrogate
    assert len(value) <= limit + MARKER_ROOM
    marker = MARKER.search(value)
    if marker is not None:
        assert len(value) - len(marker.group(0)) == limit
        assert int(marker.group(2)) - int(marker.group(1)) == limit
    return marker is not None


HYPOTHESIS = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
