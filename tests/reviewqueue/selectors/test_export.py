"""Verdict export: CSV and JSON Lines, from the export page and from the command line."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from reviewqueue import services
from reviewqueue.export import csv_safe
from reviewqueue.models import Verdict

pytestmark = pytest.mark.django_db


def _decide(reviewer: User, *, approve: bool, note: str = "", now: Any = None) -> Verdict:
    item = services.claim(reviewer=reviewer, now=now)
    assert item is not None
    return services.decide(
        item_id=item.pk,
        reviewer=reviewer,
        approve=approve,
        reason_label="" if approve else "logic_error",
        note=note,
        now=now,
    )


def _body(response: Any) -> str:
    return b"".join(response.streaming_content).decode()


def test_it_streams_verdicts_as_csv(client: Client, operator: User, reviewer: User, admit_item: Any) -> None:
    admit_item()
    admit_item()
    _decide(reviewer, approve=True)
    _decide(reviewer, approve=False)
    client.force_login(operator)
    response = client.get(reverse("ops:export_download"), {"format": "csv"})
    assert response.status_code == 200
    assert response.streaming
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(_body(response))))
    assert [r["decision"] for r in rows] == ["approve", "reject"]
    assert rows[1]["reason_label"] == "logic_error"
    assert rows[0]["reviewer"] == "rita"


def test_it_escapes_formula_cells_in_csv(client: Client, operator: User, reviewer: User, admit_item: Any) -> None:
    admit_item(task_id='=HYPERLINK("http://evil")')
    _decide(reviewer, approve=False, note="+cmd|' /C calc'!A0")
    client.force_login(operator)
    rows = list(csv.DictReader(io.StringIO(_body(client.get(reverse("ops:export_download"), {"format": "csv"})))))
    assert rows[0]["task_id"].startswith("'=")
    assert rows[0]["note"].startswith("'+")


@pytest.mark.parametrize("value", ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"])
def test_it_neutralises_each_formula_trigger(value: str) -> None:
    assert csv_safe(value) == "'" + value


def test_it_leaves_ordinary_text_and_numbers_alone() -> None:
    assert csv_safe("fine = ok") == "fine = ok"
    assert csv_safe(-3) == -3


def test_it_exports_jsonl_filtered_by_reviewer_and_time(
    client: Client, operator: User, reviewer: User, make_user: Any, admit_item: Any
) -> None:
    other = make_user("rob", "reviewer")
    old = timezone.now() - timedelta(days=3)
    admit_item(now=old)
    _decide(reviewer, approve=True, now=old + timedelta(seconds=5))
    admit_item()
    admit_item()
    _decide(reviewer, approve=False)
    _decide(other, approve=True)
    client.force_login(operator)
    since = (timezone.now() - timedelta(days=1)).isoformat()
    response = client.get(reverse("ops:export_download"), {"format": "jsonl", "reviewer": "rita", "since": since})
    lines = [json.loads(line) for line in _body(response).splitlines()]
    assert [(row["reviewer"], row["decision"]) for row in lines] == [("rita", "reject")]


def test_it_filters_by_label(client: Client, operator: User, reviewer: User, admit_item: Any) -> None:
    admit_item(label="sampled", cutoff_reason="sampled")
    admit_item()
    _decide(reviewer, approve=True)
    _decide(reviewer, approve=True)
    client.force_login(operator)
    body = _body(client.get(reverse("ops:export_download"), {"format": "jsonl", "label": "sampled"}))
    assert [json.loads(line)["label"] for line in body.splitlines()] == ["sampled"]


def test_it_names_a_bad_filter(client: Client, operator: User) -> None:
    client.force_login(operator)
    response = client.get(reverse("ops:export_download"), {"format": "csv", "reviewer": "nobody"})
    assert response.status_code == 400
    assert "nobody" in response.content.decode()


def test_it_refuses_the_export_to_a_reviewer(client: Client, reviewer: User) -> None:
    client.force_login(reviewer)
    assert client.get(reverse("ops:export_download"), {"format": "csv"}).status_code == 403


def test_it_exports_from_the_command_line(tmp_path: Path, reviewer: User, admit_item: Any) -> None:
    admit_item()
    _decide(reviewer, approve=True)
    target = tmp_path / "out.jsonl"
    call_command("export_verdicts", "--format", "jsonl", "--output", str(target), "--no-progress", stderr=io.StringIO())
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["decision"] == "approve"


def test_it_writes_csv_to_stdout_from_the_command_line(reviewer: User, admit_item: Any) -> None:
    admit_item()
    _decide(reviewer, approve=False, note="=danger")
    out = io.StringIO()
    call_command("export_verdicts", "--no-progress", stdout=out, stderr=io.StringIO())
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert rows[0]["note"] == "'=danger"


def test_it_exports_the_reviewed_attempt_its_grade_and_the_regression_reason(
    client: Client, operator: User, reviewer: User, admit_item: Any
) -> None:
    admit_item(
        cutoff_reason="regression",
        attempt_count=5,
        reviewed_attempt=3,
        checks_passed=4,
        checks_total=5,
        failing_checks=[{"id": "check_5", "about": "subtractive forty"}],
    )
    _decide(reviewer, approve=False)
    client.force_login(operator)
    rows = list(csv.DictReader(io.StringIO(_body(client.get(reverse("ops:export_download"), {"format": "csv"})))))
    row = rows[0]
    assert row["cutoff_reason"] == "regression"
    assert (row["attempt_count"], row["reviewed_attempt"], row["checks_passed"], row["checks_total"]) == (
        "5",
        "3",
        "4",
        "5",
    )
    assert json.loads(row["failing_checks"]) == [{"id": "check_5", "about": "subtractive forty"}]


def test_the_export_page_picks_days_and_a_day_runs_to_its_end(
    client: Client, operator: User, reviewer: User, admit_item: Any
) -> None:
    admit_item()
    verdict = _decide(reviewer, approve=True)
    client.force_login(operator)
    page = client.get(reverse("ops:export")).content.decode()
    assert 'type="date" name="since"' in page and 'type="date" name="until"' in page
    day = verdict.created_at.date().isoformat()
    response = client.get(reverse("ops:export_download"), {"format": "jsonl", "since": day, "until": day})
    assert len(_body(response).splitlines()) == 1  # the verdict of that day, though after its midnight
    before = (verdict.created_at.date() - timedelta(days=1)).isoformat()
    response = client.get(reverse("ops:export_download"), {"format": "jsonl", "until": before})
    assert _body(response).strip() == ""
