"""The redactor against the reversible encodings and look-alikes a reviewer can
put a check's ``about`` text into when writing a send-back note: reversed
text, base64, hex, rot13, Cyrillic look-alike letters, leetspeak, pieces
with filler between them, and chains of these. Each must be withheld from
the resumed prompt; text that shares nothing with the checks must still
pass. The encodings are made here, independently of the redactor."""

from __future__ import annotations

import base64
import codecs
import textwrap
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loops.hints import REDACTED, Redactor, Resume, build_prompt
from loops.spec import builtin_suite

ABOUTS = [check.about for task in builtin_suite() for check in task.checks if check.about]

CYRILLIC = str.maketrans("aceopxyiAВCEHKMOPTXsjh", "асеорхуіАВСЕНКМОРТХѕјһ")
LEET = str.maketrans("aeiostAEIOST", "43105743105+")
FILLER = ["zq", "~~", " (wx) ", " ... ", "kj", " #v# "]


def chunks(text: str, size: int = 10, filler: str = " zz ") -> str:
    return filler.join(text[i : i + size] for i in range(0, len(text), size))


ENCODINGS: dict[str, Callable[[str], str]] = {
    "reversed": lambda s: s[::-1],
    "base64": lambda s: base64.b64encode(s.encode()).decode(),
    "base64_urlsafe": lambda s: base64.urlsafe_b64encode(s.encode()).decode().rstrip("="),
    "base64_wrapped": lambda s: "\n".join(textwrap.wrap(base64.b64encode(s.encode()).decode(), 20)),
    "hex": lambda s: s.encode().hex(),
    "hex_spaced": lambda s: " ".join(f"{b:02x}" for b in s.encode()),
    "hex_0x": lambda s: ", ".join(f"0x{b:02X}" for b in s.encode()),
    "rot13": lambda s: codecs.encode(s, "rot13"),
    "cyrillic": lambda s: s.translate(CYRILLIC),
    "leetspeak": lambda s: s.translate(LEET),
    "chunks_10": chunks,
    "chunks_7_dots": lambda s: chunks(s, 7, "..."),
}
LIGHT = ["reversed", "rot13", "cyrillic", "leetspeak", "chunks_10"]

word = st.sampled_from(
    [
        "keeps",
        "value",
        "inside",
        "range",
        "raises",
        "below",
        "lowers",
        "above",
        "single",
        "subtractive",
        "four",
        "nine",
        "tens",
        "followed",
        "forty",
        "rejects",
        "negative",
        "numbers",
        "empty",
        "string",
        "returns",
        "sorted",
        "unique",
        "whitespace",
        "trailing",
        "leading",
        "zero",
    ]
)
about_text = st.one_of(
    st.sampled_from(ABOUTS),
    st.lists(word, min_size=4, max_size=9, unique=True).map(" ".join),
).filter(lambda s: len(s) >= 20)


def letters(text: str) -> int:
    return sum(ch.isalnum() for ch in text)


def resumed_note(about: str, note: str) -> str:
    redactor = Redactor.for_secrets([about])
    return build_prompt("Write the function.", [], redactor, step_limit=3, resume=Resume("def f(): ...", note))


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_each_reported_encoding_of_an_about_text_is_withheld(encoding: str) -> None:
    about = "tens followed by a subtractive four"
    note = f"please check: {ENCODINGS[encoding](about)} thanks"
    prompt = resumed_note(about, note)
    assert f"The reviewer's note: {REDACTED}" in prompt, encoding


@settings(max_examples=250, deadline=None, derandomize=True)
@given(
    about=about_text,
    chain=st.lists(st.sampled_from(sorted(ENCODINGS)), min_size=1, max_size=2),
    before=st.sampled_from(["", "see ", "Reviewer says: ", "hint -> "]),
    after=st.sampled_from(["", " ok", ". Fix it.", "\n-- r"]),
)
def test_an_about_text_under_any_chain_of_encodings_is_withheld(
    about: str, chain: list[str], before: str, after: str
) -> None:
    if any(name.startswith("chunks") for name in chain) and letters(about) < 24:
        return  # a short text in two pieces is a documented limit (loops/README.md, "Hints")
    if chain[0].startswith(("base64", "hex")) and chain[-1] == "leetspeak":
        return  # leetspeak over base64 or hex is lossy ("4" is both): no reader can undo it either
    encoded = about
    for name in chain:
        # a chunked or spaced text inside a light encoding is what a reader undoes last
        if name.startswith("chunks") and chain.index(name) != 0:
            continue
        encoded = ENCODINGS[name](encoded)
    assert Redactor.for_secrets([about]).redact(f"{before}{encoded}{after}") == REDACTED, chain


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    about=about_text,
    light=st.lists(st.sampled_from(LIGHT), min_size=1, max_size=3, unique=True),
    filler=st.sampled_from(FILLER),
)
def test_look_alikes_and_leetspeak_mixed_with_pieces_are_withheld(about: str, light: list[str], filler: str) -> None:
    if "chunks_10" in light and letters(about) < 24:
        return  # a short text in two pieces is a documented limit (loops/README.md, "Hints")
    encoded = about
    for name in sorted(light, key=lambda n: n == "chunks_10"):  # pieces last: filler is not part of the copy
        encoded = chunks(encoded, 10, filler) if name == "chunks_10" else ENCODINGS[name](encoded)
    assert Redactor.for_secrets([about]).redact(encoded) == REDACTED, light


# --- what must still pass --------------------------------------------------------------------

BENIGN = [
    "the loop never ends when n is 0: add a base case",
    "use sorted() and drop duplicates first",
    "sha256 is 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "token dGhpcyBpcyBub3QgaXQ= was only an example",
    "Привет! Ошибка в цикле, посмотри ещё раз.",
    "l33t c0d3rs w1ll l0v3 th1s",
    "Traceback: test_it_drops_an_expected_value_shown_alone failed at line 12",
    "AssertionError: is_even returned True for 3",
    # a long log of paths and identifiers: many base64-looking runs, none of them a check
    "\n".join(f'File "/srv/candidate_{i}.py", line {i}, in compute_the_thing_{i}' for i in range(40)),
]


@pytest.mark.parametrize("fragment", BENIGN)
def test_notes_that_share_nothing_with_the_checks_pass(fragment: str) -> None:
    redactor = Redactor.for_secrets([s for task in builtin_suite() for s in task.secrets()])
    assert redactor.redact(fragment) == fragment


other_word = st.sampled_from(
    [
        "please",
        "handle",
        "the",
        "case",
        "where",
        "input",
        "list",
        "is",
        "empty",
        "and",
        "return",
        "early",
        "instead",
        "of",
        "crashing",
        "also",
        "rename",
        "variable",
        "make",
        "function",
        "shorter",
        "comments",
        "help",
    ]
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(about=about_text, note=st.lists(other_word, min_size=3, max_size=14).map(" ".join))
def test_a_note_in_other_words_passes(about: str, note: str) -> None:
    """A note built from words the check does not use reaches the prompt: the
    redactor withholds copies, not every note."""
    assert Redactor.for_secrets([about]).redact(note) == note
