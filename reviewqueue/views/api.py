"""The JSON API for producers: submit a task to run, push a cutoff output, read
queue stats. Bearer tokens (hashed at rest, revocable in admin); no cookies,
so no CSRF. The contract is in docs/API.md; the schema at /api/openapi.json.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Literal

from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import Field, NinjaAPI, Schema, Status
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.security import HttpBearer
from pydantic import field_validator

from .. import agreement, services, stats
from ..api_io import _item_body, _run_body, _run_told, _sent_back_item, _told_status
from ..middleware import DATABASE_ERRORS, RETRY_AFTER_SECONDS, DatabaseUnavailableMiddleware
from ..models import ApiToken, CutoffReason, LoopRun, Queue, ReviewItem
from ..services.runs import BrokerUnavailable, sandbox_status, submit_run
from ..tokens import RESERVED_NAME_ERROR, name_refusal, token_for
from .api_checks import CallbackUrlRefused, callback_url_for, output_refusals, producer_of, refuse, task_refusals


class TokenAuth(HttpBearer):
    """Authorization: Bearer rq_<prefix>_<secret>."""

    def authenticate(self, request: HttpRequest, token: str) -> ApiToken | None:
        found = token_for(token)
        if found is not None and name_refusal(found):
            raise ReservedName(name_refusal(found))
        return found


class ReservedName(Exception):
    """The token's name is one no token may act under (403)."""


class MissingScope(Exception):
    """This token lacks a scope the endpoint needs (403)."""

    def __init__(self, *scopes: str) -> None:
        super().__init__(" or ".join(scopes))
        self.scopes = scopes


def missing_scope_body(*scopes: str) -> dict[str, Any]:
    """The 403 body, shared with /metrics: it names the scope to ask for."""
    wanted = " or ".join(f"'{scope}'" for scope in scopes)
    return {
        "error": "forbidden",
        "fields": {},
        "detail": f"this token lacks the scope {wanted}; an operator grants scopes in the admin",
        "missing_scope": scopes[0] if len(scopes) == 1 else " or ".join(scopes),
    }


def _token(request: HttpRequest, *scopes: str) -> ApiToken:
    """The request's token, checked to hold one of ``scopes`` (any, when none is named)."""
    token: ApiToken = request.auth  # type: ignore[attr-defined]
    if scopes and not any(token.has_scope(scope) for scope in scopes):
        raise MissingScope(*scopes)
    return token


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
    fields.update({k: v for k, v in _refusals_past_types(request, fields).items() if k not in fields})
    return api.create_response(request, {"error": "invalid", "fields": fields}, status=400)


def _refusals_past_types(request: HttpRequest, refused: dict[str, str]) -> dict[str, str]:
    """For a body whose types failed: what else is wrong with the fields that
    passed (an unknown queue, a refused callback URL, ...), so one 400 names
    every refused field. Only for a token that may call the endpoint."""
    checks = {"/outputs": (ApiToken.Scope.OUTPUTS, output_refusals), "/tasks": (ApiToken.Scope.TASKS, task_refusals)}
    route = next((v for path, v in checks.items() if request.path.endswith(path)), None)
    token = getattr(request, "auth", None)
    if request.method != "POST" or route is None or not isinstance(token, ApiToken) or not token.has_scope(route[0]):
        return {}
    try:
        values = json.loads(request.body)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(values, dict):
        return {}
    return route[1](token, values, skip={name.split(".")[0] for name in refused})[0]


@api.exception_handler(services.InvalidInput)
def on_invalid_input(request: HttpRequest, exc: services.InvalidInput) -> HttpResponse:
    return api.create_response(request, {"error": "invalid", "fields": exc.fields}, status=400)


@api.exception_handler(ReservedName)
def on_reserved_name(request: HttpRequest, exc: ReservedName) -> HttpResponse:
    return api.create_response(request, {"error": RESERVED_NAME_ERROR, "fields": {}, "detail": str(exc)}, status=403)


@api.exception_handler(MissingScope)
def on_missing_scope(request: HttpRequest, exc: MissingScope) -> HttpResponse:
    return api.create_response(request, missing_scope_body(*exc.scopes), status=403)


def on_database_lost(request: HttpRequest, exc: Exception) -> HttpResponse:
    """ninja answers an error it has no handler for with its own 500 when DEBUG
    is on, before the site's middleware could: a lost database is the JSON
    503 with Retry-After here too, so a producer backs off either way."""
    return DatabaseUnavailableMiddleware.answer(request, exc)


for _error in DATABASE_ERRORS:
    api.add_exception_handler(_error, on_database_lost)


@api.exception_handler(AuthenticationError)
def on_auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return api.create_response(
        request, {"error": "unauthorized", "fields": {}, "detail": "a valid bearer token is required"}, status=401
    )


# --- callback URLs ----------------------------------------------------------------------------

QUEUE_HELP = (
    "optional; the slug of the queue this goes to. Without it the operators' routing rules choose, "
    "and work no rule matches goes to the queue 'default'. An unknown or archived queue is a 400 naming it"
)
CALLBACK_URL_HELP = (
    "optional; where this item's (or run's) webhook events go, instead of the token's default. "
    "Its host must be in the server's WEBHOOK_ALLOWED_HOSTS, and the producer needs a webhook secret"
)

METADATA_HELP = (
    "optional; your own JSON object (a thread id, a checkpoint, a trace id) kept with the item, returned "
    "with it and in its webhook events, never shown to reviewers. Text keys, at most 8 levels deep, "
    "at most 8192 bytes as JSON; anything else is a 400 naming metadata"
)


@api.exception_handler(CallbackUrlRefused)
def on_callback_refused(request: HttpRequest, exc: CallbackUrlRefused) -> HttpResponse:
    body = {"error": exc.code, "fields": {"callback_url": exc.detail}, "detail": exc.detail}
    return api.create_response(request, body, status=400)


# --- schemas ----------------------------------------------------------------------------------


class Error(Schema):
    error: str
    fields: dict[str, str] = Field(default_factory=dict)
    detail: str = ""
    missing_scope: str = Field("", description="on 403: the scope this token would need")


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
    previous_item: int | None = Field(
        None,
        ge=1,
        description="the item of yours a reviewer sent back, which this output revises: it becomes its next version",
    )
    callback_url: str | None = Field(None, max_length=2000, description=CALLBACK_URL_HELP)
    queue: str | None = Field(None, description=QUEUE_HELP)
    metadata: dict[str, Any] | None = Field(None, description=METADATA_HELP)

    @field_validator(
        "attempt_count",
        "priority",
        "reviewed_attempt",
        "checks_passed",
        "checks_total",
        "reviewed_score",
        "previous_item",
        mode="before",
    )
    @classmethod
    def _refuse_booleans(cls, value: Any) -> Any:
        """JSON true and false are no numbers, though Python's bool is an int
        (and pydantic would read true as 1)."""
        if isinstance(value, bool):
            raise ValueError("must be a number, not true or false")  # noqa: TRY004 - pydantic reports only ValueError
        return value

    @field_validator(
        "task_description", "final_output", "last_error", "task_id", "task_kind", "source_run_id", mode="before"
    )
    @classmethod
    def _replace_invalid_text(cls, value: Any) -> Any:
        """NUL and lone surrogates in text become U+FFFD before validation, as
        admit() would store them: the length checks cannot read a lone
        surrogate and would refuse it. The idempotency key is left as sent,
        so one with such characters is refused (an identifier is not cleaned)."""
        return services.clean_text(value)[0] if isinstance(value, str) else value


class OutputOut(Schema):
    outcome: Literal["enqueued", "shed", "duplicate", "filtered"]
    item_id: int
    queue: str = Field(description="the slug of the queue the item is in")
    status: str
    mode: str
    depth: int
    capacity: int
    backoff: bool = Field(description="true when the queue is past its high watermark: slow down")
    truncated: bool
    shed_item_id: int | None = None


# A task spec is a few levels deep; this is far past any real one.
TASK_MAX_DEPTH = 32


class TaskIn(Schema):
    task: dict[str, Any] = Field(..., description="a task definition: id, description, kind, checks, ...")
    run_id: str | None = Field(None, min_length=1, max_length=200, description="optional; makes the call repeatable")
    agent: Literal["scripted", "scored"] = "scripted"
    callback_url: str | None = Field(None, max_length=2000, description=CALLBACK_URL_HELP)
    queue: str | None = Field(None, description=QUEUE_HELP)

    @field_validator("task")
    @classmethod
    def _not_too_deep(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Refuse nesting past TASK_MAX_DEPTH, walked without recursion: the
        JSON parser takes about 900 levels, which would exhaust the stack
        where the task's text is cleaned."""
        pending: list[tuple[Any, int]] = [(value, 1)]
        while pending:
            node, depth = pending.pop()
            children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
            for child in children:
                if isinstance(child, dict | list):
                    if depth >= TASK_MAX_DEPTH:
                        raise ValueError(f"nested deeper than {TASK_MAX_DEPTH} levels")
                    pending.append((child, depth + 1))
        return value


class RunOut(Schema):
    run_id: str
    task_id: str
    queue: str = Field(description="the slug of the queue the run was routed to")
    outcome: str
    item_id: int | None = None
    created: bool = False
    resumed_from: str | None = Field(
        None, description="the run whose item a reviewer sent back, which this one resumes"
    )


# --- endpoints ------------------------------------------------------------------------------


@api.post(
    "/outputs",
    response={200: OutputOut, 201: OutputOut, 400: Error, 401: Error, 403: Error, 413: Error},
    summary="Push a cutoff output into the review queue (scope: outputs)",
)
def push_output(request: HttpRequest, payload: OutputIn) -> Status[dict[str, Any]]:
    """Admit one output under the watermark policy. 201 when enqueued; 200 for
    shed, duplicate or filtered. ``backoff`` tells the producer to slow down.
    Idempotency keys are this producer's own: another producer's equal key
    is another item."""
    token = _token(request, ApiToken.Scope.OUTPUTS)
    fields = payload.model_dump()
    # Every refused field at once, so one retry can fix them all.
    refuse(output_refusals(token, fields))
    fields["previous_version"] = _sent_back_item(producer_of(token), fields.pop("previous_item"))
    fields["callback_url"] = callback_url_for(token, fields.pop("callback_url"))
    result = services.admit(producer=producer_of(token), **fields)
    item = result.item
    body = {
        "outcome": result.outcome,
        "item_id": item.pk,
        "queue": result.queue,
        "status": _told_status(item),  # a duplicate's first item may hold an undoable verdict
        "mode": result.mode,
        "depth": result.depth,
        "capacity": result.capacity,
        "backoff": result.mode != "normal",
        "truncated": item.output_truncated,
        "shed_item_id": result.shed_item.pk if result.shed_item else None,
    }
    return Status(201 if result.outcome == "enqueued" else 200, body)


@api.post(
    "/tasks",
    response={200: RunOut, 201: RunOut, 400: Error, 401: Error, 403: Error, 413: Error, 503: Error},
    summary="Submit a task for an agent loop to run (scope: tasks)",
)
def submit_task(request: HttpRequest, payload: TaskIn) -> Status[dict[str, Any]]:
    """Record a loop run and hand it to a worker. Repeating a call with the same
    run_id returns the existing run (200) and starts nothing; of concurrent
    calls with one run_id exactly one answers 201. Run ids are this
    producer's own."""
    token = _token(request, ApiToken.Scope.TASKS)
    producer = producer_of(token)
    refuse(task_refusals(token, payload.model_dump()))
    callback_url = callback_url_for(token, payload.callback_url)
    run_id = payload.run_id or f"api-{uuid.uuid4().hex}"
    refusal = _unsandboxed_checks(payload.task)
    if refusal is not None:
        return refusal  # type: ignore[return-value]
    try:
        run, created = submit_run(
            task=payload.task,
            run_id=run_id,
            agent=payload.agent,
            producer=producer,
            callback_url=callback_url,
            queue=payload.queue,
        )
    except (TypeError, ValueError) as exc:  # a task spec's TaskError is a ValueError
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
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response  # type: ignore[return-value]
    return Status(201 if created else 200, _run_body(run, created=created))


def _unsandboxed_checks(task: Any) -> JsonResponse | None:
    """Fail closed: a producer's hidden checks are untrusted code and run only
    in the red line's sandbox. Where it cannot run (or REDLINE_SANDBOX=none),
    tasks with checks are refused before anything is stored."""
    if not (isinstance(task, dict) and task.get("checks")):
        return None
    status = sandbox_status()
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


@api.get(
    "/tasks/{run_id}",
    response={200: RunOut, 401: Error, 403: Error, 404: Error},
    summary="A submitted run's outcome (scope: tasks)",
)
def run_status(request: HttpRequest, run_id: str) -> Status[dict[str, Any]]:
    """Only the producer that submitted the run sees it; to any other the run
    does not exist (404), so a guessed run id tells nothing."""
    producer = producer_of(_token(request, ApiToken.Scope.TASKS))
    # Run ids are printable (submit_task refuses others), and PostgreSQL
    # refuses a NUL even in a lookup: such an id names no run.
    run = LoopRun.objects.filter(producer=producer, run_id=run_id).first() if run_id.isprintable() else None
    if run is None or not _run_told(run):  # a resumed run shows once its send-back is final
        return Status(404, {"error": "not_found", "detail": f"no run {run_id!r} from this producer"})
    return Status(200, _run_body(run))


@api.get("/stats", response={200: dict[str, Any], 400: Error, 401: Error}, summary="Queue statistics (any scope)")
def queue_stats(request: HttpRequest, queue: str | None = None) -> dict[str, Any]:
    """Depth, mode, rates over the last 15 minutes, ratio, oldest waiting item,
    approve rate, shed counts: the dashboard's numbers as JSON, for the queue
    named by ``?queue=<slug>`` (the default queue without it; an unknown slug
    is a 400 naming it). Every producer may read them: they are what it needs
    to pace itself. ``agreement`` says how far the verdicts can be trusted
    (reviewers by id only; accuracy on gold stays on the operators' pages),
    from a report cached for a minute."""
    # A NUL byte is no slug, and PostgreSQL refuses it in a query: unknown, not a 500.
    target = Queue.default() if not queue else Queue.objects.filter(slug=queue).first() if "\x00" not in queue else None
    if target is None:
        raise services.InvalidInput("queue", f"unknown queue {queue[:60]!r}")
    by_reviewer = agreement.agreement_for_producers(agreement.cached_quality_report())
    return {**stats.snapshot(queue=target), "agreement": by_reviewer}


@api.get(
    "/items/{item_id}",
    response={200: dict[str, Any], 401: Error, 403: Error, 404: Error},
    summary="An item's status (scope: outputs or tasks)",
)
def item_status(request: HttpRequest, item_id: int) -> Status[dict[str, Any]]:
    """Status only (never the output) for items this token's producer pushed
    or its runs produced; any other item answers 404."""
    token = _token(request, ApiToken.Scope.OUTPUTS, ApiToken.Scope.TASKS)
    item = ReviewItem.objects.select_related("verdict", "queue").filter(pk=item_id, producer=producer_of(token)).first()
    if item is None:
        return Status(404, {"error": "not_found", "detail": f"no item {item_id} from this producer"})
    return Status(200, _item_body(item))


@api.exception_handler(HttpError)
def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    if exc.status_code == 400:
        # A body that is not JSON: raw bytes that are not UTF-8, raw control
        # characters inside strings, or no JSON at all.
        body = {"error": "invalid", "fields": {"body": "must be JSON in UTF-8"}, "detail": str(exc)}
        return api.create_response(request, body, status=400)
    return api.create_response(request, {"error": "http_error", "detail": str(exc)}, status=exc.status_code)
