"""Settings read from the environment: a typo stops start-up with the knob's
name instead of quietly picking a value."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from reviewqueue.settings import envbool, envint

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("value", ["1", "true", "Yes", " ON "])
def test_yes_words_read_as_true(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("RQ_TEST_KNOB", value)
    assert envbool("RQ_TEST_KNOB", False) is True


@pytest.mark.parametrize("value", ["0", "false", "No", "off"])
def test_no_words_read_as_false(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("RQ_TEST_KNOB", value)
    assert envbool("RQ_TEST_KNOB", True) is False


@pytest.mark.parametrize("value", [None, "", "  "])
def test_an_unset_or_empty_knob_keeps_its_default(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    if value is None:
        monkeypatch.delenv("RQ_TEST_KNOB", raising=False)
    else:
        monkeypatch.setenv("RQ_TEST_KNOB", value)
    assert envbool("RQ_TEST_KNOB", True) is True
    assert envint("RQ_TEST_KNOB", 7) == 7


@pytest.mark.parametrize("value", ["ture", "flase", "2", "enabled"])
def test_a_typo_in_a_yes_no_knob_raises_and_names_it(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("RQ_TEST_KNOB", value)
    with pytest.raises(ImproperlyConfigured, match=f"RQ_TEST_KNOB='{value}' is not a yes/no value"):
        envbool("RQ_TEST_KNOB", False)


def test_a_number_knob_that_is_not_a_number_raises_and_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RQ_TEST_KNOB", "15m")
    with pytest.raises(ImproperlyConfigured, match="RQ_TEST_KNOB='15m' is not a whole number"):
        envint("RQ_TEST_KNOB", 0)


def test_the_project_refuses_to_start_with_a_mistyped_security_knob() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "reviewqueue.settings", "SECURE_SSL_REDIRECT": "ture"}
    started = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert started.returncode != 0
    assert "SECURE_SSL_REDIRECT='ture' is not a yes/no value" in started.stderr


def _database_settings(**env: str) -> str:
    code = "from django.conf import settings as s; d = s.DATABASES['default']; print(d['CONN_MAX_AGE'], d['CONN_HEALTH_CHECKS'])"
    inherited = {k: v for k, v in os.environ.items() if k != "DB_CONN_MAX_AGE"}
    environment = {**inherited, "DJANGO_SETTINGS_MODULE": "reviewqueue.settings", **env}
    done = subprocess.run(
        [sys.executable, "-c", code], env=environment, cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_postgresql_connections_are_kept_open_and_checked_before_reuse() -> None:
    assert _database_settings(DATABASE_URL="postgres://u@127.0.0.1:5432/db") == "600 True"
    assert _database_settings(DATABASE_URL="postgres://u@127.0.0.1:5432/db", DB_CONN_MAX_AGE="0") == "0 True"


def test_sqlite_connections_close_after_each_request() -> None:
    assert _database_settings(DATABASE_URL="sqlite:///tmp-unused.sqlite3") == "0 True"
