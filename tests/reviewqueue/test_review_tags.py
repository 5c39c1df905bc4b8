from __future__ import annotations

from datetime import timedelta

from reviewqueue.templatetags.review_tags import clock, duration, looks_like_code, render_output


def test_it_highlights_python_with_pygments_classes():
    html = render_output("import os\n\ndef main():\n    return os.getcwd()\n")
    assert html.startswith('<div class="hl">')
    assert '<span class="kn">import</span>' in html


def test_it_renders_prose_as_escaped_paragraphs():
    html = render_output("First <b>para</b>.\nSame para.\n\nSecond para.")
    assert html == "<p>First &lt;b&gt;para&lt;/b&gt;.<br>Same para.</p>\n<p>Second para.</p>"


def test_it_highlights_fenced_blocks_by_their_language_and_keeps_the_prose_around_them():
    text = "Here is the fix:\n\n```js\nconst x = 1;\n```\n\nThat is all <folks>."
    html = render_output(text)
    assert "<p>Here is the fix:</p>" in html
    assert '<span class="kd">const</span>' in html
    assert "That is all &lt;folks&gt;." in html


def test_it_escapes_markup_inside_code():
    html = render_output("def f():\n    return '<script>alert(1)</script>'\n")
    assert "<script>" not in html
    assert "&lt;script&gt;" in html


def test_it_treats_a_json_document_as_code():
    html = render_output('{"a": [1, 2], "b": "<img onerror=x>"}')
    assert 'class="hl"' in html
    assert "<img" not in html


def test_it_does_not_mistake_prose_for_code():
    assert not looks_like_code("The answer is 42.\nIt follows from the premises above.")
    assert looks_like_code("for (;;) {\n  tick();\n}")


def test_it_drops_nothing_from_a_long_output():
    text = "\n".join(f"row {n}" for n in range(20_000))
    html = render_output(text)
    assert "row 0<br>" in html and "row 19999" in html


def test_it_formats_durations_and_lease_clocks():
    assert duration(None) == "–"
    assert duration(42.4) == "42 s"
    assert duration(185) == "3 min 05 s"
    assert clock(timedelta(seconds=299)) == "4:59"
    assert clock(-5) == "0:00"
