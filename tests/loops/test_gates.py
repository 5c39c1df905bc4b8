"""Filter-rule gates: one per gate the policy names, each failing bad output
and passing good."""

from __future__ import annotations

import pytest

from loops.gates import GATES, run_gates
from reviewqueue.policy import FILTER_GATES


def test_it_implements_every_gate_the_policy_names() -> None:
    assert {gate for gate, _ in FILTER_GATES.values()} <= set(GATES)


@pytest.mark.parametrize(
    ("gate", "bad", "good"),
    [
        ("python_syntax", "def f(:\n", "def f():\n    return 1\n"),
        ("well_formed", "   ", "A plain answer."),
        ("well_formed", "Dear [insert name],", "Dear Ada,"),
        ("well_formed", "bell\x07", "bell"),
        ("no_unverified_claims", "Fixed. All tests pass now.", "Fixed the off-by-one."),
        ("no_unverified_claims", "I have verified the output.", "The output follows."),
        ("no_todo", "x = 1  # TODO handle zero", "x = 1"),
        ("no_todo", "def f(x):\n    pass\n", "def f(x):\n    return x\n"),
        ("no_todo", "def f(x):\n    raise NotImplementedError\n", "def f(x):\n    raise ValueError(x)\n"),
    ],
)
def test_it_fails_the_bad_output_and_passes_the_good(gate: str, bad: str, good: str) -> None:
    assert GATES[gate](bad) is not None
    assert GATES[gate](good) is None


def test_it_names_each_failing_gate() -> None:
    reasons = run_gates("def f():\n    pass  # TODO", ["python_syntax", "no_todo", "well_formed"])
    assert len(reasons) == 1 and reasons[0].startswith("no_todo:")


def test_it_refuses_an_unknown_gate() -> None:
    with pytest.raises(KeyError):
        run_gates("x", ["no_such_gate"])
