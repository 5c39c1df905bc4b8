"""The project's URLs plus three baseline views under ``/bench/``, served by the
same gunicorn with the same settings as the real views they are compared to
(``bench_settings`` mounts this module). Neither baseline keeps any of the
product's promises: they are the floor a request of the same shape can reach
on this server, so a bench reports real / baseline as a ratio.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.db import connection, transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import engines
from django.urls import path
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from reviewqueue.urls import urlpatterns as project_urlpatterns

BASELINE_PRODUCER = "bench-baseline"

INSERT_ROW = """
INSERT INTO reviewqueue_reviewitem (
    task_id, task_kind, task_description, final_output, output_truncated, last_error,
    attempt_count, cutoff_reason, label, draft, priority, status, lease_expiries,
    source_run_id, producer, idempotency_key, filter_reason, reviewed_attempt, failing_checks, created_at, updated_at,
    queue_id
) VALUES (%s, %s, %s, %s, false, %s, %s, %s, %s, %s, %s, 'pending', 0, %s, %s, %s, '', %s, %s, %s, %s,
          (SELECT id FROM reviewqueue_queue WHERE slug = 'default'))
RETURNING id
"""

# The claim order (priority, then age), across every queue as claim() serves them.
NEXT_PENDING = """
SELECT id, task_description, final_output, cutoff_reason, last_error, attempt_count
FROM reviewqueue_reviewitem WHERE status = 'pending'
ORDER BY priority DESC, created_at, id LIMIT 1
"""
SKIP_LOCKED = " FOR UPDATE SKIP LOCKED"
MARK_DECIDED = """
UPDATE reviewqueue_reviewitem SET status = 'approved', lease_holder_id = %s, decided_at = %s, updated_at = %s
WHERE id = %s
"""

CARD = engines["django"].from_string(
    '<div id="card" class="card" data-item="{{ item.id|default:"" }}">'
    "{% if item %}<h2>Item #{{ item.id }}</h2><p>{{ item.task_description }}</p>"
    "<pre><code>{{ item.final_output }}</code></pre>"
    "<p>{{ item.cutoff_reason }} after {{ item.attempt_count }} attempts: {{ item.last_error }}</p>"
    "{% else %}<p>Nothing waits right now.</p>{% endif %}</div>"
)


def _insert_values(body: dict[str, Any], now: object) -> list[Any]:
    """The row the producer sent, with the API's defaults for missing fields."""
    return [
        body.get("task_id", ""),
        body.get("task_kind", ""),
        body["task_description"],
        body.get("final_output", ""),
        body.get("last_error", ""),
        body.get("attempt_count", 0),
        body.get("cutoff_reason", "external"),
        body.get("label", "unverified"),
        body.get("draft", False),
        body.get("priority", 1),
        body.get("source_run_id", ""),
        BASELINE_PRODUCER,
        body["idempotency_key"],
        body.get("reviewed_attempt", 0),
        json.dumps(body["failing_checks"]) if body.get("failing_checks") else "",
        now,
        now,
    ]


@csrf_exempt
@login_not_required
@require_POST
def baseline_output(request: HttpRequest) -> HttpResponse:
    """Producer baseline: parse the same JSON body as POST /api/outputs and
    do ONE bare INSERT of an equivalent row (autocommit, unprepared, as
    Django's cursor sends it). The bearer token is NOT checked (no query for
    it), no policy row is read or locked, nothing is validated beyond the
    two required keys: the floor for "receive an output, store it"."""
    body = json.loads(request.body)
    with connection.cursor() as cursor:
        cursor.execute(INSERT_ROW, _insert_values(body, timezone.now()))
        (item_id,) = cursor.fetchone()
    return JsonResponse({"outcome": "enqueued", "item_id": item_id, "status": "pending"}, status=201)


@csrf_exempt
@login_not_required
@require_POST
def baseline_decide(request: HttpRequest) -> HttpResponse:
    """Reviewer baseline: in one transaction, ONE indexed SELECT of the next
    pending item by priority then age (FOR UPDATE SKIP LOCKED on PostgreSQL,
    so concurrent clients never get the same row) and ONE UPDATE marking it
    decided by the reviewer id the client posts; then a small HTML card of
    that item, rendered by a Django template. No session, login, CSRF or role
    check: the browser's real decide pays for those, this floor does not. An
    empty card (``data-item=""``) means nothing was pending."""
    reviewer_id = int(request.POST["reviewer"])
    query = NEXT_PENDING + (SKIP_LOCKED if connection.vendor == "postgresql" else "")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(query)
        row = cursor.fetchone()
        item = None
        if row is not None:
            keys = ("id", "task_description", "final_output", "cutoff_reason", "last_error", "attempt_count")
            item = dict(zip(keys, row, strict=True))
            now = timezone.now()
            cursor.execute(MARK_DECIDED, [reviewer_id, now, now, item["id"]])
    return HttpResponse(CARD.render({"item": item}))


@require_POST
def baseline_session_decide(request: HttpRequest) -> HttpResponse:
    """Reviewer baseline with the real request's authentication: the same
    session cookie, login check (the project's login-required middleware) and
    CSRF check as POST /review/<id>/decide/, then what ``baseline_decide``
    does, for the signed-in user: ONE SELECT ... FOR UPDATE SKIP LOCKED of
    the next pending item, ONE UPDATE marking it decided, the small card. No
    role check, no verdict, no side panel: the floor a session-authenticated
    decision can reach on this server."""
    query = NEXT_PENDING + (SKIP_LOCKED if connection.vendor == "postgresql" else "")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(query)
        row = cursor.fetchone()
        item = None
        if row is not None:
            keys = ("id", "task_description", "final_output", "cutoff_reason", "last_error", "attempt_count")
            item = dict(zip(keys, row, strict=True))
            now = timezone.now()
            cursor.execute(MARK_DECIDED, [request.user.pk, now, now, item["id"]])
    return HttpResponse(CARD.render({"item": item}))


urlpatterns = [
    path("bench/outputs", baseline_output, name="bench_outputs"),
    path("bench/decide/", baseline_decide, name="bench_decide"),
    path("bench/session-decide/", baseline_session_decide, name="bench_session_decide"),
    *project_urlpatterns,
]
