"""Rendering of agent output for the review page.

Agent output is untrusted. Code goes through Pygments, which escapes every
token; prose goes through Django's own escaping. Nothing here ever marks raw
agent text as safe.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache

from django import template
from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from ..formatting import decision_words as _decision_words
from .rendered import RenderedCache

register = template.Library()

FORMATTER = HtmlFormatter(nowrap=False, cssclass="hl")

# Pygments is linear but slow: some 30 µs a character on adversarial input in
# its Python lexer, so a 500,000-character output would take 15 s. Colour is a
# help for the reviewer, not the content: the first blocks, up to this many
# characters in all, are highlighted; any code past them is shown escaped and
# monospaced, every character still there.
HIGHLIGHT_MAX_CHARS = 10_000
HIGHLIGHT_MAX_BLOCKS = 20
# Fence info strings pick among these lexers only: every Pygments lexer is one
# word away otherwise, and not all of them are linear on hostile input.
FENCE_LEXERS = frozenset(
    {
        "bash", "c", "c++", "console", "cpp", "css", "diff", "go", "golang", "html", "java", "javascript",
        "js", "json", "patch", "py", "py3", "python", "python3", "rs", "rust", "sh", "shell", "sql",
        "text", "toml", "ts", "typescript", "xml", "yaml", "yml", "zsh",
    }
)  # fmt: skip

# Every scan below is linear in the output's length by construction. The
# regular expressions never backtrack: every repetition is possessive (*+, ++)
# and none is followed by something it could also have matched, and those
# searched over the whole text cannot run past a line end, so each line start
# is looked at once. Everything else is str.find, str.split and slicing. (The
# patterns this replaces, ^\s* under MULTILINE and a lazy .*? hunting for a
# closing fence, rescanned the rest of the text from every line: seconds for
# a few kilobytes of newlines, hours at the size limit.)

FENCE = "```"
_FENCE_OPEN = re.compile(r"^```", re.MULTILINE)
_FENCE_CLOSE = re.compile(r"^```[ \t]*+$", re.MULTILINE)
_FENCE_INFO = re.compile(r"[ \t]*+([\w+#.-]*+)")
# A blank line between two newlines, or several: where prose paragraphs break.
_PARAGRAPH_BREAK = re.compile(r"\n(?:[^\S\n]*+\n)++")

# Whole-line signatures of common languages, tried in this order. A guess from
# Pygments alone picks exotic lexers for plain snippets, so the common cases
# are recognised here first. Each pattern is matched at the start of a line:
# RAW on the line as it is, STRIPPED after its leading whitespace.
_RAW: dict[str, re.Pattern[str]] = {
    # diff's "@@ ... @@" hunk header is checked apart, in _line_languages.
    "diff": re.compile(r"\+\+\+ |--- a/"),
    "bash": re.compile(r"#!/bin/(ba)?sh|\$ \w"),
}
_STRIPPED: dict[str, re.Pattern[str]] = {
    # "class X...:" is checked apart (_python_class): as one pattern its two
    # open-ended parts would backtrack against each other on a long line.
    "python": re.compile(r"def \w++\(|import \w|from [\w.]++ import |if __name__"),
    "javascript": re.compile(r"function \w*+\(|const \w++ =|let \w++ =|export |console\.log\("),
    "sql": re.compile(r"(SELECT|INSERT INTO|UPDATE \w++ SET|CREATE TABLE|DELETE FROM)\b", re.IGNORECASE),
    "c": re.compile(r"#include\s*+[<\"]"),
    "go": re.compile(r"package \w++$|func \w++\("),
    "rust": re.compile(r"fn \w++\(|let mut |use \w++::"),
    "html": re.compile(r"<(!doctype|html|head|body|div|span|p)\b", re.IGNORECASE),
}
LANGUAGES = ("diff", "python", "javascript", "sql", "bash", "c", "go", "rust", "html")
# The characters a signature can start with, so most lines cost one set lookup.
_RAW_FIRST = frozenset("@+-#$")
_STRIPPED_FIRST = frozenset("cdefilpsu#<" + "CDISU")  # upper case: SQL is matched in any case
# A line that could carry a signature: its first character after horizontal
# whitespace is one a signature starts with. The whitespace run cannot cross
# a newline, so each line start is looked at once.
_CANDIDATE_LINE = re.compile(
    "^[^\\S\\n]*+[" + re.escape("".join(sorted(_RAW_FIRST | _STRIPPED_FIRST))) + "]", re.MULTILINE
)
CODE_LINE_ENDINGS = ("{", "}", ";", ")", ":", "]", ",")


def _python_class(stripped: str) -> bool:
    r"""``class \w+.*:\s*$`` on one line, without a regular expression."""
    if not stripped.startswith("class ") or len(stripped) < 8 or not (stripped[6].isalnum() or stripped[6] == "_"):
        return False
    body = stripped.rstrip()
    return len(body) >= 8 and body.endswith(":")


def _line_languages(line: str) -> set[str]:
    """The languages whose signature this one line carries."""
    found: set[str] = set()
    if line[:1] in _RAW_FIRST:
        found.update(name for name, pattern in _RAW.items() if pattern.match(line))
        if line.startswith("@@ ") and line.find(" @@", 3) != -1:
            found.add("diff")
    stripped = line.lstrip().rstrip("\r")
    if stripped[:1] in _STRIPPED_FIRST:
        found.update(name for name, pattern in _STRIPPED.items() if pattern.match(stripped))
        if _python_class(stripped):
            found.add("python")
    return found


def signature_language(text: str) -> str | None:
    """The first language, in LANGUAGES order, with a signature line in ``text``."""
    found: set[str] = set()
    for candidate in _CANDIDATE_LINE.finditer(text):
        start = candidate.start()
        end = text.find("\n", start)
        found |= _line_languages(text[start : end if end != -1 else len(text)])
        if "diff" in found:  # first in order: nothing can beat it
            break
    return next((name for name in LANGUAGES if name in found), None)


def looks_like_code(text: str) -> bool:
    """Most non-blank lines indented or ending in punctuation, or a language
    signature: a cheap test that keeps prose out of the highlighter."""
    return _looks_like_code(text, signature_language(text))


def _looks_like_code(text: str, language: str | None) -> bool:
    """looks_like_code() with the text's signature language already found."""
    if language is not None:
        return True
    # Runs of blank lines fold in one C-speed pass first, so a wall of
    # newlines costs no Python loop.
    lines = [line for line in _PARAGRAPH_BREAK.sub("\n", text).splitlines() if line.strip()]
    if not lines:
        return False
    if _is_json(text):
        return True
    codey = sum(1 for line in lines if line.startswith(("    ", "\t")) or line.rstrip().endswith(CODE_LINE_ENDINGS))
    return len(lines) >= 2 and codey / len(lines) >= 0.6


def _is_json(text: str) -> bool:
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return False
    try:
        json.loads(stripped)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser goes
        return False
    return True


@lru_cache(maxsize=64)
def _lexer(name: str) -> Lexer:
    """A lexer by name, built once per process: building one compiles its
    regular expressions, which costs more than highlighting a short answer.
    Lexers keep no state between texts, so one instance serves every render."""
    return get_lexer_by_name(name)


def pick_lexer(text: str, hint: str = "") -> Lexer:
    """The lexer named by a fence's info string (among FENCE_LEXERS), else one
    recognised from the text, else plain text (still shown monospaced, still
    escaped)."""
    if hint and hint.lower() in FENCE_LEXERS:
        try:
            return _lexer(hint.lower())
        except ClassNotFound:
            pass
    if _is_json(text):
        return _lexer("json")
    return _lexer(signature_language(text) or "text")


@dataclass
class _Budget:
    """What is left of one render's highlighting allowance."""

    chars: int = HIGHLIGHT_MAX_CHARS
    blocks: int = HIGHLIGHT_MAX_BLOCKS

    def spend(self, size: int) -> bool:
        if self.blocks <= 0 or size > self.chars:
            return False
        self.chars -= size
        self.blocks -= 1
        return True


# Highlighted blocks by a hash of their text and lexer hint: the same output
# renders on every reload and lease renewal of its card. A block is at most
# HIGHLIGHT_MAX_CHARS (the budget below is spent first, as without the cache).
_highlighted = RenderedCache(entries=256, max_chars=HIGHLIGHT_MAX_CHARS)


def _code_html(text: str, budget: _Budget, hint: str = "") -> str:
    if not budget.spend(len(text)):
        # The same box, uncoloured: escaped in one linear pass.
        return f'<div class="hl"><pre>{html.escape(text)}</pre></div>\n'
    return _highlighted.get(f"code:{hint}", text, lambda: highlight(text, pick_lexer(text, hint), FORMATTER))


def _prose_html(text: str) -> str:
    """Paragraphs on blank lines, <br> on single newlines, every piece escaped.
    The text is escaped first, in one pass: escaping neither adds nor removes
    newlines or whitespace, so the paragraphs are the same."""
    escaped = html.escape(text.replace("\r\n", "\n"))
    paragraphs = (p for p in _PARAGRAPH_BREAK.split(escaped) if p.strip())
    return "\n".join("<p>" + p.strip("\n").replace("\n", "<br>") + "</p>" for p in paragraphs)


def fences(text: str) -> list[tuple[int, int, int, int, int]]:
    """Closed code fences as (start, end, info string start, body start, body end).

    A fence opens on a line starting with three backticks that ends in a
    newline and closes on the next line that is three backticks and nothing
    but spaces or tabs; the body lies between. The search moves forward only:
    an opening line with no closing line after it means no later opening line
    has one either, so the rest is not fenced.
    """
    found: list[tuple[int, int, int, int, int]] = []
    position = 0
    while (opening := _FENCE_OPEN.search(text, position)) is not None:
        start = opening.start()
        newline = text.find("\n", start)
        if newline == -1:  # an opening line must end in a newline
            break
        closing = _FENCE_CLOSE.search(text, newline + 1)
        if closing is None:
            break
        found.append((start, closing.end(), start + len(FENCE), newline + 1, closing.start()))
        position = closing.end()
    return found


@register.filter(name="render_output")
def render_output(text: str) -> SafeString:
    """Agent output as HTML: fenced blocks and code-looking text highlighted,
    everything else as prose. Every character of ``text`` reaches the page,
    escaped: nothing is dropped or cut here. Linear in the text's length."""
    text = text or ""
    budget = _Budget()
    blocks = fences(text)
    if not blocks:
        if _looks_like_code(text, signature_language(text)):
            return mark_safe(_code_html(text, budget))  # escaped by Pygments or html.escape
        return mark_safe(_prose_html(text))
    parts: list[str] = []
    position = 0
    for start, end, info_start, body_start, body_end in blocks:
        before = text[position:start]
        if before.strip():
            parts.append(_prose_html(before))
        info = _FENCE_INFO.match(text, info_start, body_start - 1)
        parts.append(_code_html(text[body_start:body_end], budget, info.group(1) if info else ""))
        position = end
    rest = text[position:]
    if rest.strip():
        parts.append(_prose_html(rest))
    return mark_safe("\n".join(parts))  # each part escaped by Pygments or html.escape


@register.filter(name="decision_words")
def decision_words(decision: str) -> str:
    """A verdict's decision in the words every page uses ("approved", "sent
    back"); templates add ``capfirst`` where it starts a line."""
    return _decision_words(decision)


@register.filter(name="duration")
def duration(seconds: float | None) -> str:
    """Seconds as a short human duration: 42 s, 3 min 05 s."""
    if seconds is None:
        return "–"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    return f"{minutes} min {rest:02d} s"


@register.filter(name="clock")
def clock(delta: timedelta | int | None) -> str:
    """Seconds left on a lease as m:ss, the same format the page's script counts down in."""
    if delta is None:
        return "0:00"
    seconds = int(delta.total_seconds()) if isinstance(delta, timedelta) else int(delta)
    seconds = max(0, seconds)
    return f"{seconds // 60}:{seconds % 60:02d}"
