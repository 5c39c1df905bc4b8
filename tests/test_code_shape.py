"""The shape rule of ARCHITECTURE.md: no function outside tests/ and bench/
is longer than 60 lines unless a `# Long:` comment directly above it says why.
A function that long usually holds several steps that want names."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 60
PACKAGES = ("reviewqueue", "loops", "simulation")
SCRIPTS = ("dev.py", "manage.py")


def _sources() -> list[Path]:
    files = [ROOT / name for name in SCRIPTS]
    for package in PACKAGES:
        files += [p for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts]  # generated
    return sorted(files)


def _explained(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    above = lines[first - 2].strip() if first >= 2 else ""
    return above.startswith("# Long:") and len(above) > len("# Long:") + 10


def _long_functions(path: Path, root: Path = ROOT) -> list[str]:
    text = path.read_text()
    lines = text.splitlines()
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_LINES and not _explained(lines, node):
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_the_rule_sees_the_project() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in _sources()}
    assert {"dev.py", "reviewqueue/policy.py", "loops/runner.py", "simulation/model.py"} <= names


def test_no_function_is_longer_than_60_lines_without_saying_why() -> None:
    offenders = [entry for path in _sources() for entry in _long_functions(path)]
    assert not offenders, "split these, or put a '# Long: <why>' comment above them:\n" + "\n".join(offenders)


def test_a_long_function_with_a_reason_passes_and_one_without_fails(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    plain = tmp_path / "plain.py"
    plain.write_text(f"def f():\n{body}")
    explained = tmp_path / "explained.py"
    explained.write_text(f"# Long: one table of sixty constants reads best in one place\ndef f():\n{body}")
    assert _long_functions(plain, tmp_path) == ["plain.py:1 f (61 lines)"]
    assert _long_functions(explained, tmp_path) == []
