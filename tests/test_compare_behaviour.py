"""bench/compare_behaviour.py reads keys inside lists, so a key added to
each of several queues is named and may be allowed like a top-level one."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("compare_behaviour", ROOT / "bench" / "compare_behaviour.py")
assert _spec is not None and _spec.loader is not None
compare_behaviour = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_behaviour)


def _outputs(after_extra: dict[str, object]) -> tuple[str, str]:
    queues = [{"slug": "a", "rate": 1.0}, {"slug": "b", "rate": 2.0}]
    before = {"scenario": {"queues": queues}, "lost": 1.5}
    after = {"scenario": {"queues": [{**q, **after_extra} for q in queues]}, "lost": 1.5}
    return json.dumps(before), json.dumps(after)


def test_a_key_added_in_each_queue_is_named_with_its_index_and_may_be_allowed() -> None:
    before, after = _outputs({"initial_ages_min": []})
    differs, lines = compare_behaviour.compare(before, after, set())
    assert differs and lines == [
        "scenario.queues[0].initial_ages_min added: []",
        "scenario.queues[1].initial_ages_min added: []",
    ]
    for allowed in ("scenario.queues[].initial_ages_min", "*initial_ages_min"):
        differs, lines = compare_behaviour.compare(before, after, {allowed})
        assert not differs and all(line.endswith("(allowed)") for line in lines)


def test_a_changed_value_inside_a_list_is_never_allowed() -> None:
    before, after = _outputs({})
    after = after.replace('"rate": 2.0', '"rate": 2.5')
    differs, lines = compare_behaviour.compare(before, after, {"*rate"})
    assert differs and lines == ["scenario.queues[1].rate changed: 2.0 -> 2.5"]
