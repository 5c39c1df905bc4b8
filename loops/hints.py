"""Assertion-safe hints (ARCHITECTURE.md rule 5).

The next prompt is rebuilt from what the agent did: its failure class, which
check ids failed, the attempt count, and what its own code raised or printed.
Every fragment passes :func:`redact`, which drops the fragment whole when any
hidden check text shows up in it, exact or transformed: quoting (repr, JSON,
shell), ANSI colour codes, line wrapping, diff and pytest prefixes,
whitespace, zero-width characters and case changes, HTML entities, percent
and unicode escapes; the common reversible encodings (base64, hex, rot13,
reversed text), a short secret's base64 and hex included; look-alike letters
(NFKC, then a confusables skeleton: Cyrillic "а" reads as Latin "a", Greek
"Ν" as "N"), accents and leetspeak ("4ss3rt"); and a copy cut into pieces
with filler between them. Dropping rather than cutting out is the fail-closed choice: a
half-removed copy is still a leak. There is deliberately no switch to turn
this off.

What no redactor can catch, this one included: a paraphrase (the same
meaning in other words), a translation, a hint ("the edge case is zero"), an
encoding it does not know (a cipher with a key, a picture in ASCII art), a
copy cut into pieces too small or too few to tell from chance (see
``CHUNK``), and a secret shorter than ``MIN_SECRET`` (README.md, "What the
redactor catches, and what it cannot"). Those are for the people who write send-back notes, not for
string matching (loops/README.md, "Hints").
"""

from __future__ import annotations

import base64
import binascii
import codecs
import functools
import html
import itertools
import json
import re
import unicodedata
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote, unquote_plus

from confusable_homoglyphs.confusables import confusables_data

REDACTED = "[withheld: it would reveal a hidden check]"

# A hidden text shorter than this (after normalising) is not looked for on its
# own: "4" or "ok" would match nearly everything. Longer texts are also matched
# by any window of this many characters, so a truncated or partly mangled copy
# still counts as a copy.
MIN_SECRET = 3
WINDOW = 12
_DECODE_DEPTH = 4
# A copy cut into pieces with filler between them: the secret's CHUNK-letter
# slices found in a fragment are marked on the secret; when they cover at
# least CHUNK_COVER of it in at least CHUNK_RUNS separate runs (two for a
# secret of 2 * WINDOW letters or more, such as an ``about`` sentence), it is
# a copy. Fewer runs are left alone: a function's name and "assert" in an
# error message are two runs of a short check.
CHUNK = 5
CHUNK_COVER = 0.6
CHUNK_RUNS = 3
# Base64 and hex are looked for in runs at least this long (12 bytes).
_ENCODED_RUN = 16
# Past this many encoded runs in one fragment it is dropped unread (a long log
# of paths and identifiers has a few hundred).
_MAX_ENCODED_RUNS = 5000
# A decoding is read only if at least this share of it is printable text: a
# run decoded at the wrong alignment, or an identifier that merely looks like
# base64, gives bytes that are mostly not.
_PRINTABLE_SHARE = 0.8
# Past this many readings of one fragment the redactor stops looking and
# drops the fragment: a fragment that needs more unpacking is not a hint.
_MAX_READINGS = 500

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|\x9b[0-9;?]*[@-~]")
# What is left of a colour code once its escape byte was lost or escaped.
_ANSI_RESIDUE = re.compile(r"\[[0-9;]*m")
_LINE_PREFIX = re.compile(r"^(?:[ \t]*(?:E(?=\s)|[+\->|]+))+", re.MULTILINE)
_WHITESPACE = re.compile(r"\s+")


def _nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def _strip_ansi(text: str) -> str:
    # Repeat until stable: colour codes wrapped around colour codes.
    previous = None
    while previous != text:
        previous = text
        text = _ANSI.sub("", text)
    # Only then the residue of codes whose escape byte was lost, and stray
    # escape bytes: removing residue first would orphan real escape bytes.
    return _ANSI_RESIDUE.sub("", text).replace("\x1b", "").replace("\x9b", "")


def _unwrap(text: str) -> str:
    """Undo line wrapping and diff/pytest prefixes: drop the prefixes, then
    every whitespace character, so an escape split across lines rejoins."""
    return _WHITESPACE.sub("", _LINE_PREFIX.sub("", text))


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    try:
        raw = text.encode("latin-1", "backslashreplace")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return codecs.decode(raw, "unicode_escape")
    except (UnicodeDecodeError, ValueError):
        # A malformed escape somewhere: read it with the backslashes dropped.
        return text.replace("\\", "")


_QUOTED_PRINTABLE = re.compile(r"=([0-9A-Fa-f]{2})")


def _unquote_printable(text: str) -> str:
    """Quoted-printable escapes (``=68=65``) undone, as UTF-8 like %-escapes."""
    if "=" not in text:
        return text
    return unquote(_QUOTED_PRINTABLE.sub(r"%\1", text.replace("%", "%25")))


def _json_string(text: str) -> str:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, str) else text


# Every way a reader could peel one layer off a fragment. Casefolding is a
# layer too: an upper-cased escape (\\U0061, %2f) only decodes once lowered.
_LAYERS: tuple[Callable[[str], str], ...] = (
    _nfkc,
    _strip_ansi,
    _unwrap,
    html.unescape,
    unquote,
    unquote_plus,
    _unquote_printable,
    _unescape,
    _json_string,
    str.casefold,
)


def readings(text: str) -> set[str] | None:
    """The fragment as a reader could decode it, up to a few layers deep, in
    any order; None when there are too many readings to check them all."""
    seen = {text}
    frontier = [text]
    for _ in range(_DECODE_DEPTH):
        found = []
        for item in frontier:
            for layer in _LAYERS:
                peeled = layer(item)
                # Cleaning up colour codes and compatibility forms costs no
                # depth: they wrap any layer and hide nothing of their own.
                for reading in (peeled, _strip_ansi(_nfkc(peeled))):
                    if reading not in seen:
                        seen.add(reading)
                        found.append(reading)
                        if len(seen) > _MAX_READINGS:
                            return None
        if not found:
            break
        frontier = found
    return seen


# Letters that the confusables data leaves out but that read as a Latin letter:
# small capitals ("ʜᴇʟʟᴏ") and the regional indicator letters ("🇭🇪🇱🇱🇴").
_NAMED_LETTER = re.compile(r"(?:LATIN LETTER SMALL CAPITAL|REGIONAL INDICATOR SYMBOL LETTER) ([A-Z])")
_LETTER_LOOKALIKES = {
    code: match.group(1)
    for block in (range(0x0250, 0x02B0), range(0x1D00, 0x1D80), range(0xA730, 0xA7B0), range(0x1F1E6, 0x1F200))
    for code in block
    if (match := _NAMED_LETTER.fullmatch(unicodedata.name(chr(code), "")))
}


@functools.cache
def _skeleton() -> dict[int, str]:
    """Each non-ASCII character that Unicode's confusables data says looks like
    an ASCII letter or digit, mapped to it (a letter preferred), lower-cased:
    Cyrillic "а" and "о", Greek "ο", Armenian "օ" read as "a" and "o"."""
    return {code: target.lower() for code, target in _skeleton_cased().items()}


@functools.cache
def _skeleton_cased() -> dict[int, str]:
    """``_skeleton`` keeping the case of the look-alike (Cyrillic "А" reads as
    "A"), for case-sensitive encodings such as base64."""
    table: dict[int, str] = dict(_LETTER_LOOKALIKES)
    for char, glyphs in confusables_data.items():
        if len(char) != 1 or char.isascii():
            continue
        targets = [g["c"] for g in glyphs if len(g["c"]) == 1 and g["c"].isascii() and g["c"].isalnum()]
        letters = [t for t in targets if t.isalpha()] or targets
        if letters:
            table[ord(char)] = letters[0]
    return table


# Leetspeak and its look-alike digits and signs: each group reads as one letter
# (both sides are folded alike, so "1" matches "i" and "l" and nothing is lost).
_LEET_SIGNS = str.maketrans({"@": "a", "$": "s", "!": "i", "|": "i", "+": "t", "€": "e"})
_FOLD = str.maketrans("0123456789l", "oizeasgtbgi")
_ROT13 = str.maketrans("abcdefghijklmnopqrstuvwxyz", "nopqrstuvwxyzabcdefghijklm")


def normalise(text: str) -> str:
    """The letters and digits of ``text``, case-folded, look-alike letters read
    as the ASCII ones they copy, without colour codes, quoting, punctuation
    or whitespace, and without accents (combining marks added or precomposed:
    "hélló" reads as "hello"). A capital look-alike is read before case
    folding: Greek "Ν" copies "N", but its lower case "ν" reads as "v"."""
    text = _strip_ansi(_nfkc(text)).translate(_skeleton_cased()).casefold()
    text = unicodedata.normalize("NFKD", text).translate(_skeleton()).translate(_LEET_SIGNS)
    return "".join(ch for ch in text if ch.isalnum())


def fold(flat: str) -> str:
    """``normalise``'s output with leetspeak folded: every digit to the letter it
    stands for (``0`` to ``o``, ``1`` and ``l`` to ``i``, ``3`` to ``e``, ...)."""
    return flat.translate(_FOLD)


_DIGIT_LOOKALIKES = str.maketrans("oil", "011")
# A word of digits and the letters that look like them, with a digit in it.
_DIGITS_AMONG_LETTERS = re.compile(r"(?<![^\W_])[0-9oil]*[0-9][0-9oil]*(?![^\W_])")


def _views(flat: str) -> set[str]:
    """How a reader could write a secret's letters: as they are, reversed,
    rot13, or both; each folded."""
    rot = flat.translate(_ROT13)
    return {fold(view) for view in (flat, flat[::-1], rot, rot[::-1])}


_B64_RUN = re.compile(rf"[A-Za-z0-9+/_-]{{{_ENCODED_RUN},}}")
_HEX_SEPARATORS = re.compile(r"0[xX]|\\x|[\s,:;%.-]")
_B64_WORD = re.compile(r"[A-Za-z0-9+/_-]{4,}")
# Three or more numbers in a row: character codes ("104 101 108", "1101000, 1100101").
_CODES = re.compile(r"(?<!\d)\d{2,8}(?:[\s,;]+\d{2,8}){2,}(?!\d)")
_NUMBER = re.compile(r"\d+")
_HEX_SHORT_RUN = re.compile(r"[0-9a-fA-F]{6,}")


def _drop_invisible(text: str) -> str:
    """``text`` without format characters (zero-width space and joiners, soft
    hyphen, word joiner): a reader does not see them, so they split nothing."""
    if text.isascii():
        return text
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


def _encoded_runs(text: str, short_words: bool = True) -> set[tuple[str, str]]:
    """The base64-like and hex-like runs of ``text``, whitespace, invisible
    characters and hex separators (``0x``, ``\\x``, commas, colons) removed
    first, and look-alike letters read as the ASCII ones they copy; words of
    base64 under 16 characters only with ``short_words``."""
    text = _drop_invisible(_nfkc(text)).translate(_skeleton_cased())
    # Both with whitespace removed (base64 wrapped over lines) and as written:
    # removing it glues a one-line base64 to the words around it, which then
    # decode to noise in front of the text.
    runs = {("b64", run) for run in _B64_RUN.findall(_WHITESPACE.sub("", text))}
    # Words as written are decoded down to 4 characters: a short secret's
    # base64 in a case of its own ("aEVsTG8=" is "hElLo"), which no pattern
    # of ``_encoded_patterns`` lists. Hex down to 3 bytes.
    words = _B64_WORD.findall(text)
    runs.update(("b64", run) for run in words if short_words or len(run) >= _ENCODED_RUN)
    runs.update(("hex", run) for run in _HEX_SHORT_RUN.findall(_HEX_SEPARATORS.sub("", text)))
    runs.update(("codes", run) for run in _CODES.findall(text))
    return runs


def _decode(kind: str, run: str) -> list[str]:
    """A run decoded at every alignment (a run may start mid-group, after a
    prefix that happened to use the same alphabet)."""
    if kind == "codes":
        return _decode_codes(run)
    raws: list[bytes] = []
    if kind == "hex":
        for start in (0, 1):
            part = run[start:]
            raws.append(bytes.fromhex(part[: len(part) - len(part) % 2]))
    else:
        standard = run.replace("-", "+").replace("_", "/")
        for start in range(4):
            part = standard[start:]
            # An unpadded last group of 2 or 3 characters still holds 1 or 2 bytes.
            part = part[:-1] if len(part) % 4 == 1 else part + "=" * (-len(part) % 4)
            try:
                raws.append(base64.b64decode(part, validate=True))
            except (binascii.Error, ValueError):
                continue
    return [text for raw in raws for text in _bytes_as_text(raw)]


def _bytes_as_text(raw: bytes) -> list[str]:
    """``raw`` read as UTF-8, and as UTF-16 (either byte order, either start)
    when a quarter of it or more is zero bytes, as ASCII in UTF-16 is."""
    out = [raw.decode("utf-8", "replace")]
    if raw and 4 * raw.count(0) >= len(raw):
        for part in (raw, raw[1:]):
            part = part[: len(part) - len(part) % 2]
            out += [part.decode("utf-16-le", "replace"), part.decode("utf-16-be", "replace")]
    return out


def _decode_codes(run: str) -> list[str]:
    """A run of numbers read as character codes: in decimal, and in octal or
    binary when every number can be one."""
    numbers = _NUMBER.findall(run)
    out = []
    for base, fits in (
        (10, True),
        (8, all(set(n) <= set("01234567") for n in numbers)),
        (2, all(set(n) <= {"0", "1"} and len(n) >= 7 for n in numbers)),
    ):
        if fits:
            codes = [int(n, base) for n in numbers]
            out.append("".join(chr(c) if 0 < c < 0x110000 else "\ufffd" for c in codes))
    return out


# A short secret's base64 is shorter than the runs that are decoded: it is
# looked for the other way round, as the secret's own encodings. A pattern is
# at least this long: a 3-byte secret's base64 after a 1- or 2-byte prefix
# fixes only three characters, too few to tell from chance.
_MIN_PATTERN = 4
_TURNED_WORDS_UP_TO = 1000
_B64_ALPHABET = str.maketrans("-_", "+/")


def _b64_patterns(raw: bytes) -> set[str]:
    """The base64 characters that ``raw`` alone fixes, at each of the three
    places it can start in a 3-byte group (whatever came before or after it)."""
    out = set()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + raw + bytes(2)).decode()
        first = -(-8 * offset // 6)  # the first character with no bit of the prefix
        last = (8 * offset + 8 * len(raw)) // 6  # the first with a bit of what follows
        pattern = encoded[first:last]
        if len(pattern) >= _MIN_PATTERN:
            out.add(pattern)
    return out


def _encoded_patterns(secret: str) -> tuple[set[str], set[str]]:
    """The base64 patterns (case kept) and hex (lower case) of a short secret,
    written as is, in lower, upper or title case, reversed; each pattern also
    written backwards and in rot13."""
    b64: set[str] = set()
    hexes: set[str] = set()
    for text in {secret, secret.lower(), secret.upper(), secret.capitalize(), secret.title()}:
        for view in (text, text[::-1]):
            raw = view.encode()
            b64 |= _b64_patterns(raw)
            hexes.add(raw.hex())
    b64 |= {p[::-1] for p in b64} | {codecs.encode(p, "rot13") for p in b64}
    hexes |= {h[::-1] for h in hexes}
    return b64, hexes


_PRINTABLE_STRETCH = re.compile(rf"[^\ufffd\x00-\x1f\x7f-\x9f]{{{WINDOW},}}")


def _has_pattern(text: str, index: dict[str, list[str]]) -> bool:
    """Whether ``text`` holds a pattern of ``index`` (``Redactor._pattern_index``)."""
    starts = {text[i : i + _MIN_PATTERN] for i in range(len(text) - _MIN_PATTERN + 1)}
    return any(pattern in text for key in starts & index.keys() for pattern in index[key])


def _is_text(decoded: str) -> bool:
    """Whether a decoding reads as text: long enough, and mostly printable
    characters (a byte that is not UTF-8 reads as U+FFFD, which is not)."""
    if len(decoded) < MIN_SECRET:
        return False
    if decoded.isprintable() and "\ufffd" not in decoded:
        return True
    if decoded.count("\ufffd") > (1 - _PRINTABLE_SHARE) * len(decoded):
        return False
    readable = sum(ch.isprintable() and ch != "\ufffd" for ch in decoded)
    return readable >= _PRINTABLE_SHARE * len(decoded)


def _decoded_readings(texts: Iterable[str], turned: Iterable[str] = ()) -> list[str] | None:
    """What the base64 and hex runs of ``texts`` and ``turned`` decode to,
    each also with its escapes undone, and what those decode to in turn
    (base64 of base64); None when there are too many runs to read them all.
    ``turned`` (the texts reversed or in rot13) longer than
    ``_TURNED_WORDS_UP_TO`` are not read word by word under 16 characters:
    a short secret's base64 turned round is one of its patterns
    (``_encoded_patterns``) but for a 3-character secret after a prefix, and
    every word of a long log read four ways more would cost much."""
    out: list[str] = []
    seen: set[tuple[str, str]] = set()
    layer = [(text, True) for text in texts] + [(text, len(text) <= _TURNED_WORDS_UP_TO) for text in turned]
    for _ in range(_DECODE_DEPTH // 2):
        runs: set[tuple[str, str]] = set()
        for text, short_words in layer:
            runs |= _encoded_runs(text, short_words) - seen
            if len(runs) + len(seen) > _MAX_ENCODED_RUNS:
                return None
        seen |= runs
        layer = []
        for kind, run in runs:
            for decoded in _decode(kind, run):
                # Words glued to wrapped base64 decode to noise around the text:
                # a long printable stretch of a decoding is read on its own.
                for text in [decoded] if _is_text(decoded) else _PRINTABLE_STRETCH.findall(decoded):
                    layer.extend((t, True) for t in {text, _unescape(text), unquote(text), html.unescape(text)})
        out.extend(text for text, _ in layer)
        if not layer:
            break
    return out


@dataclass(frozen=True)
class Redactor:
    """Knows the hidden texts of one task; decides which fragments may pass.
    Every text is kept folded (``fold``), in each of its views (``_views``)."""

    windows: frozenset[str]  # every WINDOW-long slice of a long secret
    short: tuple[str, ...]  # secrets between MIN_SECRET and WINDOW long, with a letter
    numbers: tuple[str, ...] = ()  # short secrets of digits only, matched unfolded
    long: tuple[str, ...] = ()  # long secrets whole, for pieces with filler between
    long_grams: tuple[frozenset[str], ...] = ()  # the CHUNK-letter slices of each of ``long``
    b64_patterns: frozenset[str] = frozenset()  # the base64 of each short secret (``_encoded_patterns``)
    hex_patterns: frozenset[str] = frozenset()  # and its hex
    shifted: frozenset[str] = frozenset()  # ``_shifts`` of every WINDOW letters of a long secret, either way

    @classmethod
    def for_secrets(cls, secrets: Iterable[str]) -> Redactor:
        windows: set[str] = set()
        short: set[str] = set()
        numbers: set[str] = set()
        long: set[str] = set()
        b64: set[str] = set()
        hexes: set[str] = set()
        shifted: set[str] = set()
        for secret in secrets:
            if MIN_SECRET <= len(normalise(secret)) <= WINDOW:
                more_b64, more_hex = _encoded_patterns(secret.strip())
                b64 |= more_b64
                hexes |= more_hex
            for variant in readings(secret) or {secret}:
                flat = normalise(variant)
                if len(flat) < MIN_SECRET:
                    continue
                if flat.isdigit() and len(flat) <= WINDOW:
                    # "120" folded would be "izo", inside "horizon": a number is looked for as digits
                    numbers.update({flat, flat[::-1]})
                    if flat.isascii() and not flat.startswith("0"):
                        # and in the other bases Python writes: 100 as 0x64, 0o144, 0b1100100
                        # (not "007": "0x7" starts many an address)
                        numbers.update(
                            f"{prefix}{int(flat):{base}}" for prefix, base in (("0x", "x"), ("0o", "o"), ("0b", "b"))
                        )
                elif len(flat) <= WINDOW:
                    short.update(_views(flat))
                else:
                    for view in _views(flat):
                        windows.update(_slices(view))
                        long.add(view)
                    letters = _NOT_LETTERS.sub("", flat)  # a Latin shift of Latin letters only
                    for way in (letters, letters[::-1]):
                        shifted.update(_slices(_shifts(way), WINDOW - 1))
        ordered = tuple(sorted(long))
        return cls(
            frozenset(windows),
            tuple(sorted(short)),
            tuple(sorted(numbers)),
            ordered,
            tuple(_grams(secret) for secret in ordered),
            frozenset(b64),
            frozenset(hexes),
            frozenset(shifted),
        )

    def leaks(self, fragment: str) -> bool:
        """Whether ``fragment`` may reveal a hidden text; True when unsure."""
        if not (self.windows or self.short or self.numbers) or not fragment:
            return False
        variants = readings(fragment)
        if variants is None:
            return True
        if self._shows_encoded(variants):
            return True
        # Reversed and rot13 too: base64 or hex written backwards, or rotated,
        # only decodes once turned back.
        turned = {codecs.encode(variant, "rot13") for variant in variants}
        decoded = _decoded_readings(variants, {*turned, *(text[::-1] for text in (*variants, *turned))})
        if decoded is None:
            return True
        return any(self._shows(variant) for variant in (*variants, *decoded))

    def _shows_encoded(self, variants: Iterable[str]) -> bool:
        """Whether a short secret's base64 or hex shows in any reading, with
        whitespace, invisible characters and hex separators removed."""
        if not (self.b64_patterns or self.hex_patterns):
            return False
        b64_index, hex_index = self._pattern_index
        for variant in variants:
            text = _drop_invisible(_nfkc(variant)).translate(_skeleton_cased())
            if _has_pattern(_WHITESPACE.sub("", text).translate(_B64_ALPHABET), b64_index):
                return True
            if _has_pattern(_HEX_SEPARATORS.sub("", text).casefold(), hex_index):
                return True
        return False

    @functools.cached_property
    def _pattern_index(self) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        """The base64 and hex patterns by their first ``_MIN_PATTERN`` characters."""
        indexes: tuple[dict[str, list[str]], dict[str, list[str]]] = ({}, {})
        for index, patterns in zip(indexes, (self.b64_patterns, self.hex_patterns), strict=True):
            for pattern in sorted(patterns):
                index.setdefault(pattern[:_MIN_PATTERN], []).append(pattern)
        return indexes

    @functools.cached_property
    def _long_grams_union(self) -> tuple[frozenset[str], int]:
        """Every CHUNK-letter slice of any long secret, and the shortest one's length."""
        return frozenset().union(*self.long_grams), min(map(len, self.long), default=0)

    def _shows_number_in_letters(self, variant: str) -> bool:
        """Whether a number is written with letters that look like digits
        ("1OO", "l0l"): only in a word of such letters with a digit in it, as
        "violin" or "10 oil" must not read as "v1011n" or "10011"."""
        words = _DIGITS_AMONG_LETTERS.findall(_nfkc(variant).translate(_skeleton_cased()).casefold())
        return any(number in word.translate(_DIGIT_LOOKALIKES) for word in words for number in self.numbers)

    def _shows_shifted(self, plain: str) -> bool:
        """Whether WINDOW letters of a long secret show in ``plain`` under a
        Caesar shift (``_shifts``)."""
        letters = _NOT_LETTERS.sub("", plain)
        if len(letters) < WINDOW:
            return False
        return not self.shifted.isdisjoint(_slices(_shifts(letters), WINDOW - 1))

    def _shows(self, variant: str) -> bool:
        # rot13 turns letters only: look-alikes and leet digits put in before it
        # keep their place, those put in after it were rotated. So the letters
        # are turned back both before and after the look-alikes are read, and
        # the digits are read as letters only then.
        if self.numbers and self._shows_number_in_letters(variant):
            return True
        plain = normalise(variant)
        if self.shifted and self._shows_shifted(plain):
            return True
        return any(
            self._shows_flat(flat)
            for flat in (plain, normalise(codecs.encode(variant, "rot13")), plain.translate(_ROT13))
        )

    def _shows_flat(self, plain: str) -> bool:
        if any(number in plain for number in self.numbers):
            return True
        flat = fold(plain)
        if any(needle in flat for needle in self.short):
            return True
        if not self.windows:
            return False
        if not self.windows.isdisjoint(_slices(flat)):
            return True
        union, shortest = self._long_grams_union
        grams = _grams(flat) & union
        # Each matching slice covers at most CHUNK letters: most fragments are
        # ruled out by one set intersection, most secrets by one more, before
        # their pieces are counted.
        if CHUNK * len(grams) < CHUNK_COVER * shortest:
            return False
        return any(
            CHUNK * len(grams & secret_grams) >= CHUNK_COVER * len(secret) and _pieced_together(secret, grams)
            for secret, secret_grams in zip(self.long, self.long_grams, strict=True)
        )

    def redact(self, fragment: str) -> str:
        """``fragment`` unchanged, or a placeholder when it reveals a secret."""
        return REDACTED if self.leaks(fragment) else fragment


def _grams(flat: str) -> frozenset[str]:
    """The CHUNK-letter slices of ``flat``."""
    return frozenset(flat[i : i + CHUNK] for i in range(len(flat) - CHUNK + 1))


def _pieced_together(secret: str, grams: frozenset[str]) -> bool:
    """Whether the fragment's CHUNK-letter slices (``grams``) cover most of
    ``secret`` in several separate pieces: the secret cut up, filler between.
    A piece is a stretch of consecutive matching slices; pieces may adjoin on
    the secret (the filler sat exactly between them)."""
    hits = [secret[i : i + CHUNK] in grams for i in range(len(secret) - CHUNK + 1)]
    pieces = sum(1 for i, hit in enumerate(hits) if hit and (i == 0 or not hits[i - 1]))
    if pieces < (CHUNK_RUNS if len(secret) < 2 * WINDOW else 2):
        return False
    covered = set()
    for i, hit in enumerate(hits):
        if hit:
            covered.update(range(i, i + CHUNK))
    return len(covered) >= CHUNK_COVER * len(secret)


def _slices(flat: str, size: int = WINDOW) -> set[str]:
    return {flat[i : i + size] for i in range(len(flat) - size + 1)}


_NOT_LETTERS = re.compile(r"[^a-z]+")
_SHIFT = {(a, b): chr(97 + (ord(b) - ord(a)) % 26) for a in map(chr, range(97, 123)) for b in map(chr, range(97, 123))}


def _shifts(letters: str) -> str:
    """How far each letter is from the one before it, in the alphabet, as a
    letter: the same for a text and any Caesar shift of it ("abc", "nop" and
    "bcd" all give "bb"), so a long secret is found under any of the 25."""
    return "".join(map(_SHIFT.__getitem__, itertools.pairwise(letters)))


def redact(fragment: str, secrets: Iterable[str]) -> str:
    return Redactor.for_secrets(secrets).redact(fragment)


@dataclass(frozen=True)
class Failure:
    """What one failed attempt did, as the hint builder may use it."""

    attempt: int
    failure_class: str
    failed_checks: tuple[str, ...] = ()
    messages: tuple[str, ...] = ()
    log_tail: str = ""
    # The attempt's grade, when its hidden checks ran: how many of how many
    # passed, and the failing checks that passed in an earlier attempt.
    checks_passed: int | None = None
    checks_total: int = 0
    regressed_checks: tuple[str, ...] = ()


_CLASS_ADVICE = {
    "AssertionError": "your code ran but gave a wrong result",
    "FormatError": "your answer did not have the required format",
    "GateFailed": "your answer failed a mechanical quality gate",
    "Timeout": "your code did not finish in time (an endless loop?)",
    "ResourceLimit": "your code exceeded its CPU or memory limit",
    "MemoryError": "your code ran out of memory",
    "SyntaxError": "your code does not parse",
    "NameError": "your code uses a name it never defines",
    "AgentError": "no answer arrived",
}


@dataclass(frozen=True)
class Resume:
    """Where a run resumed after a reviewer sent its output back starts: the
    output the reviewer saw, and the reviewer's note about it."""

    output: str
    note: str


# The first line of a resumed run's addition to the prompt.
RESUME_HEADER = "A reviewer sent an earlier answer to this task back for another try."


def resume_block(resume: Resume, redactor: Redactor) -> str:
    """What a resumed run's prompts add after the task: the earlier answer
    and the reviewer's note. The note is a fragment like any hint and passes
    the redactor (a reviewer who quotes a hidden check must not hand it to
    the agent); the earlier answer is the agent's own text and is shown as it
    was, since it reveals nothing the agent did not write."""
    note = redactor.redact(resume.note.strip())
    return "\n".join(
        [
            RESUME_HEADER,
            "The earlier answer:",
            resume.output.rstrip() or "(empty)",
            "",
            f"The reviewer's note: {note}",
            "Start from the earlier answer and change what the note asks for.",
        ]
    )


def build_prompt(
    description: str,
    history: Sequence[Failure],
    redactor: Redactor,
    *,
    step_limit: int,
    open_task: bool = False,
    resume: Resume | None = None,
) -> str:
    """The prompt for the next attempt: the task plus hints about the last
    failure, each fragment redacted. Assertion texts never enter here, so the
    redactor is the second wall, not the first. A resumed run (``resume``)
    carries the earlier answer and the reviewer's note in every prompt: an
    agent is asked afresh each attempt and would otherwise lose the note."""
    attempt = len(history) + 1
    parts = [description.strip()]
    if resume is not None:
        parts.append(resume_block(resume, redactor))
    if open_task and attempt > 1:
        parts.append(f"This is attempt {attempt} of {step_limit}. Improve your previous answer.")
    if not history:
        return "\n\n".join(parts)
    last = history[-1]
    lines = [f"Attempt {attempt} of {step_limit}. Your previous answer (attempt {last.attempt}) failed."]
    advice = _CLASS_ADVICE.get(last.failure_class, "your code raised an error")
    lines.append(redactor.redact(f"Failure class: {last.failure_class} ({advice})."))
    if last.checks_passed is not None and last.checks_total:
        # Freeze what already passes: the agent is told how much works and
        # that it must keep working, never what those checks test.
        lines.append(
            f"Hidden checks passing: {last.checks_passed} of {last.checks_total}."
            + (" They must keep passing: change only what the failing checks need." if last.checks_passed else "")
        )
    if last.failed_checks:
        lines.append(redactor.redact("Failing hidden checks: " + ", ".join(last.failed_checks) + "."))
    if last.regressed_checks:
        lines.append(
            redactor.redact(
                "Regression: "
                + ", ".join(last.regressed_checks)
                + " passed in an earlier attempt and fail now. Your last change broke them; undo that part."
            )
        )
    for message in dict.fromkeys(last.messages):
        lines.append(redactor.redact(f"Your code raised: {message}"))
    if last.log_tail.strip():
        lines.append(redactor.redact("Your code printed:\n" + last.log_tail))
    earlier = [f.failure_class for f in history]
    if len(earlier) > 1:
        lines.append(redactor.redact("Failure classes so far: " + " -> ".join(earlier) + "."))
    lines.append("The hidden checks are not shown. Fix the cause and answer again.")
    parts.append("\n".join(lines))
    return "\n\n".join(parts)
