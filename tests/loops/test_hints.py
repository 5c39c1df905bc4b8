"""Hints: the redactor against every disguise of a hidden check (a property
test with its own oracle), and what a prompt says after a failure."""

from __future__ import annotations

import html
import json
import re
import shlex
import textwrap
import unicodedata
from collections.abc import Callable
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loops.hints import REDACTED, Failure, Redactor, build_prompt
from loops.spec import Check, Task, builtin_suite

# --- an independent oracle: the test's own idea of "the secret is readable here"


def _oracle_flat(text: str) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    text = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in text if ch.isalnum())


def _readable_in(secret: str, text: str) -> bool:
    return _oracle_flat(secret) in _oracle_flat(text)


# --- transformations a log tail or an echoed fragment may apply


def _ansi_inside(s: str) -> str:
    return "".join(f"\x1b[3{i % 8}m{ch}\x1b[0m" for i, ch in enumerate(s))


def _reflow(s: str, width: int = 11) -> str:
    return "\n".join(textwrap.wrap(s, width, break_long_words=True)) or s


def _hard_wrap(s: str, width: int = 9) -> str:
    # What a terminal or a log viewer does: break every ``width`` characters.
    return "\n".join(s[i : i + width] for i in range(0, len(s), width))


def _prefix_lines(prefix: str) -> Callable[[str], str]:
    # A one-line text is first wrapped as pytest does; lines already there keep their breaks.
    return lambda s: "\n".join(prefix + line for line in (s if "\n" in s else _reflow(s, 15)).splitlines())


def _unicode_escape(s: str) -> str:
    return "".join(f"\\u{ord(ch):04x}" for ch in s)


def _html_numeric(s: str) -> str:
    return "".join(f"&#{ord(ch)};" for ch in s)


# How the text itself may be rewritten: quoting, escaping, case, spacing.
CONTENT: dict[str, Callable[[str], str]] = {
    "repr": repr,
    "json": json.dumps,
    "json_ascii_escapes": lambda s: json.dumps(s).replace("'", "\\u0027"),
    "shell": shlex.quote,
    "upper": str.upper,
    "swapcase": str.swapcase,
    "spaces": lambda s: re.sub(r"\s+", "   \t ", s).replace("==", " == ").replace("(", " ( "),
    "no_spaces": lambda s: re.sub(r"\s+", "", s),
    "reflow": _reflow,
    "html": html.escape,
    "html_numeric": _html_numeric,
    "percent": lambda s: quote(s, safe=""),
    "percent_plus": quote_plus,
    "unicode_escape": _unicode_escape,
    "fullwidth": lambda s: "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in s),
}
# How a log shows it: colours, wrapping, diff and pytest line prefixes.
PRESENTATION: dict[str, Callable[[str], str]] = {
    "ansi": _ansi_inside,
    "hard_wrap": _hard_wrap,
    "diff_plus": _prefix_lines("+ "),
    "diff_minus": _prefix_lines("- "),
    "quote_gt": _prefix_lines("> "),
    "pytest_E": _prefix_lines("E       "),
}
# A whole log captured once more, e.g. as a JSON field or in a web page.
OUTER: dict[str, Callable[[str], str]] = {
    "none": lambda s: s,
    "repr": repr,
    "json": json.dumps,
    "html": html.escape,
    "percent": lambda s: quote(s, safe=""),
}

ASSERTIONS = [
    text for task in builtin_suite() for check in task.checks for text in (check.code, check.stdout) if text is not None
]

identifier = st.from_regex(r"[a-z_][a-z0-9_]{2,10}", fullmatch=True)
literal = st.one_of(
    st.integers(min_value=-10_000, max_value=10_000).map(str),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz -_", min_size=3, max_size=12).map(repr),
)
generated_assertion = st.builds(
    lambda fn, arg, expected: f"assert {fn}({arg}) == {expected}", identifier, literal, literal
)
any_assertion = st.one_of(st.sampled_from(ASSERTIONS), generated_assertion)
noise = st.text(alphabet="abcdefghij klmnop.,:\n", max_size=40)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    secret=any_assertion,
    content=st.lists(st.sampled_from(sorted(CONTENT)), max_size=2),
    presentation=st.lists(st.sampled_from(sorted(PRESENTATION)), max_size=2),
    outer=st.sampled_from(sorted(OUTER)),
    before=noise,
    after=noise,
)
def test_it_never_lets_a_transformed_assertion_through(
    secret: str, content: list[str], presentation: list[str], outer: str, before: str, after: str
) -> None:
    leaked = secret
    for name in content:
        leaked = CONTENT[name](leaked)
    for name in presentation:
        leaked = PRESENTATION[name](leaked)
    leaked = OUTER[outer](leaked)
    fragment = f"{before}{leaked}{after}"
    redactor = Redactor.for_secrets([secret])

    out = redactor.redact(fragment)

    assert out == REDACTED
    assert not _readable_in(secret, out)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(secret=any_assertion, cut=st.integers(min_value=0, max_value=6))
def test_it_drops_a_truncated_copy_of_a_long_assertion(secret: str, cut: int) -> None:
    # A log tail cut mid-line still shows most of the assertion.
    fragment = "log: " + secret[cut:]
    if len(_oracle_flat(secret[cut:])) < 16:
        return
    assert Redactor.for_secrets([secret]).redact(fragment) == REDACTED


BENIGN = [
    "name 'offset' is not defined",
    "unsupported operand type(s) for +: 'int' and 'str'",
    "\x1b[31mTraceback (most recent call last):\x1b[0m\n  File candidate.py, line 3",
    "list index out of range",
    "E   IndexError: pop from empty list",
    "+ added a helper\n- removed the old loop",
    "%7B%22step%22%3A%203%7D and &lt;b&gt;bold&lt;/b&gt; with \\u00e9",
]


@pytest.mark.parametrize("fragment", BENIGN)
def test_it_passes_fragments_that_share_nothing_with_the_checks(fragment: str) -> None:
    redactor = Redactor.for_secrets(ASSERTIONS)

    assert redactor.redact(fragment) == fragment


def test_it_drops_an_expected_value_shown_alone(suite: dict[str, Task]) -> None:
    task = suite["slugify"]
    redactor = Redactor.for_secrets(task.secrets())

    assert redactor.redact("you returned ready-set--go, not READY-SET-GO") == REDACTED


# --- the prompt after a failure


def test_it_builds_a_prompt_from_what_the_agent_did_without_the_checks(suite: dict[str, Task]) -> None:
    task = suite["to_bin"]
    redactor = Redactor.for_secrets(task.secrets())
    history = [
        Failure(
            attempt=1,
            failure_class="AssertionError",
            failed_checks=("check_2",),
            messages=("AssertionError: assert to_bin(8) == '100'",),
            log_tail="E       assert '1000' == '100'\nE         - 100\nE         + 1000",
        )
    ]

    prompt = build_prompt(task.description, history, redactor, step_limit=5)

    assert "check_2" in prompt
    assert "AssertionError" in prompt
    assert "Attempt 2 of 5" in prompt
    for check in task.checks:
        assert check.code is not None
        assert not _readable_in(check.code, prompt)
    assert "'100'" not in prompt


def test_it_keeps_the_agents_own_error_message_when_it_reveals_nothing(suite: dict[str, Task]) -> None:
    task = suite["str_length"]
    redactor = Redactor.for_secrets(task.secrets())
    history = [Failure(1, "NameError", ("check_1",), ("name 'offset' is not defined",))]

    prompt = build_prompt(task.description, history, redactor, step_limit=5)

    assert "name 'offset' is not defined" in prompt


# --- frozen passes and reviewer descriptions in the prompt

ABOUT_WORDS = ["handles", "empty", "input", "negative", "zero", "unicode", "overflow", "rounding", "leap", "year"]
about_text = st.lists(st.sampled_from(ABOUT_WORDS), min_size=2, max_size=4).map(" ".join)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    about=about_text,
    content=st.lists(st.sampled_from(sorted(CONTENT)), max_size=2),
    presentation=st.lists(st.sampled_from(sorted(PRESENTATION)), max_size=1),
    passed=st.integers(min_value=0, max_value=4),
    regressed=st.lists(st.sampled_from(["check_1", "check_2", "check_3"]), max_size=3, unique=True),
    before=noise,
)
def test_a_checks_description_never_reaches_the_prompt_with_the_new_hint_fields(
    about: str, content: list[str], presentation: list[str], passed: int, regressed: list[str], before: str
) -> None:
    # The agent's own code may have printed or raised the description (it
    # guessed it, or read it somewhere): every such fragment is dropped.
    leaked = about
    for name in content:
        leaked = CONTENT[name](leaked)
    for name in presentation:
        leaked = PRESENTATION[name](leaked)
    check = Check(id="check_1", code="assert f(0) == 1", about=about)
    redactor = Redactor.for_secrets(check.secrets())
    failure = Failure(
        attempt=2,
        failure_class="AssertionError",
        failed_checks=("check_1", *regressed),
        messages=(f"{before}{leaked}",),
        log_tail=f"note: {leaked}",
        checks_passed=passed,
        checks_total=5,
        regressed_checks=tuple(regressed),
    )

    prompt = build_prompt("Write f(n).", [failure, failure], redactor, step_limit=5)

    assert not _readable_in(about, prompt)
    assert f"Hidden checks passing: {passed} of 5." in prompt
    if regressed:
        assert "Regression: " + ", ".join(regressed) in prompt


def test_it_tells_the_agent_what_passes_must_keep_passing_and_what_regressed(suite: dict[str, Task]) -> None:
    task = suite["roman"]
    redactor = Redactor.for_secrets(task.secrets())
    failure = Failure(
        attempt=4,
        failure_class="AssertionError",
        failed_checks=("check_2", "check_3", "check_4", "check_5"),
        checks_passed=1,
        checks_total=5,
        regressed_checks=("check_2", "check_3", "check_4"),
    )

    prompt = build_prompt(task.description, [failure], redactor, step_limit=6)

    assert "Hidden checks passing: 1 of 5. They must keep passing" in prompt
    assert "Failing hidden checks: check_2, check_3, check_4, check_5." in prompt
    assert "Regression: check_2, check_3, check_4 passed in an earlier attempt and fail now." in prompt
    for check in task.checks:
        assert check.about is not None and check.about not in prompt
        assert check.code is not None and not _readable_in(check.code, prompt)


def test_it_says_nothing_about_passes_when_the_checks_did_not_run() -> None:
    prompt = build_prompt(
        "Write f.",
        [Failure(1, "FormatError", ("format",), ("not valid Python",))],
        Redactor.for_secrets([]),
        step_limit=3,
    )
    assert "passing" not in prompt and "Regression" not in prompt
