"""The layer rule of docs/ARCHITECTURE.md: the pure packages never load Django.

Each import runs in a fresh interpreter, since this test process has Django
loaded already.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def test_the_check_itself_sees_django_when_it_is_imported() -> None:
    # Guards the test above against passing because it could not see anything.
    assert "django" in loaded_after_import("django.db")
