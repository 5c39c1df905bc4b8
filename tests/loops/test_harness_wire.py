"""The wire between the candidate's and the checks' processes: plain data
round-trips exactly, anything else is refused, and a hostile frame is a
ProtocolError, never a value the checks' side would trust."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loops.harness import ProtocolError, decode, encode
from loops.redline import run_checks
from loops.spec import Check

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary()
# nan is never equal to itself, so as a key or a member it cannot be compared back.
keys = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary()
hashables = st.recursive(keys, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3), max_leaves=8)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(hashables, inner, max_size=4)
        | st.sets(hashables, max_size=4)
        | st.frozensets(hashables, max_size=4)
    ),
    max_leaves=20,
)


def same(a: object, b: object) -> bool:
    """Equal, with the same exact types all the way down (nan equal to nan)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b  # type: ignore[arg-type]
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=False))  # type: ignore[arg-type]
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())  # type: ignore[attr-defined,index]
    return a == b


@given(values)
def test_plain_data_round_trips_exactly(value: object) -> None:
    assert same(decode(encode(value)), value)


def test_subclasses_of_builtins_arrive_as_the_builtin_whatever_they_override() -> None:
    class Liar(int):
        def __eq__(self, other: object) -> bool:
            return True

        def __int__(self) -> int:
            return 99

        __hash__ = int.__hash__

    class Loud(str):
        def __str__(self) -> str:
            return "forged"

    class Rows(list):  # type: ignore[type-arg]
        def __iter__(self):  # type: ignore[no-untyped-def]
            return iter([1, 2, 3])

    value = decode(encode([Liar(5), Loud("real"), Rows([7])]))
    assert value == [5, "real", [7]]
    assert [type(v) for v in value] == [int, str, list]  # type: ignore[union-attr]


def test_other_objects_are_refused_without_a_handle_maker() -> None:
    with pytest.raises(TypeError, match="only plain data"):
        encode([object()])


@pytest.mark.parametrize(
    "frame",
    [
        b"",  # nothing
        b"X",  # unknown tag
        b"s\x00\x00\x00\x10abc",  # a length past the end
        b"l\xff\xff\xff\xffN",  # a count past the end (no allocation)
        b"i\x00\x00\x00\x01",  # an int cut short
        b"NN",  # trailing bytes
        b"h\x00\x00\x00\x01\x01",  # a handle where none is allowed
        b"S\x00\x00\x00\x01l\x00\x00\x00\x00",  # an unhashable set member
        b"s\x00\x00\x00\x01\xff",  # invalid UTF-8
        b"l\x00\x00\x00\x01" * 100 + b"N",  # nested past the limit
    ],
)
def test_a_hostile_frame_is_a_protocol_error(frame: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode(frame)


def test_a_candidate_that_writes_garbage_on_the_wire_fails_the_check() -> None:
    candidate = (
        "import os\n"
        "def double(n):\n"
        "    os.write(4, b'\\x00\\x00\\x00\\x02TT')\n"  # a forged 'ok'-looking reply, off the format
        "    return 2 * n\n"
    )
    result = run_checks(candidate, [Check(id="check_1", code="assert double(2) == 4")])
    assert result.signature == "ProtocolError:check_1"


def test_a_candidate_that_closes_the_wire_fails_every_check_after() -> None:
    candidate = "import os\ndef double(n):\n    os._exit(0)\n"
    checks = [Check(id="check_1", code="assert double(2) == 4"), Check(id="check_2", code="assert True")]
    result = run_checks(candidate, checks)
    assert result.failure_class == "CandidateExited"
    assert result.failed_checks == ("check_1", "check_2")


def test_the_harness_also_runs_from_source_when_the_sandbox_cannot_read_our_bytecode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from loops import sandbox

    monkeypatch.delenv(sandbox.MODE_ENV, raising=False)
    monkeypatch.setattr(sandbox, "_reads_our_bytecode", lambda *args: False)
    argv, prefix = sandbox.harness("checks", sandboxed=True)
    assert prefix == b"" and argv[-1] == sandbox.ROLE_SOURCES["checks"]
    checks = [Check(id="check_1", code="assert double(2) == 4"), Check(id="case_1", stdin="3\n", stdout="6\n")]
    assert run_checks(
        "def double(n):\n    return 2 * n\nif __name__ == '__main__':\n    print(double(int(input())))\n", checks
    ).passed
