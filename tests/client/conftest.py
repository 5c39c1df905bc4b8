"""The client against a live server: gunicorn in its own process on the test
database, started the way the benches start theirs (bench/benchlib.py), so
every call crosses a real socket into the real WSGI app.

The tests write through the ORM (tokens, verdicts) and the server reads what
they wrote, so they use ``transactional_db``: committed rows, flushed after
each test.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.client.flavours import FLAVOURS
from tests.reviewqueue.worker_helpers import database_url

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "bench") not in sys.path:
    sys.path.insert(0, str(ROOT / "bench"))

import benchlib


@pytest.fixture(scope="module")
def live_url(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a gunicorn serving the test database; stopped before
    the test database is dropped."""
    port = benchlib.free_port()
    log_path = tmp_path_factory.mktemp("server") / "gunicorn.log"
    server = benchlib.start_server(database_url(), port, str(log_path), workers=1, threads=4)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        benchlib.stop_server(server)


@pytest.fixture
def issue(transactional_db: None) -> Callable[..., str]:
    """A producer token, issued as an operator issues one; returns the plain text."""
    from reviewqueue.tokens import issue_token

    def make(name: str = "agent-runner", scopes: tuple[str, ...] = ("outputs", "tasks")) -> str:
        _token, plain = issue_token(name=name, scopes=scopes)
        return plain

    return make


@pytest.fixture
def reviewer_user(transactional_db: None, django_user_model: Any) -> Any:
    from reviewqueue.access import ensure_groups

    user = django_user_model.objects.create_user(username="rita", password="pw-for-tests-1")
    user.groups.add(ensure_groups()["reviewer"])
    return user


@pytest.fixture
def decide_as_reviewer(reviewer_user: Any) -> Callable[..., None]:
    """Claim the next item as a reviewer and record a verdict on it, through the
    services the review page calls."""
    from reviewqueue import services

    def decide(item_id: int, *, approve: bool, reason_label: str = "", note: str = "") -> None:
        claimed = services.claim(reviewer=reviewer_user)
        assert claimed is not None and claimed.pk == item_id, "the pushed item is the one to review"
        services.decide(item_id=item_id, reviewer=reviewer_user, approve=approve, reason_label=reason_label, note=note)

    return decide


@pytest.fixture(params=sorted(FLAVOURS))
def connect(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``connect(url, token, **options)``: a Client, or an AsyncClient behind a
    blocking face (tests/client/flavours.py); every test taking this fixture
    runs once with each, so the two answer to one contract."""
    return FLAVOURS[request.param]
