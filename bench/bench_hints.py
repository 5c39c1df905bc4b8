"""The hint redactor's cost per fragment, as ratios.

    .venv/bin/python bench/bench_hints.py [--repeat 30] [--rounds 5] [--against REV]

Each fragment (an ordinary send-back note, a longer note, a log tail of
paths and identifiers, a note with a base64 token and a hash, an escaped
note, a note in Greek capitals) is redacted against every hidden text of
the built-in suite, and timed against the same redactor with its short-secret
encodings (the base64 and hex patterns of ``Redactor``) switched off, in the
same run: the ratio is what looking for them costs. With ``--against REV``,
``loops/hints.py`` as it was at git revision REV is loaded beside the current
one and timed on the same fragments, interleaved, and the ratio current /
REV is printed too.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from benchlib import ROOT, median_seconds, ms

from loops import hints
from loops.spec import builtin_suite

NOTE = "please handle the case where the input list is empty and return early instead of crashing"
FRAGMENTS = {
    "short note": "rename the variable and make the function shorter",
    "long note": " ".join([NOTE] * 8),
    "log tail, 40 lines": "\n".join(
        f'File "/srv/candidate_{i}.py", line {i}, in compute_the_thing_{i}' for i in range(40)
    ),
    "base64 token and a hash": "token dGhpcyBpcyBub3QgaXQ= and sha 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd1",
    "escaped note": "see %3Cb%3E and &lt;i&gt; and \\u0041 here, " + NOTE,
    "Greek capitals": "ΠΡΟΣΟΧΗ: ΕΛΕΓΞΕ ΤΗΝ ΑΝΑΔΡΟΜΗ ΚΑΙ ΤΗΝ ΚΕΝΗ ΛΙΣΤΑ",
}


def module_at(rev: str) -> ModuleType:
    """``loops/hints.py`` as it was at ``rev``, loaded as a module of its own."""
    source = subprocess.run(
        ["git", "show", f"{rev}:loops/hints.py"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "hints_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("hints_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["hints_before"] = module  # dataclasses looks its module up by name
    spec.loader.exec_module(module)
    return module


def timed(redact: Callable[[str], str], fragment: str, repeat: int) -> float:
    return median_seconds(lambda: redact(fragment), repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the best of each side is kept")
    parser.add_argument("--against", help="a git revision whose loops/hints.py is timed beside the current one")
    args = parser.parse_args()
    secrets = [s for task in builtin_suite() for s in task.secrets()]
    current = hints.Redactor.for_secrets(secrets)
    without = dataclasses.replace(current, b64_patterns=frozenset(), hex_patterns=frozenset())
    before = module_at(args.against).Redactor.for_secrets(secrets) if args.against else None
    header = f"{'fragment':26s} {'current':>11s} {'no patterns':>11s} {'ratio':>6s}"
    print(header + (f" {args.against[:10]:>11s} {'ratio':>6s}" if before else ""))
    for name, fragment in FRAGMENTS.items():
        # Interleaved, in rounds, so a neighbour's burst falls on every side alike;
        # the best round of each side is kept.
        sides = [current.redact, without.redact] + ([before.redact] if before else [])
        times = [[], [], []]
        for _ in range(args.rounds):
            for i, side in enumerate(sides):
                times[i].append(timed(side, fragment, args.repeat))
        now, off, old = (min(t) if t else 0.0 for t in times)
        line = f"{name:26s} {ms(now)} {ms(off)} {now / off:6.2f}"
        if before:
            line += f" {ms(old)} {now / old:6.2f}"
        print(line, flush=True)
        assert current.redact(fragment) == fragment, f"an ordinary fragment was withheld: {name}"


if __name__ == "__main__":
    main()
