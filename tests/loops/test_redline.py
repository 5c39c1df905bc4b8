"""The demand and format red lines on the built-in tasks: verdicts, isolation,
limits, and what a failure reports."""

from __future__ import annotations

import pytest

from loops.redline import demand_red_line, extract_code, format_problem, run_checks
from loops.spec import Check, Task


def test_it_passes_a_correct_candidate(suite: dict[str, Task]) -> None:
    assert demand_red_line(suite["is_even"], "def is_even(n):\n    return n % 2 == 0\n").passed


def test_it_reports_error_class_and_check_id_never_the_assertion(suite: dict[str, Task]) -> None:
    result = demand_red_line(suite["to_bin"], "def to_bin(n):\n    return bin(n)[2:]\n")
    assert not result.passed
    assert result.signature == "AssertionError:check_2"
    text = repr(result)
    assert "to_bin(8)" not in text and "'100'" not in text


def test_it_drops_a_custom_assertion_message() -> None:
    checks = [Check(id="check_1", code="assert f() == 2, 'expected f() to be exactly 2'")]
    result = run_checks("def f():\n    return 1\n", checks)
    assert result.signature == "AssertionError:check_1"
    assert "exactly" not in repr(result)


def test_it_runs_input_output_cases() -> None:
    checks = [Check(id="case_1", stdin="3\n", stdout="6\n")]
    assert run_checks("print(int(input()) * 2)", checks).passed
    assert run_checks("print(int(input()) + 2)", checks).signature == "AssertionError:case_1"


def test_it_reads_the_code_from_a_fenced_answer() -> None:
    assert extract_code("Here:\n```python\nx = 1\n```\nbye") == "x = 1\n"
    assert extract_code("x = 2") == "x = 2"


def test_it_runs_in_an_empty_directory_without_inherited_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_API_KEY", "sk-do-not-leak")
    candidate = (
        "import os\n"
        "assert 'LLM_API_KEY' not in os.environ, 'env'\n"
        "assert set(os.environ) <= {'LC_CTYPE', 'PWD'}, 'env keys'\n"
        "assert os.listdir('.') == [], 'cwd'\n"
        "ok = True\n"
    )
    result = run_checks(candidate, [Check(id="check_1", code="assert ok")])
    assert result.passed, result


def test_it_times_out_an_endless_loop() -> None:
    result = run_checks("while True:\n    pass\n", [Check(id="check_1", code="assert True")], timeout_s=1)
    assert result.signature.startswith(("Timeout", "ResourceLimit"))


def test_it_limits_memory() -> None:
    result = run_checks(
        "blob = bytearray(2 * 1024**3)\n", [Check(id="check_1", code="assert True")], memory_bytes=256 * 1024**2
    )
    assert not result.passed
    assert result.failure_class in {"MemoryError", "ResourceLimit"}


def test_it_reports_what_the_candidate_raised() -> None:
    result = run_checks("def f():\n    return offset\n", [Check(id="check_1", code="f()")])
    assert result.signature == "NameError:check_1"
    assert result.messages == ("name 'offset' is not defined",)


def test_it_checks_the_format_red_line(suite: dict[str, Task]) -> None:
    assert format_problem(suite["is_even"], "def f(:") is not None
    assert format_problem(suite["is_even"], "def f(): pass") is None
    assert format_problem(suite["service_card"], "{}") is not None  # schema: required fields
    assert format_problem(suite["service_card"], '{"name": "a", "purpose": "b"}') is None
    assert format_problem(suite["release_note"], "anything") is None
