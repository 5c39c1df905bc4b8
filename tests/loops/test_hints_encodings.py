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
import unicodedata
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


# --- short secrets encoded, look-alike capitals, accents, invisible characters ------------------

# Short hidden texts as the built-in checks have them: expected values and literals.
SHORT = ["XIV", "100", "hello", "rhythm", "queue", "a single I", "hello-world", "Fizz", "ready-set-go", "wxyz", "subtr"]
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"]


def sprinkle(text: str, marks: list[int], char: str) -> str:
    """``text`` with ``char`` put in before each position in ``marks``."""
    return "".join(char + ch if i in marks else ch for i, ch in enumerate(text))


SHORT_ENCODINGS: dict[str, Callable[[bytes], str]] = {
    "base64": lambda b: base64.b64encode(b).decode(),
    "base64_urlsafe_unpadded": lambda b: base64.urlsafe_b64encode(b).decode().rstrip("="),
    "base64_backwards": lambda b: base64.b64encode(b).decode()[::-1],
    "hex": lambda b: b.hex(),
    "hex_upper": lambda b: b.hex().upper(),
    "hex_escapes": lambda b: "".join(f"\\x{x:02x}" for x in b),
}


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    secret=st.sampled_from(SHORT),
    case=st.sampled_from([str, str.upper, str.capitalize, str.swapcase]),
    reverse=st.booleans(),
    prefix=st.sampled_from(["", "x", "ab", "try ", "value="]),
    suffix=st.sampled_from(["", "!", " please"]),
    encoding=st.sampled_from(sorted(SHORT_ENCODINGS)),
    around=st.sampled_from([("", ""), ("please look at ", " and fix it"), ("decode this: ", "\n-- r")]),
    invisible=st.tuples(st.sampled_from(INVISIBLE), st.lists(st.integers(1, 30), max_size=3)),
)
def test_a_short_secret_in_base64_or_hex_is_withheld_at_every_alignment(
    secret: str,
    case: Callable[[str], str],
    reverse: bool,
    prefix: str,
    suffix: str,
    encoding: str,
    around: tuple[str, str],
    invisible: tuple[str, list[int]],
) -> None:
    """A short secret's base64 is shorter than any run worth decoding, so it
    was read nowhere; with a prefix of 0, 1 or 2 bytes it starts at each of
    the three places in a base64 group, and zero-width characters inside the
    encoding are invisible to a reader."""
    shown = case(secret)[::-1] if reverse else case(secret)
    encoded = sprinkle(SHORT_ENCODINGS[encoding]((prefix + shown + suffix).encode()), *invisible[::-1])
    note = f"{around[0]}{encoded}{around[1]}"
    assert Redactor.for_secrets([secret]).redact(note) == REDACTED, note


@pytest.mark.parametrize("about", ["tens followed by a subtractive four", "keeps a value inside the range"])
@pytest.mark.parametrize("invisible", INVISIBLE)
def test_invisible_characters_inside_base64_or_hex_of_a_long_secret_are_withheld(about: str, invisible: str) -> None:
    for encoded in (base64.b64encode(about.encode()).decode(), about.encode().hex()):
        note = "see " + invisible.join(encoded[i : i + 4] for i in range(0, len(encoded), 4))
        assert Redactor.for_secrets([about]).redact(note) == REDACTED, (invisible, encoded)


@pytest.mark.parametrize("about", ["tens followed by a subtractive four", "keeps a value inside the range"])
def test_base64_between_words_of_a_note_is_withheld(about: str) -> None:
    """With the note's spaces removed, the words around a one-line base64
    were glued to it and the whole decoded to noise."""
    encoded = base64.b64encode(about.encode()).decode()
    wrapped = "\n".join(textwrap.wrap(encoded, 16))
    for note in (
        f"please look at this one {encoded.rstrip('=')} and fix it now",
        f"Please fix the thing that this points at, namely this one\n{wrapped}\nthanks a lot for all of it",
    ):
        assert Redactor.for_secrets([about]).redact(note) == REDACTED, note


# Capital letters of other scripts that look like Latin capitals, but whose lower
# case does not look like the Latin lower case (Greek "Ν" is "N", its "ν" reads "v").
CAPITALS = str.maketrans("ABEHIKMNOPTXYZ", "ΑΒΕΗΙΚΜΝΟΡΤΧΥΖ") | str.maketrans("ABCEHKMOPTXY", "АВСЕНКМОРТХУ")
ACCENTS = ["\u0301", "\u0300", "\u0308", "\u0302", "\u0303", "\u030c", "\u0327", "\u0336"]
SMALL_CAPITALS = str.maketrans("abcdefghijklmnoprstuwyz", "ᴀʙᴄᴅᴇꜰɢʜɪᴊᴋʟᴍɴᴏᴘʀꜱᴛᴜᴡʏᴢ")

letter_form = st.sampled_from(["as is", "capital", "look-alike capital", "accent", "small capital"])


def disguise(text: str, forms: list[str], accents: list[str]) -> str:
    out = []
    for i, ch in enumerate(text):
        form = forms[i % len(forms)]
        if form == "capital":
            ch = ch.upper()
        elif form == "look-alike capital":
            ch = ch.upper().translate(CAPITALS)
        elif form == "accent" and ch.isalpha():
            ch = unicodedata.normalize("NFC", ch + accents[i % len(accents)])
        elif form == "small capital":
            ch = ch.translate(SMALL_CAPITALS)
        out.append(ch)
    return "".join(out)


@settings(max_examples=250, deadline=None, derandomize=True)
@given(
    secret=st.one_of(st.sampled_from(SHORT), about_text),
    forms=st.lists(letter_form, min_size=1, max_size=5),
    accents=st.lists(st.sampled_from(ACCENTS), min_size=1, max_size=3),
)
def test_look_alike_capitals_accents_and_small_capitals_are_withheld(
    secret: str, forms: list[str], accents: list[str]
) -> None:
    """Mixed case, Greek and Cyrillic capitals (read before case folding),
    accents added as combining marks or precomposed, and small capitals."""
    note = "see " + disguise(secret, forms, accents) + " ok"
    assert Redactor.for_secrets([secret]).redact(note) == REDACTED, note


@pytest.mark.parametrize("about", ["café crème brûlée", "naïve señor façade"])
def test_a_secret_with_accents_is_withheld_without_them(about: str) -> None:
    stripped = "".join(ch for ch in unicodedata.normalize("NFD", about) if not unicodedata.combining(ch))
    assert Redactor.for_secrets([about]).redact(f"hint: {stripped}") == REDACTED


@pytest.mark.parametrize(
    "note",
    ["try 1OO", "try l00", "the answer is l0O", "0x64 it is", "use 0o144", "0b1100100", "MTAw", "313030"],
)
def test_a_number_in_look_alike_letters_or_another_base_is_withheld(note: str) -> None:
    assert Redactor.for_secrets(["assert to_bin(4) == '100'", "100"]).redact(note) == REDACTED, note


def test_a_secret_under_three_letters_is_not_looked_for_and_three_are() -> None:
    """The documented minimum (README, "What the redactor catches, and what it cannot"): "IV"
    or "42" alone would match nearly every note."""
    redactor = Redactor.for_secrets(["IV", "42"])
    assert redactor.redact("see IV and 42") == "see IV and 42"
    assert Redactor.for_secrets(["XIV"]).redact("see xiv") == REDACTED


ORDINARY = [
    "Le résultat est faux quand la liste est vide : ajoute un cas de base.",
    "¿Por qué devuelve None? Revisa el bucle, por favor.",
    "Η συνάρτηση δεν τερματίζει όταν η λίστα είναι κενή.",
    "ΠΡΟΣΟΧΗ: ΕΛΕΓΞΕ ΤΗΝ ΑΝΑΔΡΟΜΗ",
    "Функция падает на пустом списке. ПРОВЕРЬ ГРАНИЦЫ.",
    "ᴘʟᴇᴀꜱᴇ ᴄᴀʀᴇ ᴀʙᴏᴜᴛ ᴛʜᴇ ᴇᴍᴘᴛʏ ᴄᴀꜱᴇ",
    "costs 10 oil drums; a violin has 4 strings",
    "wow! that is c++ | not python + it never ends",
    "request id 3f2a9c1e-77b0-4c1d-9e2f-0a1b2c3d4e5f, commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
    "token eyJhbGciOiJIUzI1NiJ9 in the header",
    "naïve café façade, résumé and coöperate",
]


@pytest.mark.parametrize("note", ORDINARY)
def test_an_ordinary_note_with_accents_capitals_and_identifiers_passes(note: str) -> None:
    redactor = Redactor.for_secrets([s for task in builtin_suite() for s in task.secrets()])
    assert redactor.redact(note) == note


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    about=about_text,
    note=st.lists(other_word, min_size=3, max_size=14).map(" ".join),
    forms=st.lists(letter_form, min_size=1, max_size=5),
    accents=st.lists(st.sampled_from(ACCENTS), min_size=1, max_size=3),
)
def test_a_note_in_other_words_passes_in_any_letters(
    about: str, note: str, forms: list[str], accents: list[str]
) -> None:
    """Reading accents, capitals and look-alikes does not turn other words into a copy."""
    disguised = disguise(note, forms, accents)
    assert Redactor.for_secrets([about]).redact(disguised) == disguised


MORE_ENCODINGS: dict[str, Callable[[str], str]] = {
    "quoted_printable": lambda s: "".join(f"={b:02X}" for b in s.encode()),
    "base64_of_utf16": lambda s: base64.b64encode(s.encode("utf-16-le")).decode(),
    "base64_of_utf16_with_bom": lambda s: base64.b64encode(s.encode("utf-16")).decode(),
    "hex_of_utf16_be": lambda s: s.encode("utf-16-be").hex(),
    "decimal_codes": lambda s: " ".join(str(ord(ch)) for ch in s),
    "decimal_codes_commas": lambda s: ", ".join(str(ord(ch)) for ch in s),
    "octal_codes": lambda s: " ".join(f"{ord(ch):o}" for ch in s),
    "binary_codes": lambda s: " ".join(f"{ord(ch):08b}" for ch in s),
}


@pytest.mark.parametrize("secret", ["hello", "rhythm", "tens followed by a subtractive four"])
@pytest.mark.parametrize("encoding", sorted(MORE_ENCODINGS))
def test_quoted_printable_utf16_and_character_codes_are_withheld(secret: str, encoding: str) -> None:
    note = f"please look at {MORE_ENCODINGS[encoding](secret)} and fix it"
    assert Redactor.for_secrets([secret]).redact(note) == REDACTED, note


@pytest.mark.parametrize(
    "note",
    [
        "it fails on lines 12, 48 and 97 of the test run",
        "expected [10, 20, 30] but got [10, 20, 31]",
        "ports 8080 8443 9090 are taken",
        "see RFC 2045 = quoted printable, x=41 y=42",
    ],
)
def test_ordinary_numbers_and_equals_signs_pass(note: str) -> None:
    redactor = Redactor.for_secrets([s for task in builtin_suite() for s in task.secrets()])
    assert redactor.redact(note) == note


def caesar(text: str, shift: int) -> str:
    return "".join(
        chr((ord(ch) - base + shift) % 26 + base) if ch.isascii() and ch.isalpha() else ch
        for ch in text
        for base in [ord("a") if ch.islower() else ord("A")]
    )


@settings(max_examples=150, deadline=None, derandomize=True)
@given(about=about_text, shift=st.integers(1, 25), backwards=st.booleans())
def test_a_long_secret_under_any_caesar_shift_is_withheld(about: str, shift: int, backwards: bool) -> None:
    """rot13 was the only shift read: rot1 or rot7 of an about text reached the prompt."""
    shifted = caesar(about, shift)
    note = f"decode this: {shifted[::-1] if backwards else shifted} (shift {shift})"
    assert Redactor.for_secrets([about]).redact(note) == REDACTED, note


def test_a_secret_in_another_script_builds_a_redactor_and_is_withheld() -> None:
    """Letters outside a to z have no Caesar shift: reading one as if it had
    raised KeyError while the redactor was built, before any note was read."""
    about = "η λίστα επιστρέφει κενή τιμή"
    assert Redactor.for_secrets([about]).redact(f"hint: {about}") == REDACTED


def test_a_number_with_leading_zeros_is_not_looked_for_in_other_bases() -> None:
    """ "007" in hex would be "0x7", which starts many an address."""
    redactor = Redactor.for_secrets(["007"])
    assert redactor.redact("segfault at 0x7ffd1234") == "segfault at 0x7ffd1234"
    assert redactor.redact("try 007") == REDACTED
