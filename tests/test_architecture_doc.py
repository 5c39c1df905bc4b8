"""docs/ARCHITECTURE.md's "Where does my change go?" table names files: each
one must exist, so the table follows the code when modules or tests move.

A name without a folder is read in the folder of the path before it in the
same cell (`tests/reviewqueue/services/test_leases.py`, `test_verdicts.py`);
a path starting below the package is read under `reviewqueue/` in the
"change" column (`views/queues.py`) and under `tests/reviewqueue/` in the
"test in" column (`services/test_many_queues.py`).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILE = re.compile(r"^[\w*./-]+\.(py|html|js|yaml|css|md)$|^[\w./-]+/$")


def change_table() -> list[list[str]]:
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = doc.split("## Where does my change go?", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| I want")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def named_files(cell: str, base: str) -> list[str]:
    """The files a cell names, each as a path from the repository's root."""
    found, folder = [], ""
    for token in re.findall(r"`([^`]+)`", cell):
        if not FILE.match(token):
            continue
        if "/" in token.rstrip("/"):
            first = token.split("/")[0]
            path = token if (ROOT / first).is_dir() else f"{base}/{token}"
            folder = path.rsplit("/", 1)[0] if not token.endswith("/") else path.rstrip("/")
        else:
            path = f"{folder}/{token}" if folder else token
        found.append(path)
    return found


def test_the_table_has_the_rows_a_newcomer_looks_for() -> None:
    wants = " ".join(row[0] for row in change_table())
    for words in ("reason label", "per-queue setting", "alert", "what-if preset", "serves next"):
        assert words in wants, words


def test_every_file_the_table_names_exists() -> None:
    missing = []
    for row in change_table():
        for cell, base in zip(row[1:], ("reviewqueue", "tests/reviewqueue"), strict=True):
            for path in named_files(cell, base):
                if not list(ROOT.glob(path.rstrip("/"))):
                    missing.append(f"{row[0]}: {path}")
    assert not missing, missing
