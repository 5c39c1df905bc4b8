"""API tokens: hashed at rest, shown once, refused as soon as they are revoked."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.forms.models import model_to_dict
from django.test import Client

from reviewqueue.models import ApiToken
from reviewqueue.tokens import hash_token, issue_token


def _auth(token: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def _stored_text(token: ApiToken) -> str:
    token.refresh_from_db()
    return " ".join(str(value) for value in model_to_dict(token).values())


def test_it_stores_no_part_of_the_secret(db: None) -> None:
    token, plain = issue_token(name="ci", scopes=["outputs", "metrics"])
    secret = plain.split("_", 2)[2]
    stored = _stored_text(token)
    assert plain not in stored
    assert secret not in stored
    assert secret[:12] not in stored
    assert token.token_hash == hash_token(plain)


def test_it_prints_the_token_once_on_stdout_and_only_its_prefix_elsewhere(db: None, client: Client) -> None:
    out, err = io.StringIO(), io.StringIO()
    call_command("create_api_token", "ci-runner", stdout=out, stderr=err)
    plain = out.getvalue().strip()
    assert plain.startswith("rq_") and "\n" not in plain
    assert plain not in err.getvalue()
    token = ApiToken.objects.get(name="ci-runner")
    assert token.prefix in err.getvalue()
    assert plain not in _stored_text(token)
    assert client.get("/api/stats", **_auth(plain)).status_code == 200


def test_each_call_issues_a_different_token(db: None) -> None:
    outputs = []
    for _ in range(2):
        out = io.StringIO()
        call_command("create_api_token", "same-name", stdout=out, stderr=io.StringIO())
        outputs.append(out.getvalue().strip())
    assert outputs[0] != outputs[1]


@pytest.mark.parametrize("url", ["/api/stats", "/metrics"])
def test_a_revoked_token_is_refused_at_once(client: Client, db: None, url: str) -> None:
    token, plain = issue_token(name="ci", scopes=["outputs", "metrics"])
    assert client.get(url, **_auth(plain)).status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=token.created_at)
    assert client.get(url, **_auth(plain)).status_code == 401


def test_an_admin_revokes_a_token_with_the_admin_action(client: Client, db: None) -> None:
    token, plain = issue_token(name="ci", scopes=["outputs"])
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-1")
    client.force_login(admin)
    response = client.post("/admin/reviewqueue/apitoken/", {"action": "revoke", "_selected_action": [str(token.pk)]})
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    client.logout()
    assert client.get("/api/stats", **_auth(plain)).status_code == 401


def test_the_admin_never_shows_a_token_it_does_not_have(client: Client, db: None) -> None:
    token, plain = issue_token(name="ci", scopes=["outputs"])
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-1")
    client.force_login(admin)
    page = client.get(f"/admin/reviewqueue/apitoken/{token.pk}/change/").content.decode()
    assert plain.split("_", 2)[2] not in page


@pytest.mark.parametrize("name", ["loop:mock", "  loop:claude", "loop:"])
def test_the_admin_refuses_to_rename_a_token_to_a_reserved_producer_name(client: Client, db: None, name: str) -> None:
    """The rule create_api_token applies (built-in loop runs file their items
    under loop:<agent>), applied in the admin too."""
    from django.core.management import call_command
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="kept for built-in loop runs"):
        call_command("create_api_token", name)
    token, _ = issue_token(name="ci", scopes=["outputs"])
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-1")
    client.force_login(admin)
    response = client.post(
        f"/admin/reviewqueue/apitoken/{token.pk}/change/", {"name": name, "scopes": ["outputs"], "webhook_url": ""}
    )
    assert response.status_code == 200  # the form again, with the error
    assert "kept for built-in loop runs" in response.content.decode()
    token.refresh_from_db()
    assert token.name == "ci"
    renamed = client.post(
        f"/admin/reviewqueue/apitoken/{token.pk}/change/", {"name": "ci-2", "scopes": ["outputs"], "webhook_url": ""}
    )
    assert renamed.status_code == 302
    token.refresh_from_db()
    assert token.name == "ci-2"


@pytest.mark.parametrize(
    "header",
    ["Bearer", "Bearer ", "Basic cnE6eA==", "Bearer rq_", "Bearer rq_00000000_", "Bearer rq_zz_zz", "bearer \x00"],
)
def test_it_answers_401_to_malformed_credentials(client: Client, db: None, header: str) -> None:
    issue_token(name="ci", scopes=["outputs"])
    response = client.get("/api/stats", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401


def test_a_producer_token_reads_only_its_own_items(client: Client, admit_item: Any) -> None:
    _, mine = issue_token(name="mine", scopes=["outputs"])
    _, other = issue_token(name="other", scopes=["outputs"])
    item = admit_item(producer="mine").item
    assert client.get(f"/api/items/{item.pk}", **_auth(mine)).status_code == 200
    assert client.get(f"/api/items/{item.pk}", **_auth(other)).status_code == 404


def test_it_creates_a_token_from_the_command_line(db: None) -> None:
    out = io.StringIO()
    call_command("create_api_token", "ci-producer", "--metrics", stdout=out, stderr=io.StringIO())
    plain = out.getvalue().strip()
    token = ApiToken.objects.get(name="ci-producer")
    assert token.token_hash == hash_token(plain)
    assert token.scopes == ["outputs", "metrics"]
