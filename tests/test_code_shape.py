"""The shape rules of ARCHITECTURE.md: no function outside tests/ and bench/
is longer than 60 lines unless a `# Long:` comment directly above it says why.
A function that long usually holds several steps that want names.

And views/ holds views: no module there is over 500 lines, and none writes
through the ORM (views parse, call a service or a selector, and render)."""

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


VIEWS = ROOT / "reviewqueue" / "views"
MAX_VIEW_MODULE_LINES = 500
# Model and queryset methods that write. ``save`` and ``delete`` count only
# as a model's (a form's ``save(commit=False)`` and ``cache.delete(key)`` do
# not write rows), ``update`` only with keywords (``dict.update`` takes a mapping).
ORM_WRITES = {"create", "bulk_create", "bulk_update", "get_or_create", "update_or_create", "delete", "save", "update"}


def _orm_writes(path: Path, root: Path = ROOT) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name = node.func.attr
        if name not in ORM_WRITES:
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        commit = keywords.get("commit")
        if name == "save" and isinstance(commit, ast.Constant) and commit.value is False:
            continue
        if name == "delete" and node.args:
            continue
        if name == "update" and (node.args or not node.keywords):
            continue
        found.append(f"{path.relative_to(root)}:{node.lineno} .{name}(")
    return found


def _view_modules() -> list[Path]:
    return sorted(VIEWS.glob("*.py"))


def test_no_view_module_is_over_500_lines() -> None:
    long = [
        f"{p.relative_to(ROOT)} ({n} lines)" for p in _view_modules() if (n := len(p.read_text().splitlines())) > 500
    ]
    assert not long, "move what is not a view out of views/ (selectors, services):\n" + "\n".join(long)


def test_no_view_writes_through_the_orm() -> None:
    writes = [entry for path in _view_modules() for entry in _orm_writes(path)]
    assert not writes, "write through a service (reviewqueue/services/):\n" + "\n".join(writes)


def test_the_write_rule_finds_writes_and_passes_reads(tmp_path: Path) -> None:
    writes = tmp_path / "writes.py"
    writes.write_text(
        "Verdict.objects.create(item=item)\n"
        "Queue.objects.filter(pk=1).update(depth=0)\n"
        "item.save()\n"
        "form.save()\n"
        "rule.delete()\n"
        "RoutingRule.objects.bulk_create(rows)\n"
    )
    reads = tmp_path / "reads.py"
    reads.write_text(
        "context.update(extra)\n"
        "context.update({'a': 1})\n"
        "form.save(commit=False)\n"
        "cache.delete(KEY)\n"
        "Queue.objects.filter(pk=1).first()\n"
    )
    assert [entry.split(" ", 1)[1] for entry in _orm_writes(writes, tmp_path)] == [
        ".create(",
        ".update(",
        ".save(",
        ".save(",
        ".delete(",
        ".bulk_create(",
    ]
    assert _orm_writes(reads, tmp_path) == []
