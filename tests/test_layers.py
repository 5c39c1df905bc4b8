"""The layer rules of docs/ARCHITECTURE.md: the pure packages never load
Django, the dashboard's statistics load no numpy, and no import cycle exists.

Each import runs in a fresh interpreter, since this test process has Django
loaded already. The cycle check reads the import graph that grimp builds from
the source (function-level imports included).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]

PURE_MODULES = [
    "reviewqueue.policy",
    "loops",
    "loops.runner",
    "loops.redline",
    "loops.hints",
    "loops.agents",
    "loops.bench",
    "loops.__main__",
    "loops.intervals",
    "loops.reply",
    "loops.result",
    "loops.spec",
    "simulation",
    "simulation.cli",
    "simulation.model",
    "simulation.plot",
]


def loaded_after_import(module: str) -> set[str]:
    code = f"import importlib, sys; importlib.import_module({module!r}); print('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    return set(done.stdout.split())


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_module_loads_no_django(module: str) -> None:
    loaded = loaded_after_import(module)
    assert module in loaded
    assert not {m for m in loaded if m == "django" or m.startswith("django.")}
    assert not {m for m in loaded if m == "celery" or m.startswith("celery.")}


def test_the_client_loads_neither_django_nor_celery() -> None:
    # Producers install the client without the server's dependencies.
    loaded = loaded_after_import("reviewqueue.client")
    assert {"reviewqueue.client", "httpx"} <= loaded
    assert not {m for m in loaded if m.split(".")[0] in ("django", "celery", "kombu", "ninja")}


@pytest.mark.parametrize(
    ("adapter", "framework"), [("reviewqueue.integrations.langgraph", "langgraph"), ("reviewqueue.mcp", "mcp")]
)
def test_the_adapters_load_neither_django_nor_celery(adapter: str, framework: str) -> None:
    # Each adapter is an extra over the client, installed where the agent runs.
    loaded = loaded_after_import(adapter)
    assert {adapter, "reviewqueue.client", framework} <= loaded
    assert not {m for m in loaded if m.split(".")[0] in ("django", "celery", "kombu", "ninja")}


def test_the_core_install_pulls_no_adapter_framework_and_the_extras_pin_theirs() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]

    def names(requirements: list[str]) -> set[str]:
        return {r.split("==")[0].split("[")[0].strip().lower() for r in requirements}

    assert not names(project["dependencies"]) & {"langgraph", "langgraph-checkpoint-sqlite", "mcp"}
    assert names(extras["langgraph"]) == {"langgraph", "langgraph-checkpoint-sqlite"}
    assert names(extras["mcp"]) == {"mcp"}
    for requirement in extras["langgraph"] + extras["mcp"]:
        assert "==" in requirement and requirement in extras["dev"], requirement  # the tests run the pinned ones


def test_the_check_itself_sees_django_when_it_is_imported() -> None:
    # Guards the test above against passing because it could not see anything.
    assert "django" in loaded_after_import("django.db")


# ---------------------------------------------------------------- numpy


def test_what_the_statistics_import_from_loops_loads_no_numpy() -> None:
    # reviewqueue.stats needs Django, so its loops imports are loaded alone.
    graph = grimp.build_graph("reviewqueue", "loops", cache_dir=None)
    from_loops = sorted(
        m for m in graph.find_modules_directly_imported_by("reviewqueue.stats") if m.startswith("loops")
    )
    assert "loops.intervals" in from_loops  # the Wilson interval of the audit
    for module in from_loops:
        assert "numpy" not in loaded_after_import(module), module


# ---------------------------------------------------------------- import cycles

CYCLE_PACKAGES = ("loops", "simulation", "reviewqueue")


def import_cycles(graph: grimp.ImportGraph) -> list[tuple[str, ...]]:
    """One cycle per strongly connected group of modules, as a chain of
    imports that starts and ends at the same module (Tarjan's search)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            groups.append(group)

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    cycles = []
    for group in groups:
        start = min(group)
        if len(group) == 1 and not graph.direct_import_exists(importer=start, imported=start):
            continue
        step = min(m for m in graph.find_modules_directly_imported_by(start) if m in group)
        back = graph.find_shortest_chain(importer=step, imported=start) or (step,)
        cycles.append((start, *back) if step != start else (start, start))
    return cycles


@pytest.fixture(scope="module")
def import_graph() -> grimp.ImportGraph:
    graph = grimp.build_graph(*CYCLE_PACKAGES, cache_dir=None)
    # The graph must be this checkout's source, not another copy on the path.
    for package in CYCLE_PACKAGES:
        assert Path(__import__(package).__file__).resolve().is_relative_to(ROOT), package
    return graph


@pytest.mark.parametrize(
    "package",
    [
        "loops",
        "simulation",
        # reviewqueue: the Django project (services, tasks, views); same rule.
        pytest.param("reviewqueue", id="reviewqueue"),
    ],
)
def test_no_import_cycle(import_graph: grimp.ImportGraph, package: str) -> None:
    cycles = [c for c in import_cycles(import_graph) if any(m.split(".")[0] == package for m in c)]
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_cycle_check_itself_finds_a_cycle() -> None:
    # Guards the test above against passing because it could not see a cycle.
    graph = grimp.ImportGraph()
    for module in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(module)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.z")
    graph.add_import(importer="a.z", imported="a.x")
    assert import_cycles(graph) == [("a.x", "a.y", "a.z", "a.x")]
