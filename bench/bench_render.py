"""The review page's output renderer on hostile input, as ratios.

    .venv/bin/python bench/bench_render.py [--size 500000] [--old-sizes 2000,4000]

Each case is an output of ``--size`` characters (the default is the size
limit, REVIEWQUEUE_MAX_OUTPUT_CHARS) built to hurt a regex-based renderer: a
wall of newlines, unclosed code fences, whitespace-only lines, many fences,
one enormous line, deep JSON, and code that makes Pygments slow. Each is timed
against ``html.escape`` of the same text in the same run, so the ratio says
how many escapes' worth of work a render is. Then the renderer before the fix
(bench/render_before.py) and the current one run side by side at small sizes
the old one can finish: its time grows with the square of the size, the
current one's linearly.
"""

from __future__ import annotations

import argparse
import html
import time
from collections.abc import Callable
from pathlib import Path

import render_before  # this script's own folder: the renderer before the fix
from benchlib import median_seconds

from reviewqueue.templatetags.review_tags import render_output

SERVICES = "\n".join(
    p.read_text() for p in sorted((Path(__file__).resolve().parent.parent / "reviewqueue" / "services").glob("*.py"))
)


def cases(n: int) -> dict[str, str]:
    """Hostile outputs of exactly ``n`` characters."""

    def fit(text: str) -> str:
        return (text * (n // max(len(text), 1) + 1))[:n]

    return {
        "x, then newlines": "x" + "\n" * (n - 1),
        "newlines, then x": "\n" * (n - 1) + "x",
        "unclosed fence, then newlines": "```\n" + "\n" * (n - 4),
        "whitespace-only lines": "x\n" + fit(" \n")[: n - 2],
        "many unclosed fences": fit("```a\n"),
        "many closed fences": fit("```\n```\n"),
        "fence, then newlines": "```py\n```\n" + "\n" * (n - 11) + "x",
        "one line of spaces": " " * n,
        "class line without colon": "class a" + "a" * (n - 7),
        "deep JSON": "[" * n,
        "Python source": fit(SERVICES),
        "Pygments-slow Python tokens": "import a\n" + fit("a ")[: n - 9],
        "fenced Pygments-slow tokens": "```python\n" + fit("(")[: n - 14] + "\n```",
    }


def timed(fn: Callable[[], object]) -> float:
    """One call's time: the old renderer is too slow to repeat."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=500_000)
    parser.add_argument("--old-sizes", default="2000,4000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    render_output("```python\nimport os\n```\n")  # build the common lexers once, as a running server has

    print(f"render_output / html.escape, {args.size:,} characters, medians of {args.repeat}")
    worst = 0.0
    for name, text in cases(args.size).items():
        assert len(text) == args.size, name
        render = median_seconds(lambda t=text: render_output(t), args.repeat)
        escape = median_seconds(lambda t=text: html.escape(t), max(args.repeat, 5))
        worst = max(worst, render)
        print(f"  {name:32} {render / escape:9.0f}x   (render {render * 1000:7.1f} ms, escape {escape * 1000:6.2f} ms)")
    print(f"  slowest render at {args.size:,} characters: {worst * 1000:.0f} ms")

    sizes = [int(s) for s in args.old_sizes.split(",") if s]
    print("\nbefore the fix vs now, same inputs (ratio to html.escape of the same text)")
    for name in ("x, then newlines", "unclosed fence, then newlines", "whitespace-only lines"):
        for n in sizes:
            text = cases(n)[name]
            escape = median_seconds(lambda t=text: html.escape(t), 5)
            old = timed(lambda t=text: render_before.render_output(t))
            new = median_seconds(lambda t=text: render_output(t), args.repeat)
            print(
                f"  {name:32} {n:>7,} chars: before {old / escape:10.0f}x ({old * 1000:8.1f} ms)"
                f"   now {new / escape:6.0f}x ({new * 1000:5.2f} ms)   before/now {old / new:8.0f}"
            )


if __name__ == "__main__":
    main()
