"""What docs/API.md promises about the bytes on the wire, checked as stated:
lone surrogates and NUL in text are replaced, in identifiers refused; a body
that is not JSON in UTF-8 is a 400 naming the body; a body over the limit is
a 413 whether its length is declared or it comes chunked (a real HTTP request
with Transfer-Encoding: chunked against gunicorn, the production server)."""

from __future__ import annotations

import http.client
import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.conf import settings as django_settings
from django.core.handlers.wsgi import LimitedStream
from django.db import connection
from django.test import Client

from reviewqueue.models import LoopRun, ReviewItem
from reviewqueue.tokens import issue_token

ROOT = Path(__file__).resolve().parents[3]
TASK = {"id": "t", "description": "Say hi", "kind": "open"}
SMALL_LIMIT = 64 * 1024  # the gunicorn child's DATA_UPLOAD_MAX_MEMORY_SIZE: quick to exceed


def _output(**fields: Any) -> dict[str, Any]:
    return {"idempotency_key": "k", "task_description": "t", "final_output": "o", **fields}


@pytest.fixture
def headers(db: None) -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(name='p', scopes=['outputs', 'tasks'])[1]}"}


def _post(client: Client, url: str, body: str | bytes, headers: dict[str, str]) -> Any:
    with mock.patch("reviewqueue.tasks.loops.run_loop.delay"):
        return client.post(url, body, content_type="application/json", headers=headers)


# --- text: replaced; identifiers: refused -----------------------------------------------------


@pytest.mark.parametrize("bad", ["\x00", chr(0xD800), chr(0xDFFF)], ids=["nul", "high-surrogate", "low-surrogate"])
def test_nul_and_lone_surrogates_in_text_are_stored_as_replacement_characters(
    client: Client, headers: dict[str, str], bad: str
) -> None:
    fields = {"final_output": f"a{bad}b", "task_description": f"c{bad}d", "last_error": bad, "task_id": f"t{bad}"}
    response = _post(client, "/api/outputs", json.dumps(_output(**fields)), headers)
    assert response.status_code == 201
    item = ReviewItem.objects.get()
    assert (item.final_output, item.task_description, item.last_error, item.task_id) == (
        "a\ufffdb",
        "c\ufffdd",
        "\ufffd",
        "t\ufffd",
    )


@pytest.mark.parametrize("bad", ["\x00", "\ud800"], ids=["nul", "surrogate"])
def test_nul_and_lone_surrogates_in_a_task_are_stored_as_replacement_characters(
    client: Client, headers: dict[str, str], bad: str
) -> None:
    task = {**TASK, "description": f"Say{bad}hi"}
    response = _post(client, "/api/tasks", json.dumps({"task": task, "run_id": "r"}), headers)
    assert response.status_code == 201
    assert LoopRun.objects.get().task["description"] == "Say\ufffdhi"


@pytest.mark.parametrize("bad", ["\x00", "\ud800", "\x1b"], ids=["nul", "surrogate", "escape"])
def test_an_idempotency_key_with_nul_or_a_lone_surrogate_is_refused(
    client: Client, headers: dict[str, str], bad: str
) -> None:
    response = _post(client, "/api/outputs", json.dumps(_output(idempotency_key=f"k{bad}")), headers)
    assert response.status_code == 400
    assert "idempotency_key" in response.json()["fields"]
    assert not ReviewItem.objects.exists()


@pytest.mark.parametrize("bad", ["\x00", "\ud800", "\x1b"], ids=["nul", "surrogate", "escape"])
def test_a_run_id_with_nul_or_a_lone_surrogate_is_refused(client: Client, headers: dict[str, str], bad: str) -> None:
    response = _post(client, "/api/tasks", json.dumps({"task": TASK, "run_id": f"r{bad}"}), headers)
    assert response.status_code == 400
    assert "run_id" in response.json()["fields"]
    assert not LoopRun.objects.exists()


@pytest.mark.parametrize("path", ["/api/tasks/%00", "/api/tasks/r%00", "/api/tasks/%ED%A0%80"])
def test_a_run_id_no_run_can_have_is_not_found(client: Client, headers: dict[str, str], path: str) -> None:
    assert client.get(path, headers=headers).status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        b'{"idempotency_key": "k", "task_description": "t", "final_output": "\xff\xfe"}',
        b'{"idempotency_key": "k", "task_description": "t", "final_output": "a\x00b"}',
    ],
    ids=["not-utf8", "raw-nul"],
)
def test_a_body_that_is_not_json_in_utf8_is_refused_naming_the_body(
    client: Client, headers: dict[str, str], body: bytes
) -> None:
    response = _post(client, "/api/outputs", body, headers)
    assert response.status_code == 400
    assert response.json()["fields"] == {"body": "must be JSON in UTF-8"}
    assert not ReviewItem.objects.exists()


def test_a_lone_surrogate_sent_as_raw_bytes_is_replaced_like_an_escaped_one(
    client: Client, headers: dict[str, str]
) -> None:
    body = b'{"idempotency_key": "k", "task_description": "t", "final_output": "a\xed\xa0\x80b"}'
    assert _post(client, "/api/outputs", body, headers).status_code == 201
    assert ReviewItem.objects.get().final_output == "a\ufffdb"


# --- bodies over the limit, over real HTTP ---------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def gunicorn(transactional_db: None, tmp_path: Path) -> Iterator[int]:
    """gunicorn on the test database with a small body limit; yields its port."""
    port = _free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "reviewqueue.settings",
        "DATABASE_URL": _database_url(),
        "DATA_UPLOAD_MAX_MEMORY_SIZE": str(SMALL_LIMIT),
        "SECRET_KEY": django_settings.SECRET_KEY,
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "0",
        "LOG_LEVEL": "ERROR",
        "REVIEWQUEUE_VAR_DIR": str(tmp_path),
    }
    binary = Path(sys.executable).with_name("gunicorn")
    log = (tmp_path / "gunicorn.log").open("wb")
    proc = subprocess.Popen(
        [str(binary), "reviewqueue.wsgi", "-w", "1", "-b", f"127.0.0.1:{port}", "--log-level", "warning"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, (tmp_path / "gunicorn.log").read_text()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, "gunicorn did not start"
                time.sleep(0.2)
        yield port
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
        log.close()


def _chunks(body: bytes, size: int = 8192) -> Iterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


def _send(port: int, body: bytes, token: str, *, chunked: bool) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    try:
        if chunked:
            headers["Transfer-Encoding"] = "chunked"
            conn.request("POST", "/api/outputs", body=_chunks(body), headers=headers, encode_chunked=True)
        else:
            conn.request("POST", "/api/outputs", body=body, headers=headers)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server answered and closed before reading it all: the answer is still there
    response = conn.getresponse()
    data = json.loads(response.read() or b"{}")
    conn.close()
    return response.status, data


def _token() -> str:
    return issue_token(name="p", scopes=["outputs"])[1]


def test_a_chunked_body_over_the_limit_is_refused_with_413(gunicorn: int) -> None:
    body = json.dumps(_output(final_output="x" * (SMALL_LIMIT * 3))).encode()
    status, data = _send(gunicorn, body, _token(), chunked=True)
    assert (status, data["error"]) == (413, "payload_too_large")
    assert not ReviewItem.objects.exists()


def test_a_chunked_body_under_the_limit_is_read_whole(gunicorn: int) -> None:
    text = "".join(f"line {n}\n" for n in range(3_000))
    body = json.dumps(_output(final_output=text)).encode()
    assert len(body) < SMALL_LIMIT
    status, data = _send(gunicorn, body, _token(), chunked=True)
    assert (status, data["outcome"]) == (201, "enqueued")
    assert ReviewItem.objects.get().final_output == text


def test_a_declared_body_over_the_limit_is_refused_with_413(gunicorn: int) -> None:
    body = json.dumps(_output(final_output="x" * (SMALL_LIMIT * 3))).encode()
    status, data = _send(gunicorn, body, _token(), chunked=False)
    assert (status, data["error"]) == (413, "payload_too_large")
    assert not ReviewItem.objects.exists()


def test_a_chunked_request_whose_server_passed_no_body_on_is_told_to_send_a_length(
    client: Client, headers: dict[str, str]
) -> None:
    # Django's development server hands the application no chunked body at all:
    # its stream is limited to the Content-Length, which a chunked request lacks.
    unread = LimitedStream(io.BytesIO(json.dumps(_output()).encode()), 0)
    extra = {"HTTP_TRANSFER_ENCODING": "chunked", "CONTENT_LENGTH": "", "wsgi.input": unread}
    response = client.post("/api/outputs", b"", content_type="application/json", headers=headers, **extra)
    assert response.status_code == 411
    assert response.json()["error"] == "length_required"
    assert not ReviewItem.objects.exists()
