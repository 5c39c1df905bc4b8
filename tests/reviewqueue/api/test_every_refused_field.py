"""One 400 names every refused field: a producer that sends several bad
fields learns of all of them at once, whether a field fails for its type
(JSON true for a number, nested junk for text) or past it (an unknown queue,
a callback URL the server will not call, an item that was not sent back),
and never gets a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from hypothesis import given
from hypothesis import strategies as st

from reviewqueue.tokens import issue_token

from ..hostile_inputs import HYPOTHESIS

HOOK = "http://127.0.0.1:8999/hook"
TASK = {"id": "t", "description": "Say hi", "kind": "open"}

junk = st.recursive(
    st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False), st.text(max_size=5)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=6,
).filter(lambda v: isinstance(v, list | dict))
deep: dict[str, Any] = {}
for _ in range(10):
    deep = {"d": deep}

SHARED = {
    "callback_url": [
        "http://[::1/",
        "http://localhost..:8999/hook",
        "http://a\u2100b:8999/",
        "http://xn--.example/",
        "http://evil.example/hook",
        "ftp://127.0.0.1:8999/",
        HOOK + "\x00",
        5,
        True,
    ],
    "queue": ["nope", "a\x00b", "q" * 100_000, 5, False],
}
# Each field's bad values: any one of them must be refused naming that field.
BAD_OUTPUT: dict[str, list[Any]] = {
    **SHARED,
    "idempotency_key": ["", "   ", "a\x00b", "x" * 300_000, 5, True],
    "task_description": ["", "  \n ", 5, False],
    "final_output": [5, True, 1.5],
    "cutoff_reason": ["nope", "\x00", 5, True],
    "last_error": [5, True],
    "attempt_count": [True, False, -1, 10_001, "x", 1.5, 10**40],
    "priority": [True, False, 1001, "high", 2.5],
    "draft": ["maybe", 2],
    "label": ["gold", "\x00", 1],
    "task_id": ["x" * 201, 5],
    "task_kind": ["x" * 21, 5],
    "source_run_id": ["x" * 201, 5],
    "reviewed_attempt": [True, -1, "x"],
    "checks_passed": [True, -1, 10_001, "x"],
    "checks_total": [True, False, 0, 10_001, "x"],
    "failing_checks": ["junk", [{"id": ""}], [{"id": "   "}], [{"about": "a"}], [[]], [{"id": "a", "about": 5}]],
    "reviewed_score": [True, False, 1.5, -0.1, "x"],
    "previous_item": [True, 0, 99_999, "x"],
    "metadata": [[1], 5, {"a": "\ud800"}, deep, {"k": "x" * 9000}],
}
BAD_TASK: dict[str, list[Any]] = {
    **SHARED,
    "task": [[1], "x", {"id": "t"}, {**TASK, "kind": True}, {**TASK, "id": "\x00", "max_steps": "x"}, {}],
    "run_id": ["", "a\x00b", "x" * 201, 5, True],
    "agent": ["x", True, 0],
}
# Fields whose type any list or object fails: nested junk is refused there too.
NOT_CONTAINERS = set(BAD_OUTPUT) - {"metadata", "failing_checks", "draft"} | {"run_id", "agent"}


def bad_bodies(bad: dict[str, list[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    def values(name: str) -> st.SearchStrategy[Any]:
        chosen = st.sampled_from(bad[name])
        return st.one_of(chosen, junk) if name in NOT_CONTAINERS else chosen

    names = st.lists(st.sampled_from(sorted(bad)), min_size=1, max_size=len(bad), unique=True)
    return names.flatmap(lambda picked: st.fixed_dictionaries({name: values(name) for name in picked}))


@pytest.fixture
def token(db: None, settings: Any) -> str:
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1:8999"]
    return issue_token(name="acme", scopes=["outputs", "tasks"], webhook_url=HOOK)[1]


def refused(client: Client, token: str, path: str, body: dict[str, Any]) -> set[str]:
    data = json.dumps(body, ensure_ascii=True)  # a lone surrogate travels as a \\ud800 escape
    response = client.post(path, data, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 400, (response.status_code, response.content[:300])
    answer = response.json()
    assert answer["fields"] and all(isinstance(v, str) and v for v in answer["fields"].values())
    return {name.split(".")[0] for name in answer["fields"]}


@HYPOTHESIS
@given(bad=bad_bodies(BAD_OUTPUT))
def test_an_output_with_bad_fields_is_one_400_naming_each_of_them(client: Client, token: str, bad: dict) -> None:
    body = {"idempotency_key": "k-1", "task_description": "t", "final_output": "o", **bad}
    assert refused(client, token, "/api/outputs", body) == set(bad)


@HYPOTHESIS
@given(bad=bad_bodies(BAD_TASK))
def test_a_task_with_bad_fields_is_one_400_naming_each_of_them(client: Client, token: str, bad: dict) -> None:
    body = {"task": TASK, "run_id": "r-1", **bad}
    assert refused(client, token, "/api/tasks", body) == set(bad)


@pytest.mark.parametrize("field", ["attempt_count", "priority", "reviewed_attempt", "reviewed_score", "previous_item"])
@pytest.mark.parametrize("value", [True, False])
def test_json_true_and_false_are_no_numbers(client: Client, token: str, field: str, value: bool) -> None:
    """Python's bool is an int: without a check, true was taken as 1."""
    body = {"idempotency_key": "k-1", "task_description": "t", "final_output": "o", field: value}
    assert refused(client, token, "/api/outputs", body) == {field}


def test_a_refused_callback_url_alone_keeps_its_own_error_code(client: Client, token: str) -> None:
    body = {"idempotency_key": "k-1", "task_description": "t", "final_output": "o", "callback_url": "http://[::1/"}
    response = client.post(
        "/api/outputs", json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert response.status_code == 400
    assert response.json()["error"] == "callback_url_invalid"
    assert list(response.json()["fields"]) == ["callback_url"]


def test_fields_refused_past_their_types_are_named_together(client: Client, token: str) -> None:
    """Checks that admit() and the API make after the types (one field against
    another, the database, the allow-list) each name their own field."""
    bad = {
        "attempt_count": 2,
        "reviewed_attempt": 3,
        "checks_passed": 3,
        "failing_checks": [{"id": "  "}],
        "metadata": deep,
        "queue": "nope",
        "previous_item": 99_999,
        "callback_url": "http://evil.example/hook",
        "task_description": "   ",
    }
    body = {"idempotency_key": "k-1", "final_output": "o", **bad}
    assert refused(client, token, "/api/outputs", body) == set(bad) - {"attempt_count"}


@pytest.mark.parametrize("depth", [40, 500, 800])
def test_a_deeply_nested_task_is_a_400_naming_task(client: Client, token: str, depth: int) -> None:
    """Nesting that the JSON parser takes (it stops near 900 levels) used to
    exhaust the stack while the task's text was cleaned: a 500."""
    body = {"task": {**TASK, "x": "PLACEHOLDER"}, "run_id": "r-1"}
    data = json.dumps(body).replace('"PLACEHOLDER"', "[" * depth + "]" * depth)
    response = client.post("/api/tasks", data, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 400, response.content[:300]
    assert "nested deeper than" in response.json()["fields"]["task"]
