r"""The review page's output renderer as it was before it became linear, kept
only so bench_render.py can show the difference side by side. Do not use:
its ^\s* patterns under MULTILINE and its lazy fence search rescan the rest of
the text from every line, so a few kilobytes of newlines take seconds."""

# ruff: noqa
import json
import re
from datetime import timedelta


from django.utils.html import escape, format_html_join
from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound


FORMATTER = HtmlFormatter(nowrap=False, cssclass="hl")

FENCE = re.compile(r"^```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)

# Whole-line signatures of common languages, tried in order. A guess from
# Pygments alone picks exotic lexers for plain snippets, so the common cases
# are recognised here first.
SIGNATURES: list[tuple[str, re.Pattern[str]]] = [
    ("diff", re.compile(r"^(@@ .* @@|\+\+\+ |--- a/)", re.MULTILINE)),
    ("python", re.compile(r"^\s*(def \w+\(|class \w+.*:\s*$|import \w|from [\w.]+ import |if __name__)", re.MULTILINE)),
    ("javascript", re.compile(r"^\s*(function \w*\(|const \w+ =|let \w+ =|export |console\.log\()", re.MULTILINE)),
    (
        "sql",
        re.compile(r"^\s*(SELECT|INSERT INTO|UPDATE \w+ SET|CREATE TABLE|DELETE FROM)\b", re.MULTILINE | re.IGNORECASE),
    ),
    ("bash", re.compile(r"^(#!/bin/(ba)?sh|\$ \w)", re.MULTILINE)),
    ("c", re.compile(r"^\s*#include\s*[<\"]", re.MULTILINE)),
    ("go", re.compile(r"^\s*(package \w+$|func \w+\()", re.MULTILINE)),
    ("rust", re.compile(r"^\s*(fn \w+\(|let mut |use \w+::)", re.MULTILINE)),
    ("html", re.compile(r"^\s*<(!doctype|html|head|body|div|span|p)\b", re.MULTILINE | re.IGNORECASE)),
]
CODE_LINE_ENDINGS = ("{", "}", ";", ")", ":", "]", ",")


def looks_like_code(text: str) -> bool:
    """Most non-blank lines indented or ending in punctuation, or a language
    signature: a cheap test that keeps prose out of the highlighter."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return False
    if _is_json(text) or any(pattern.search(text) for _, pattern in SIGNATURES):
        return True
    codey = sum(1 for line in lines if line.startswith(("    ", "\t")) or line.rstrip().endswith(CODE_LINE_ENDINGS))
    return len(lines) >= 2 and codey / len(lines) >= 0.6


def _is_json(text: str) -> bool:
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return False
    try:
        json.loads(stripped)
    except ValueError:
        return False
    return True


def pick_lexer(text: str, hint: str = "") -> Lexer:
    """The lexer named by a fence's info string, else one recognised from the
    text, else plain text (still shown monospaced, still escaped)."""
    if hint:
        try:
            return get_lexer_by_name(hint.lower())
        except ClassNotFound:
            pass
    if _is_json(text):
        return get_lexer_by_name("json")
    for name, pattern in SIGNATURES:
        if pattern.search(text):
            return get_lexer_by_name(name)
    return get_lexer_by_name("text")


def _code_html(text: str, hint: str = "") -> str:
    lexer = pick_lexer(text, hint)
    return highlight(text, lexer, FORMATTER)


def _prose_html(text: str) -> str:
    """Paragraphs on blank lines, <br> on single newlines, every piece escaped."""
    paragraphs = [p for p in re.split(r"\n\s*\n", text.replace("\r\n", "\n")) if p.strip()]
    return format_html_join(
        "\n",
        "<p>{}</p>",
        ((mark_safe("<br>".join(escape(line) for line in p.strip("\n").split("\n"))),) for p in paragraphs),
    )


def render_output(text: str) -> SafeString:
    """Agent output as HTML: fenced blocks and code-looking text highlighted,
    everything else as prose. Every character of ``text`` reaches the page,
    escaped: nothing is dropped or cut here."""
    text = text or ""
    parts: list[str] = []
    position = 0
    fences = list(FENCE.finditer(text))
    if not fences:
        if looks_like_code(text):
            return mark_safe(_code_html(text))  # Pygments escaped every token
        return mark_safe(_prose_html(text))
    for match in fences:
        before = text[position : match.start()]
        if before.strip():
            parts.append(_prose_html(before))
        parts.append(_code_html(match.group(2), match.group(1)))
        position = match.end()
    rest = text[position:]
    if rest.strip():
        parts.append(_prose_html(rest))
    return mark_safe("\n".join(parts))  # each part escaped by Pygments or escape()
