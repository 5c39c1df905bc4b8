"""An item's metadata: the producer's own JSON object, pushed with the output,
kept on the item, read back with it, checked strictly (a hostile one is a 400
naming ``metadata`` and stores nothing), shown to operators in the admin and
never to reviewers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from reviewqueue import services
from reviewqueue.models import ReviewItem
from reviewqueue.services.admission import METADATA_MAX_BYTES, METADATA_MAX_DEPTH, checked_metadata
from reviewqueue.tokens import issue_token

pytestmark = pytest.mark.django_db

ROUTING = {"thread_id": "thread-7f3a-routing", "checkpoint": {"ns": "review:1", "step": 4}, "tags": ["a", 1, None]}


@pytest.fixture
def token(db: None) -> str:
    return issue_token(name="producer-a", scopes=["outputs"])[1]


def push(client: Client, token: str, **overrides: Any) -> Any:
    body = {"idempotency_key": "m-1", "task_description": "Summarise the incident", "final_output": "It began."}
    body.update(overrides)
    return client.post(
        "/api/outputs",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )


def read(client: Client, token: str, item_id: int) -> dict[str, Any]:
    response = client.get(f"/api/items/{item_id}", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.content
    return response.json()


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


def test_the_metadata_pushed_comes_back_with_the_item_as_sent(client: Client, token: str) -> None:
    pushed = push(client, token, metadata=ROUTING)
    assert pushed.status_code == 201, pushed.content
    item = ReviewItem.objects.get(pk=pushed.json()["item_id"])
    assert item.metadata_object() == ROUTING
    assert read(client, token, item.pk)["metadata"] == ROUTING


def test_an_item_pushed_without_metadata_reads_as_an_empty_object(client: Client, token: str) -> None:
    item_id = push(client, token).json()["item_id"]
    assert ReviewItem.objects.get(pk=item_id).metadata == ""
    assert read(client, token, item_id)["metadata"] == {}


def test_a_duplicate_push_keeps_the_first_metadata(client: Client, token: str) -> None:
    first = push(client, token, metadata={"run": 1}).json()
    again = push(client, token, metadata={"run": 2}).json()
    assert (again["outcome"], again["item_id"]) == ("duplicate", first["item_id"])
    assert read(client, token, first["item_id"])["metadata"] == {"run": 1}


def test_text_keeps_every_character_a_nul_included(client: Client, token: str) -> None:
    odd = {"emoji": "✓ 🚀", "nul": "a\u0000b", "quote": "\"'<>&", "": "empty key"}
    item_id = push(client, token, metadata=odd).json()["item_id"]
    assert read(client, token, item_id)["metadata"] == odd


REFUSED = {
    "a list": ([1, 2], "valid dictionary"),
    "a string": ("thread-1", "valid dictionary"),
    "too large": ({"blob": "x" * METADATA_MAX_BYTES}, f"at most {METADATA_MAX_BYTES}"),
    "too deep": (nested(METADATA_MAX_DEPTH + 1), f"deeper than {METADATA_MAX_DEPTH}"),
    "many keys": ({f"k{i}": 0 for i in range(METADATA_MAX_BYTES + 1)}, "bytes as JSON"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_metadata_that_is_not_a_small_json_object_is_refused_naming_it(client: Client, token: str, case: str) -> None:
    value, words = REFUSED[case]
    response = push(client, token, metadata=value)
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"] == "invalid" and list(body["fields"]) == ["metadata"]
    assert words in body["fields"]["metadata"]
    assert not ReviewItem.objects.exists(), "a refused push stores nothing"
    # nothing is lost: the same key with good metadata is a first push, not a duplicate
    assert push(client, token, metadata={"ok": True}).json()["outcome"] == "enqueued"


def test_the_largest_metadata_allowed_is_kept_whole(client: Client, token: str) -> None:
    value = {"blob": "x" * (METADATA_MAX_BYTES - len('{"blob":""}'))}
    assert len(json.dumps(value, separators=(",", ":")).encode()) == METADATA_MAX_BYTES
    item_id = push(client, token, metadata=value).json()["item_id"]
    assert read(client, token, item_id)["metadata"] == value
    assert push(client, token, idempotency_key="m-2", metadata=nested(METADATA_MAX_DEPTH)).status_code == 201


@pytest.mark.parametrize(
    "raw",
    [
        '{"lone": "\\ud800"}',  # a lone surrogate: not text, and a routing value is never rewritten
        '{"n": NaN}',  # not JSON, though Python's parser reads it
        '{"n": Infinity}',
    ],
)
def test_values_json_cannot_carry_are_refused_naming_metadata(client: Client, token: str, raw: str) -> None:
    body = '{"idempotency_key": "m-1", "task_description": "t", "final_output": "o", "metadata": ' + raw + "}"
    response = client.post(
        "/api/outputs", data=body, content_type="application/json", headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 400, response.content
    assert list(response.json()["fields"]) == ["metadata"]
    assert not ReviewItem.objects.exists()


def test_a_body_nested_past_the_parsers_limit_is_a_400_not_a_500(client: Client, token: str) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    body = '{"idempotency_key": "m-1", "task_description": "t", "final_output": "o", "metadata": {"k": ' + deep + "}}"
    response = client.post(
        "/api/outputs", data=body, content_type="application/json", headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 400, response.content[:300]
    assert not ReviewItem.objects.exists()


def test_the_service_refuses_what_a_python_caller_could_pass() -> None:
    with pytest.raises(services.InvalidInput, match="keys must be text") as refused:
        checked_metadata({1: "one"})
    assert refused.value.field == "metadata"
    with pytest.raises(services.InvalidInput, match="not a JSON value"):
        checked_metadata({"when": object()})
    assert checked_metadata({}) == checked_metadata(None) == ""


# --- who sees it ---------------------------------------------------------------------------------


def test_reviewers_never_see_the_metadata(client: Client, token: str, reviewer: User) -> None:
    marker = {"thread_id": "thread-secret-4411", "trace": "trace-secret-9902"}
    item_id = push(client, token, metadata=marker).json()["item_id"]
    client.force_login(reviewer)

    def shown() -> str:
        pages = [client.get(reverse("review:queue")), client.get(reverse("review:queue"), HTTP_HX_REQUEST="true")]
        return "".join(page.content.decode() for page in pages)

    claimed = services.claim(reviewer=reviewer)
    assert claimed is not None and claimed.pk == item_id
    card = shown()
    assert "Summarise the incident" in card, "the card is the one with the item"
    services.decide(item_id=item_id, reviewer=reviewer, approve=True)
    item_page = client.get(f"/review/items/{item_id}/")
    assert item_page.status_code == 200
    for page in (card, shown(), item_page.content.decode()):
        assert "secret-4411" not in page and "secret-9902" not in page and "metadata" not in page.lower()


def test_operators_read_the_metadata_in_the_admin(client: Client, token: str, operator: User) -> None:
    operator.is_staff = True
    operator.save()
    item_id = push(client, token, metadata={"thread_id": "thread-for-operators"}).json()["item_id"]
    client.force_login(operator)
    page = client.get(f"/admin/reviewqueue/reviewitem/{item_id}/change/").content.decode()
    assert "thread-for-operators" in page
    found = client.get("/admin/reviewqueue/reviewitem/", {"q": "thread-for-operators"}).content.decode()
    assert f"/admin/reviewqueue/reviewitem/{item_id}/change/" in found
