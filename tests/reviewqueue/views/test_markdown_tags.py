from __future__ import annotations

from datetime import timedelta
from html.parser import HTMLParser

import pytest
from django.utils import timezone

from reviewqueue.templatetags.markdown_tags import MAX_MARKDOWN_CHARS, markdown, markdown_html
from reviewqueue.templatetags.time_tags import ago


def parsed(html: str) -> list[tuple[str, dict[str, str]]]:
    """Every element of an HTML fragment: (tag, attributes)."""
    found: list[tuple[str, dict[str, str]]] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, {name: value or "" for name, value in attrs}))

    Collect().feed(html)
    return found


def test_it_renders_common_markdown():
    html = markdown_html("Use **care** and *tact*:\n\n1. `code`\n2. [docs](https://example.org/a?b=1)")
    assert "<strong>care</strong>" in html and "<em>tact</em>" in html
    assert "<li><code>code</code></li>" in html
    assert '<a href="https://example.org/a?b=1" rel="noopener noreferrer nofollow">docs</a>' in html


@pytest.mark.parametrize(
    "source",
    [
        "<script>alert(1)</script>",
        '<img src=x onerror="alert(1)">',
        "<iframe src='https://evil.example'></iframe>",
        '<a href="javascript:alert(1)">x</a>',
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](data:text/html;base64,PHNjcmlwdD4=)",
        "<javascript:alert(1)>",
        "![tracker](https://evil.example/pixel.png)",
        '<div style="color:red" onclick="alert(1)">x</div>',
        "[x](vbscript:msgbox(1))",
    ],
)
def test_it_leaves_nothing_that_runs_or_loads_from_elsewhere(source):
    elements = parsed(markdown_html(source))
    allowed = {"p", "a", "em", "strong", "code"}
    assert {tag for tag, _ in elements} <= allowed
    for tag, attrs in elements:
        assert set(attrs) <= ({"href", "rel", "title"} if tag == "a" else set())
        if tag == "a":
            assert attrs["href"].split(":")[0] in {"http", "https", "mailto"}


def test_it_drops_the_inline_alignment_style_of_tables():
    html = markdown_html("| a | b |\n|:--|--:|\n| 1 | 2 |")
    assert "<th>a</th>" in html and "<td>2</td>" in html
    assert "style" not in html


def test_it_puts_headings_below_the_cards_own():
    html = markdown_html("# Goal\n\n## Detail\n\n###### Deep")
    assert "<h3>Goal</h3>" in html and "<h4>Detail</h4>" in html and "<h6>Deep</h6>" in html
    assert "<h1" not in html and "<h2" not in html


def test_it_shows_raw_html_as_text():
    assert markdown_html("a <b>bold</b> claim") == "<p>a &lt;b&gt;bold&lt;/b&gt; claim</p>\n"


def test_it_takes_empty_and_non_text_values():
    assert markdown(None) == ""
    assert markdown("") == ""
    assert "42" in markdown(42)


def test_it_shows_text_nested_too_deep_for_the_parser_whole_and_plain():
    source = "> " * 30 + "the innermost words"
    html = markdown_html(source)
    assert "the innermost words" in html
    assert "<blockquote>" not in html


def test_it_shows_very_long_text_whole_and_plain():
    source = "- item\n" * 5_000 + "<b>the last line</b>"
    assert len(source) > MAX_MARKDOWN_CHARS
    html = markdown_html(source)
    assert html.count("- item") == 5_000
    assert "&lt;b&gt;the last line&lt;/b&gt;" in html
    assert "<li>" not in html


def test_it_says_just_now_under_a_minute_then_the_largest_unit():
    now = timezone.now()
    assert ago(now - timedelta(seconds=0), now) == "just now"
    assert ago(now - timedelta(seconds=59), now) == "just now"
    assert ago(now - timedelta(seconds=60), now) == "1\xa0minute ago"
    assert ago(now - timedelta(hours=2, minutes=5), now) == "2\xa0hours ago"
    assert ago(None) == ""
