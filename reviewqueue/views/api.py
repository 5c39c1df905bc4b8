"""The JSON API for producers: submit a task to run, push a cutoff output, read
queue stats. Bearer tokens (hashed at rest, revocable in admin); no cookies,
so no CSRF. The contract is in docs/API.md; the schema at /api/openapi.json.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Literal

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern
from django.utils import timezone
from ninja import Field, NinjaAPI, Schema, Status
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.security import HttpBearer

from .. import services, stats
from ..models import ApiToken, CutoffReason, LoopRun, QueuePolicy, ReviewItem

# Request bodies above this are refused with 413 before they are parsed. Outputs
# longer than REVIEWQUEUE_MAX_OUTPUT_CHARS inside a smaller body are truncated
# by admit() with a visible marker instead.
API_MAX_BODY_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
TOKEN_PREFIX_LEN = 8
# last_used_at is a hint, not an audit trail: write it at most once a minute per token.
LAST_USED_RESOLUTION = timedelta(minutes=1)


# --- tokens ---------------------------------------------------------------------------------


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def issue_token(
    *, name: str, can_read_metrics: bool = False, created_by: AbstractBaseUser | None = None
) -> tuple[ApiToken, str]:
    """Create a token; the plain text is returned once and never stored."""
    prefix = secrets.token_hex(TOKEN_PREFIX_LEN // 2)
    plain = f"rq_{prefix}_{secrets.token_urlsafe(32)}"
    token = ApiToken.objects.create(
        name=name,
        prefix=prefix,
        token_hash=hash_token(plain),
        can_read_metrics=can_read_metrics,
        created_by=created_by,
    )
    return token, plain


def token_for(raw: str) -> ApiToken | None:
    """The active token matching ``raw``, compared in constant time."""
    parts = raw.split("_")
    if len(parts) < 3 or parts[0] != "rq" or len(parts[1]) != TOKEN_PREFIX_LEN:
        return None
    digest = hash_token(raw)
    for token in ApiToken.objects.filter(prefix=parts[1], revoked_at=None):
        if hmac.compare_digest(token.token_hash, digest):
            now = timezone.now()
            if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
                ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
            return token
    return None


def bearer_token(request: HttpRequest) -> ApiToken | None:
    """The token from an ``Authorization: Bearer`` header, if valid."""
    header = request.headers.get("Authorization", "")
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        return None
    return token_for(raw.strip())


class TokenAuth(HttpBearer):
    """Authorization: Bearer rq_<prefix>_<secret>."""

    def authenticate(self, request: HttpRequest, token: str) -> ApiToken | None:
        return token_for(token)


api = NinjaAPI(
    title="reviewqueue API",
    version="1",
    description="Producers push cutoff output and submit tasks; see docs/API.md for limits and auth.",
    auth=TokenAuth(),
    urls_namespace="api",
    docs_url=None,  # the Swagger page needs inline script, which the CSP forbids
)


def _field_name(loc: tuple[Any, ...] | list[Any]) -> str:
    # ninja's locations look like ("body", "payload", "final_output"); the client sent "final_output".
    parts = [str(p) for p in loc if p not in ("body", "payload", "query", "path")]
    return ".".join(parts) or "body"


@api.exception_handler(NinjaValidationError)
def on_validation_error(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    """400 naming each bad field, not ninja's default 422."""
    fields: dict[str, str] = {}
    for error in exc.errors:
        fields.setdefault(_field_name(error.get("loc", ())), str(error.get("msg", "invalid")))
    return api.create_response(request, {"error": "invalid", "fields": fields}, status=400)


@api.exception_handler(services.InvalidInput)
def on_invalid_input(request: HttpRequest, exc: services.InvalidInput) -> HttpResponse:
    return api.create_response(request, {"error": "invalid", "fields": {exc.field: exc.message}}, status=400)


@api.exception_handler(AuthenticationError)
def on_auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return api.create_response(
        request, {"error": "unauthorized", "detail": "a valid bearer token is required"}, status=401
    )


# --- schemas ----------------------------------------------------------------------------------


class Error(Schema):
    error: str
    fields: dict[str, str] = Field(default_factory=dict)
    detail: str = ""


class FailingCheckIn(Schema):
    id: str = Field(..., min_length=1, max_length=200, description="the hidden check's id")
    about: str = Field("", max_length=200, description="what the check is for, shown to the reviewer")


class OutputIn(Schema):
    """A cutoff output pushed by a producer; the same fields admit() takes."""

    idempotency_key: str = Field(..., min_length=1, max_length=200, description="one key per produced output")
    task_description: str = Field(..., min_length=1)
    final_output: str = Field("", description="truncated with a visible marker past the documented limit")
    cutoff_reason: Literal[tuple(CutoffReason.values)] = "external"  # type: ignore[valid-type]
    last_error: str = ""
    attempt_count: int = Field(0, ge=0, le=10_000)
    priority: int = Field(1, ge=-1000, le=1000, description="higher is more important; the lowest is shed first")
    draft: bool = False
    label: Literal["unverified", "sampled"] = "unverified"
    task_id: str = Field("", max_length=200)
    task_kind: str = Field("", max_length=20)
    source_run_id: str = Field("", max_length=200)
    reviewed_attempt: int = Field(0, ge=0, le=10_000, description="which attempt the output is (1-based), if known")
    checks_passed: int | None = Field(None, ge=0, le=10_000, description="hidden checks that attempt passes")
    checks_total: int | None = Field(None, ge=1, le=10_000)
    failing_checks: list[FailingCheckIn] = Field(default_factory=list, max_length=1000)
    reviewed_score: float | None = Field(None, ge=0, le=1, description="scored tasks: that attempt's estimated quality")


class OutputOut(Schema):
    outcome: Literal["enqueued", "shed", "duplicate", "filtered"]
    item_id: int
    status: str
    mode: str
    depth: int
    capacity: int
    backoff: bool = Field(description="true when the queue is past its high watermark: slow down")
    truncated: bool
    shed_item_id: int | None = None


class TaskIn(Schema):
    task: dict[str, Any] = Field(..., description="a task definition: id, description, kind, checks, ...")
    run_id: str | None = Field(None, min_length=1, max_length=200, description="optional; makes the call repeatable")
    agent: Literal["scripted", "scored"] = "scripted"


class RunOut(Schema):
    run_id: str
    task_id: str
    outcome: str
    item_id: int | None = None
    created: bool = False


# --- endpoints ------------------------------------------------------------------------------


@api.post(
    "/outputs",
    response={200: OutputOut, 201: OutputOut, 400: Error, 401: Error, 413: Error},
    summary="Push a cutoff output into the review queue",
)
def push_output(request: HttpRequest, payload: OutputIn) -> Status[dict[str, Any]]:
    """Admit one output under the watermark policy. 201 when enqueued; 200 for
    shed, duplicate or filtered. ``backoff`` tells the producer to slow down."""
    token: ApiToken = request.auth  # type: ignore[attr-defined]
    result = services.admit(producer=token.name[:100], **payload.model_dump())
    item = result.item
    queue_capacity = QueuePolicy.current().capacity
    body = {
        "outcome": result.outcome,
        "item_id": item.pk,
        "status": item.status,
        "mode": result.mode,
        "depth": result.depth,
        "capacity": queue_capacity,
        "backoff": result.mode != "normal",
        "truncated": item.output_truncated,
        "shed_item_id": result.shed_item.pk if result.shed_item else None,
    }
    return Status(201 if result.outcome == "enqueued" else 200, body)


@api.post(
    "/tasks",
    response={200: RunOut, 201: RunOut, 400: Error, 401: Error, 413: Error, 503: Error},
    summary="Submit a task for an agent loop to run",
)
def submit_task(request: HttpRequest, payload: TaskIn) -> Status[dict[str, Any]]:
    """Record a loop run and hand it to a worker. Repeating a call with the same
    run_id returns the existing run (200) and starts nothing."""
    from loops.tasks import TaskError

    from ..tasks import BrokerUnavailable, submit_loop

    run_id = payload.run_id or f"api-{uuid.uuid4().hex}"
    refusal = _unsandboxed_checks(payload.task)
    if refusal is not None:
        return refusal  # type: ignore[return-value]
    existed = LoopRun.objects.filter(run_id=run_id).exists()
    try:
        run = submit_loop(task=payload.task, run_id=run_id, agent=payload.agent)
    except (TaskError, TypeError, ValueError) as exc:
        raise services.InvalidInput("task", str(exc)) from None
    except BrokerUnavailable:
        # The run is stored; repeating the request with its run_id sends it
        # once the broker is back (and resubmit_stale_runs would, at worst).
        response = JsonResponse(
            {
                "error": "unavailable",
                "fields": {},
                "detail": f"run {run_id} is recorded but not queued yet: repeat the request with this run_id",
            },
            status=503,
        )
        response["Retry-After"] = "5"
        return response  # type: ignore[return-value]
    return Status(200 if existed else 201, _run_body(run, created=not existed))


def _unsandboxed_checks(task: Any) -> JsonResponse | None:
    """Fail closed: a producer's hidden checks are untrusted code and run only
    in the red line's sandbox. Where it cannot run (or REDLINE_SANDBOX=none),
    tasks with checks are refused before anything is stored."""
    from loops import sandbox

    if not (isinstance(task, dict) and task.get("checks")):
        return None
    status = sandbox.status()
    if status.sandboxed:
        return None
    return JsonResponse(
        {
            "error": "sandbox_unavailable",
            "fields": {},
            "detail": f"tasks with checks are refused: the red line is not sandboxed here ({status.reason})",
        },
        status=503,
    )


def _run_body(run: LoopRun, *, created: bool = False) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "task_id": run.task_id,
        "outcome": run.outcome,
        "item_id": run.item_id,
        "created": created,
    }


@api.get("/tasks/{run_id}", response={200: RunOut, 401: Error, 404: Error}, summary="A submitted run's outcome")
def run_status(request: HttpRequest, run_id: str) -> Status[dict[str, Any]]:
    run = LoopRun.objects.filter(run_id=run_id).first()
    if run is None:
        return Status(404, {"error": "not_found", "detail": f"no run {run_id!r}"})
    return Status(200, _run_body(run))


@api.get("/stats", response={200: dict[str, Any], 401: Error}, summary="Queue statistics")
def queue_stats(request: HttpRequest) -> dict[str, Any]:
    """Depth, mode, rates over the last 15 minutes, ratio, oldest waiting item,
    approve rate, shed counts: the dashboard's numbers as JSON."""
    return stats.snapshot()


@api.get("/items/{item_id}", response={200: dict[str, Any], 401: Error, 404: Error}, summary="An item's status")
def item_status(request: HttpRequest, item_id: int) -> Status[dict[str, Any]]:
    """Status only (never the output) for items this token's producer pushed."""
    token: ApiToken = request.auth  # type: ignore[attr-defined]
    item = ReviewItem.objects.filter(pk=item_id, producer=token.name[:100]).first()
    if item is None:
        return Status(404, {"error": "not_found", "detail": f"no item {item_id} from this producer"})
    decision = getattr(getattr(item, "verdict", None), "decision", None)
    return Status(200, {"item_id": item.pk, "status": item.status, "decision": decision, "label": item.label})


# --- transport guard --------------------------------------------------------------------------


def _too_large() -> JsonResponse:
    return JsonResponse(
        {"error": "payload_too_large", "detail": f"request bodies are limited to {API_MAX_BODY_BYTES} bytes"},
        status=413,
    )


def guard(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Token-auth views skip the login middleware; a body declared larger than
    the limit is refused with a JSON 413 before anything reads it."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method in ("POST", "PUT", "PATCH"):
            try:
                declared = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return JsonResponse({"error": "invalid", "detail": "bad Content-Length"}, status=400)
            if declared > API_MAX_BODY_BYTES:
                return _too_large()
        return view(request, *args, **kwargs)

    return login_not_required(wrapped)


def _guarded(patterns: list[Any]) -> list[Any]:
    for pattern in patterns:
        if isinstance(pattern, URLPattern):
            pattern.callback = guard(pattern.callback)
    return patterns


@api.exception_handler(HttpError)
def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    return api.create_response(request, {"error": "http_error", "detail": str(exc)}, status=exc.status_code)


app_name = "api"
urlpatterns = _guarded(api.urls[0])
