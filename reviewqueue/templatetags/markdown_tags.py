"""Markdown for text people wrote: task descriptions and the queue's reviewer
instructions.

Two layers, each enough on its own: markdown-it renders with raw HTML turned
off (a ``<script>`` in the source comes out as visible text), and nh3 then
keeps only an allowlist of tags and attributes, so nothing that renders here
can run script, load a remote resource or set an inline style (which the CSP
would refuse, with a console error).
"""

from __future__ import annotations

from typing import Any

import nh3
from django import template
from django.utils.html import linebreaks
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from .rendered import RenderedCache

register = template.Library()

# Headings in a task sit below the card's own "Item #N" (h1) and "Task" (h2).
HEADING_SHIFT = 2
# markdown-it drops whatever is nested deeper than this (it bounds recursion).
MAX_NESTING = 20
# Parsing costs up to about 25 µs a character on hostile input (runs of
# "["), so longer text is shown plain: a card never waits more than ~0.25 s.
MAX_MARKDOWN_CHARS = 10_000

ALLOWED_TAGS = {
    "p",
    "br",
    "strong",
    "em",
    "del",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "a",
    "hr",
    "h3",
    "h4",
    "h5",
    "h6",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
}
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}
URL_SCHEMES = {"http", "https", "mailto"}


def _shifted_heading(self: RendererHTML, tokens: list[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    token = tokens[idx]
    token.tag = f"h{min(6, int(token.tag[1]) + HEADING_SHIFT)}"
    return self.renderToken(tokens, idx, options, env)


def _parser(max_nesting: int) -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "maxNesting": max_nesting}).enable(["table", "strikethrough"])
    # Images would load from anywhere (and the CSP allows only this site): the
    # alt text and link stay readable as a plain link instead.
    md.disable("image")
    md.add_render_rule("heading_open", _shifted_heading)
    md.add_render_rule("heading_close", _shifted_heading)
    # Tables align columns with inline style attributes; the CSP refuses those.
    md.add_render_rule("th_open", _without_style)
    md.add_render_rule("td_open", _without_style)
    return md


def _without_style(self: RendererHTML, tokens: list[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    token = tokens[idx]
    token.attrs = {name: value for name, value in token.attrs.items() if name != "style"}
    return self.renderToken(tokens, idx, options, env)


_MARKDOWN = _parser(MAX_NESTING)
_DEEPER = _parser(2 * MAX_NESTING)


def _token_count(tokens: list[Token]) -> int:
    return sum(1 + _token_count(token.children or []) for token in tokens)


def _deepest(tokens: list[Token]) -> int:
    return max((max(token.level, _deepest(token.children or [])) for token in tokens), default=0)


# A queue's instructions render on every card: each text is rendered once
# per process while it stays among the last RENDERED_ENTRIES rendered.
RENDERED_ENTRIES = 256
_rendered = RenderedCache(RENDERED_ENTRIES, MAX_MARKDOWN_CHARS)


def markdown_html(text: str) -> str:
    """Markdown source as sanitised HTML, kept by a hash of the text (the
    rendering is deterministic). Safe on any input."""
    text = text or ""
    return _rendered.get("markdown", text, lambda: _markdown_html(text))


def _markdown_html(text: str) -> str:
    """Markdown source as sanitised HTML. Deterministic and safe on any input.

    Text nested past markdown-it's limit would silently lose its innermost
    part, and very long text would be slow to parse: both are shown as
    escaped plain paragraphs instead, whole."""
    text = text or ""
    if len(text) > MAX_MARKDOWN_CHARS:
        return str(linebreaks(text, autoescape=True))
    env: EnvType = {}
    tokens = _MARKDOWN.parse(text, env)
    # Near the limit, a second parse with room to spare tells whether anything was cut.
    if _deepest(tokens) >= MAX_NESTING - 2 and _token_count(tokens) != _token_count(_DEEPER.parse(text, {})):
        return str(linebreaks(text, autoescape=True))
    rendered = _MARKDOWN.renderer.render(tokens, _MARKDOWN.options, env)
    return nh3.clean(
        rendered,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
    )


@register.filter(name="markdown")
def markdown(text: Any) -> SafeString:
    """``{{ text|markdown }}``: rendered, then cleaned by nh3's allowlist."""
    return mark_safe(markdown_html(str(text or "")))  # sanitised by nh3 just above
