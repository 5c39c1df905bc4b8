from __future__ import annotations

import functools
import importlib.util
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from reviewqueue.templatetags import review_tags
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


# --- hostile outputs: linear by construction, nothing lost ------------------------------------

BENCH = Path(__file__).resolve().parents[3] / "bench"


@functools.cache
def _before() -> Any:
    """The renderer before it became linear (bench/render_before.py), for comparison."""
    spec = importlib.util.spec_from_file_location("render_before", BENCH / "render_before.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_forty_kilobytes_of_newlines_render_as_one_paragraph():
    assert render_output("x" + "\n" * 40_000) == "<p>x</p>"
    assert render_output("\n" * 40_000 + "<y>") == "<p>&lt;y&gt;</p>"
    assert render_output("\n" * 40_000) == ""


def test_an_unclosed_fence_is_shown_as_text_with_every_line():
    text = "```python\n" + "".join(f"x{n} = {n}\n" for n in range(5_000))
    html = render_output(text)
    assert "x0" in html and "x4999" in html
    assert html.count("```") == 1


def test_many_unclosed_fences_are_all_shown():
    html = render_output("```a\n" * 10_000)
    assert html.count("```a") == 10_000


def test_long_whitespace_runs_keep_the_text_around_them():
    html = render_output("a" + " " * 100_000 + "b\n" + "\t \n" * 10_000 + "c")
    assert html.startswith("<p>a") and "b</p>" in html and html.endswith("<p>c</p>")
    assert html.count("<p>") == 2


def test_many_fences_are_all_shown_and_only_the_first_are_coloured():
    html = render_output("```python\nx = '<i>'\n```\n" * 500)
    assert html.count('<div class="hl">') == 500
    assert html.count("&lt;i&gt;") == 500 and "<i>" not in html
    coloured = html.count('<span class="n">x</span>')
    assert coloured == review_tags.HIGHLIGHT_MAX_BLOCKS


def test_code_past_the_highlighting_allowance_is_still_all_there_and_escaped():
    body = "".join(f"def f{n}(x):\n    return x\n" for n in range(2_000)) + "print('</pre><script>')\n"
    assert len(body) > review_tags.HIGHLIGHT_MAX_CHARS
    html = render_output(body)
    assert html.startswith('<div class="hl"><pre>')
    assert "def f1999(x):" in html and "&lt;/pre&gt;&lt;script&gt;" in html
    assert "<script>" not in html


def test_a_short_code_answer_is_still_coloured():
    assert '<span class="k">def</span>' in render_output("def f(x):\n    return x\n")


def test_deep_json_nesting_renders_instead_of_failing():
    html = render_output("[" * 100_000)
    assert html.count("[") == 100_000


def test_a_long_class_line_without_a_colon_is_prose():
    assert render_output("class a" + "a" * 100_000).startswith("<p>class a")


def test_a_fence_naming_an_unlisted_lexer_falls_back_to_recognising_the_text():
    html = render_output("```brainfuck\ndef f(x):\n    return x\n```\n")
    assert '<span class="k">def</span>' in html


PIECES = st.sampled_from(
    [
        "\n", "\n\n", " ", "\t", "x", "<b>", "&", "```", "```py", "```zz", "```json", "``` ", "def f(", "class A:",
        "import os", "@@ -1 +1 @@", "--- a/f", "$ ls", "SELECT 1", "const a = 1;", "fn main(", "package main",
        "#include <x>", "<div>", "{", "}", '{"a": 1}', "    ", ":", ";", "é", "\u2028", "select 1",
        "Update t Set", "use std::", "let mut ", "export ", "#!/bin/sh", "if __name__", "<!DOCTYPE", "func f(",
    ]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, max_size=30).map("".join))
def test_it_renders_short_outputs_exactly_as_before(text: str) -> None:
    # Within the highlighting allowance and with listed fence languages, the
    # linear renderer must produce what the regex-based one did.
    if text.count("```") > review_tags.HIGHLIGHT_MAX_BLOCKS * 2:
        return
    # A fence naming a lexer outside the list (```func is Pygments' FunC) is
    # highlighted by the old renderer and on purpose not by the new one.
    hints = re.findall(r"^```[ \t]*([\w+#.-]*)", text, re.MULTILINE)
    assume(all(not hint or hint.lower() in review_tags.FENCE_LEXERS or not _pygments_knows(hint) for hint in hints))
    assert render_output(text) == _before().render_output(text)


def _pygments_knows(name: str) -> bool:
    try:
        get_lexer_by_name(name)
    except ClassNotFound:
        return False
    return True


def test_a_fence_naming_an_unlisted_lexer_is_not_highlighted_by_it():
    # Pygments knows "func" (FunC); the list does not, so the text is shown plain.
    assert _pygments_knows("func") and "func" not in review_tags.FENCE_LEXERS
    assert render_output("```func f(\n \n```") == '<div class="hl"><pre><span></span> \n</pre></div>\n'
