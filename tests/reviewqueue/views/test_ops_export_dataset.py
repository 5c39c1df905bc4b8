"""The dataset export: each verdict with the task text and the output it judged."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from reviewqueue import services

pytestmark = pytest.mark.django_db


def _body(response: Any) -> str:
    return b"".join(response.streaming_content).decode()


@pytest.fixture
def judged(admit_item: Any, reviewer: User) -> None:
    admit_item(task_description="Write is_even(n)", final_output='def is_even(n):\n    return n % 2 == 0  # "even"\n')
    admit_item(task_description="Write to_bin(n)", final_output="=cmd|' /C calc'!A0")
    for approve in (True, False):
        item = services.claim(reviewer=reviewer)
        services.decide(
            item_id=item.pk, reviewer=reviewer, approve=approve, reason_label="" if approve else "code_error"
        )


def test_the_jsonl_dataset_holds_task_output_and_verdict(client: Client, operator: User, judged: None) -> None:
    client.force_login(operator)
    response = client.get(reverse("ops:export_download"), {"format": "jsonl", "dataset": "on"})
    assert response.status_code == 200
    assert 'filename="dataset-' in response["Content-Disposition"]
    rows = [json.loads(line) for line in _body(response).splitlines()]
    assert [(r["task_description"], r["decision"]) for r in rows] == [
        ("Write is_even(n)", "approve"),
        ("Write to_bin(n)", "reject"),
    ]
    assert rows[0]["final_output"] == 'def is_even(n):\n    return n % 2 == 0  # "even"\n'
    assert rows[1]["reason_label"] == "code_error"


def test_the_csv_dataset_round_trips_multiline_output_and_escapes_formulas(
    client: Client, operator: User, judged: None
) -> None:
    client.force_login(operator)
    body = _body(client.get(reverse("ops:export_download"), {"format": "csv", "dataset": "on"}))
    rows = list(csv.DictReader(io.StringIO(body)))
    assert rows[0]["final_output"] == 'def is_even(n):\n    return n % 2 == 0  # "even"\n'
    assert rows[1]["final_output"].startswith("'=")


def test_the_plain_export_leaves_the_text_out(client: Client, operator: User, judged: None) -> None:
    client.force_login(operator)
    row = json.loads(_body(client.get(reverse("ops:export_download"), {"format": "jsonl"})).splitlines()[0])
    assert "final_output" not in row and "task_description" not in row


def test_the_command_exports_the_dataset_too(judged: None, tmp_path: Path) -> None:
    out = tmp_path / "data.jsonl"
    call_command("export_verdicts", "--format", "jsonl", "--dataset", "--no-progress", "-o", str(out))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[1]["final_output"] == "=cmd|' /C calc'!A0"
