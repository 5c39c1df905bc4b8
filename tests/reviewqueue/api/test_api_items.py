"""GET /api/items: a producer's own items only, filtered and paged by
keyset, each read as GET /api/items/{id} reads it (a verdict only once final)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from reviewqueue import services
from reviewqueue.tokens import issue_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def headers(db: None) -> dict[str, dict[str, str]]:
    made = {}
    for name, scopes in (("a", ["outputs"]), ("b", ["tasks"]), ("m", ["metrics"])):
        made[name] = {"Authorization": f"Bearer {issue_token(name=name, scopes=scopes)[1]}"}
    return made


def test_a_producer_sees_only_its_own_items(client: Client, headers: Any, admit_item: Any) -> None:
    mine = [admit_item(producer="a").item for _ in range(3)]
    admit_item(producer="b")
    body = client.get("/api/items", headers=headers["a"]).json()
    assert [row["item_id"] for row in body["items"]] == [item.pk for item in reversed(mine)]
    assert body["next"] is None
    assert body["items"][0] == client.get(f"/api/items/{mine[-1].pk}", headers=headers["a"]).json()


def test_it_pages_by_cursor(client: Client, headers: Any, admit_item: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr("reviewqueue.views.api_items.API_PAGE_SIZE", 2)
    mine = [admit_item(producer="a").item.pk for _ in range(5)]
    seen, after = [], ""
    while True:
        body = client.get("/api/items", {"after": after} if after else {}, headers=headers["a"]).json()
        seen += [row["item_id"] for row in body["items"]]
        if not body["next"]:
            break
        after = body["next"]
    assert seen == list(reversed(mine))


def test_a_verdict_shows_and_filters_only_once_final(
    client: Client, headers: Any, admit_item: Any, reviewer: Any, settings: Any
) -> None:
    settings.REVIEWQUEUE_UNDO_SECONDS = 3600
    item = admit_item(producer="a").item
    services.claim(reviewer=reviewer)
    services.decide(item_id=item.pk, reviewer=reviewer, approve=False, reason_label="unclear")
    rejected = client.get("/api/items", {"status": "rejected"}, headers=headers["a"]).json()
    assert rejected["items"] == []
    assert client.get("/api/items", {"decision": "reject"}, headers=headers["a"]).json()["items"] == []
    claimed = client.get("/api/items", {"status": "claimed"}, headers=headers["a"]).json()["items"]
    assert [row["item_id"] for row in claimed] == [item.pk] and claimed[0]["verdict"] is None
    settings.REVIEWQUEUE_UNDO_SECONDS = 0
    rejected = client.get("/api/items", {"status": "rejected"}, headers=headers["a"]).json()["items"]
    assert rejected[0]["verdict"]["reason_label"] == "unclear"


def test_a_bad_filter_is_a_400_naming_it(client: Client, headers: Any) -> None:
    response = client.get("/api/items", {"status": "nope", "after": "forged"}, headers=headers["a"])
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"status", "after"}
    assert client.get("/api/items", {"version": "x"}, headers=headers["a"]).status_code == 400


def test_it_needs_a_token_with_a_read_scope(client: Client, headers: Any) -> None:
    assert client.get("/api/items").status_code == 401
    refused = client.get("/api/items", headers=headers["m"])
    assert refused.status_code == 403 and refused.json()["missing_scope"] == "outputs or tasks"
    assert client.get("/api/items", headers=headers["b"]).status_code == 200


def test_a_nul_byte_is_a_400_not_a_server_error(client: Client, headers: Any) -> None:
    assert client.get("/api/items", {"q": "a\x00b"}, headers=headers["a"]).status_code == 400
    assert client.get("/api/stats", {"queue": "a\x00b"}, headers=headers["a"]).status_code == 400


def test_every_bad_filter_is_named_at_once_whatever_its_type(client: Client, headers: Any) -> None:
    """A bad number or date is named with the other bad filters, in the item
    list's own words, not alone in the schema's."""
    response = client.get(
        "/api/items",
        {"status": "nope", "version": "x", "since": "yesterday", "until": "2026-02-30"},
        headers=headers["a"],
    )
    assert response.status_code == 400
    fields = response.json()["fields"]
    assert set(fields) == {"status", "version", "since", "until"}
    assert fields["version"] == "Enter a whole number."
    assert fields["since"] == "Enter a valid date."


def test_the_schema_says_what_each_filter_takes(client: Client) -> None:
    """Read as text so the form can name every bad one, a number or a date
    still says what it wants, for the interactive reference and clients."""
    operation = client.get("/api/openapi.json").json()["paths"]["/api/items"]["get"]
    described = {p["name"]: p.get("description", "") for p in operation["parameters"]}
    assert set(described) == {"queue", "status", "decision", "label", "run", "version", "since", "until", "q", "after"}
    assert all(described.values()), [name for name, text in described.items() if not text]
    assert "YYYY-MM-DD" in described["since"] and "YYYY-MM-DD" in described["until"]
    assert "whole number" in described["version"]


@pytest.mark.parametrize("approve", [True, False])
def test_a_repeated_push_does_not_tell_a_verdict_inside_its_undo_window(
    client: Client, headers: Any, reviewer: Any, settings: Any, approve: bool
) -> None:
    """The answer to a repeated idempotency key names the first item's
    status: as GET /api/items/{id} shows it, never an undoable verdict."""
    settings.REVIEWQUEUE_UNDO_SECONDS = 3600
    body = {"idempotency_key": "k-1", "task_description": "Summarise", "final_output": "text"}

    def push() -> Any:
        return client.post("/api/outputs", body, content_type="application/json", headers=headers["a"]).json()

    item_id = push()["item_id"]
    services.claim(reviewer=reviewer)
    services.decide(item_id=item_id, reviewer=reviewer, approve=approve, reason_label="unclear")
    again = push()
    assert (again["outcome"], again["item_id"], again["status"]) == ("duplicate", item_id, "claimed")
    settings.REVIEWQUEUE_UNDO_SECONDS = 0
    assert push()["status"] == ("approved" if approve else "rejected")


@pytest.mark.parametrize("action", ["approve", "edit", "reject", "send_back"])
def test_inside_the_undo_window_no_read_or_filter_tells_the_verdict(
    client: Client, headers: Any, admit_item: Any, reviewer: Any, settings: Any, action: str
) -> None:
    """After each kind of verdict, and after its undo, the item, the list
    and every filter of it read exactly as they did while it was held."""
    from reviewqueue.models import ReviewItem, Verdict

    settings.REVIEWQUEUE_UNDO_SECONDS = 3600
    item = admit_item(producer="a").item
    services.claim(reviewer=reviewer)

    def seen() -> dict[str, Any]:
        views: dict[str, Any] = {"item": client.get(f"/api/items/{item.pk}", headers=headers["a"]).json()}
        filters = [("status", s) for s in ReviewItem.Status.values] + [("decision", d) for d in Verdict.Decision.values]
        filters += [("label", "unclear"), ("", "")]
        for name, value in filters:
            query = {name: value} if name else {}
            views[f"{name}={value}"] = client.get("/api/items", query, headers=headers["a"]).json()
        return views

    held = seen()
    if action == "send_back":
        services.send_back(item_id=item.pk, reviewer=reviewer, note="again")
    else:
        edited = "changed" if action == "edit" else ""
        approve = action != "reject"
        services.decide(
            item_id=item.pk, reviewer=reviewer, approve=approve, reason_label="unclear", edited_output=edited
        )
    assert seen() == held
    services.undo(reviewer=reviewer)
    assert seen() == held
