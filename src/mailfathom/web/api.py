"""The JSON API under ``/api``: the console's reads and actions for scripts.

Internal. Shapes are those of :mod:`mailfathom.console.serialize`, documented in
:mod:`mailfathom.web.openapi`. Errors are ``{"error": {"type", "message"}}`` with
400 (bad input), 401 (no token), 404 (no such thing), 409 (illegal transition),
415 (not JSON) or 503 (database unavailable).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from functools import wraps
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mailfathom.console import ACTIONS, Console, JobQuery
from mailfathom.console.limits import KEYS_MOST, KEYS_SHOWN
from mailfathom.console.serialize import (
    audit_json,
    bulk_json,
    email_detail_json,
    email_json,
    email_page_json,
    job_detail_json,
    job_json,
    job_page_json,
    jsonable,
    overview_json,
    queue_bulk_json,
    queue_json,
    schedule_json,
    throughput_json,
    unknown_page_json,
    worker_json,
)
from mailfathom.delivery.suppressions import Suppression
from mailfathom.errors import InvalidInput, MailFathomError
from mailfathom.jobs.payload import MAX_DEPTH
from mailfathom.web.delegated import user_of
from mailfathom.web.handlers import status_for
from mailfathom.web.openapi import document
from mailfathom.web.params import is_whole_number

__all__ = ["api_error", "routes", "suppression_json"]

Handler = Callable[[Request, dict[str, Any]], Any]
Endpoint = Callable[[Request], Awaitable[Response]]
_FILTERS = ("state", "kind", "queue", "text", "older_than", "newer_than")
_MAX_ID = 2**63 - 1


def api_error(status: int, kind: str, message: str) -> JSONResponse:
    """The API's error body."""
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status)


def endpoint(*, body: bool = False) -> Callable[[Handler], Endpoint]:
    """Wrap ``handler(request, body)``: parse a JSON object body, run off the loop, map errors."""

    def wrap(handler: Handler) -> Endpoint:
        @wraps(handler)
        async def run(request: Request) -> Response:
            try:
                data = await _json_object(request) if body else {}
                result = await run_in_threadpool(handler, request, data)
            except MailFathomError as exc:
                return api_error(status_for(exc), type(exc).__name__, str(exc))
            if isinstance(result, Response):
                return result
            return JSONResponse(result)

        return run

    return wrap


async def _json_object(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except RecursionError:
        raise InvalidInput(
            f"the request body is nested too deeply to read: payloads may nest at most "
            f"{MAX_DEPTH} levels"
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"the request body is not valid JSON: {exc}") from None
    except ValueError as exc:  # an integer longer than Python reads (4300 digits)
        raise InvalidInput(f"the request body cannot be read: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidInput("the request body must be a JSON object")
    return data


def _console(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def _int_param(
    request: Request, name: str, *, low: int, high: int, default: int | None
) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not is_whole_number(raw) or len(raw) > 19 or not low <= int(raw) <= high:
        shown = raw if len(raw) <= 40 else raw[:40] + "…"
        raise InvalidInput(f"{name} must be a whole number from {low} to {high}, not {shown!r}")
    return int(raw)


def _job_id(request: Request) -> int:
    job_id = int(request.path_params["job_id"])
    if not 1 <= job_id <= _MAX_ID:
        raise InvalidInput(f"a job id is a positive 64-bit integer, not {job_id}")
    return job_id


def _text(data: dict[str, Any], name: str, *, longest: int = 2000) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > longest:
        raise InvalidInput(f"{name} must be text of at most {longest} characters")
    return value


def _actor(request: Request, data: dict[str, Any]) -> str:
    actor = _text(data, "actor", longest=100)
    user = user_of(request)  # the host application's auth= said who this is
    if user is not None:
        return f"api:{user.name}"
    return f"api:{actor.strip()}" if actor and actor.strip() else "api"


def _check_keys(data: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise InvalidInput(f"unknown fields {unknown}: use {sorted(allowed)}")


@endpoint()
def overview(request: Request, _: dict[str, Any]) -> Any:
    """Counts, throughput and what waits for an operator."""
    return overview_json(_console(request).overview())


@endpoint()
def list_jobs(request: Request, _: dict[str, Any]) -> Any:
    """A page of jobs, newest first."""
    query = JobQuery.parse({name: request.query_params.get(name) for name in _FILTERS})
    before = _int_param(request, "before", low=1, high=_MAX_ID, default=None)
    limit = _int_param(request, "limit", low=1, high=500, default=50)
    assert limit is not None
    return job_page_json(_console(request).jobs(query, before_id=before, limit=limit))


@endpoint()
def job_counts(request: Request, _: dict[str, Any]) -> Any:
    """Jobs per state, and held jobs."""
    jobs = _console(request).mf.jobs
    return {**{s.value: n for s, n in jobs.counts().items()}, "Held": jobs.held_count()}


@endpoint()
def get_job(request: Request, _: dict[str, Any]) -> Any:
    """One job with its attempts and audit trail."""
    return job_detail_json(_console(request).job(_job_id(request)))


@endpoint(body=True)
def create_job(request: Request, data: dict[str, Any]) -> Any:
    """Create a job of a registered kind, ready to run (like ``mf.enqueue`` and ``mailfathom
    enqueue``) unless ``hold`` is true; the console's form is the one that creates held jobs."""
    _check_keys(data, {"kind", "payload", "queue", "priority", "run_at", "hold", "idempotency_key"})
    kind = data.get("kind")
    if not isinstance(kind, str):
        raise InvalidInput("kind is required: one of the registered kinds (GET /api/kinds)")
    payload = data.get("payload", {})
    if not isinstance(payload, dict):
        raise InvalidInput('payload must be a JSON object such as {"report_id": 7}')
    priority = data.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidInput("priority must be an integer")
    hold = data.get("hold")
    if hold is not None and not isinstance(hold, bool):
        raise InvalidInput("hold must be true or false")
    job = _console(request).create_job(
        kind,
        payload,
        queue=_text(data, "queue", longest=100),
        priority=priority,
        run_at=_text(data, "run_at", longest=64),
        hold=bool(hold),
        idempotency_key=_text(data, "idempotency_key", longest=512),
    )
    return JSONResponse({**job_json(job), "created": job.created}, status_code=201)


@endpoint(body=True)
def act(request: Request, data: dict[str, Any]) -> Any:
    """Requeue, drop or release one job."""
    _check_keys(data, {"reason", "actor"})
    action = str(request.path_params["action"])
    if action not in ACTIONS:
        raise InvalidInput(f"unknown action {action!r}: use {', '.join(ACTIONS)}")
    job = _console(request).act(
        action, _job_id(request), actor=_actor(request, data), reason=_text(data, "reason")
    )
    return job_json(job)


@endpoint(body=True)
def bulk(request: Request, data: dict[str, Any]) -> Any:
    """Requeue, drop or release the listed jobs, or every job a filter matches."""
    _check_keys(data, {"ids", "filter", "reason", "actor"})
    action = str(request.path_params["action"])
    if action not in ACTIONS:
        raise InvalidInput(f"unknown action {action!r}: use {', '.join(ACTIONS)}")
    console = _console(request)
    ids, given_filter = data.get("ids"), data.get("filter")
    if (ids is None) == (given_filter is None):
        raise InvalidInput("give either ids (a list of job ids) or filter (an object), not both")
    if ids is not None:
        if not isinstance(ids, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= _MAX_ID for i in ids
        ):
            raise InvalidInput("ids must be a list of positive job ids")
        targets = ids
    else:
        if not isinstance(given_filter, dict) or not all(
            isinstance(v, str) or v is None for v in given_filter.values()
        ):
            raise InvalidInput("filter must be an object of text values (state, kind, …)")
        targets = console.matching_ids(action, JobQuery.parse(given_filter))
    result = console.bulk(
        action, targets, actor=_actor(request, data), reason=_text(data, "reason")
    )
    return bulk_json(result)


@endpoint()
def queues(request: Request, _: dict[str, Any]) -> Any:
    """Every queue with unfinished jobs or a pause."""
    return {"queues": [queue_json(q) for q in _console(request).queues()]}


@endpoint(body=True)
def pause_queue(request: Request, data: dict[str, Any]) -> Any:
    """Pause one queue fleet-wide."""
    _check_keys(data, {"reason", "actor"})
    queues = _console(request).mf.queues
    name, reason = str(request.path_params["name"]), _text(data, "reason")
    return jsonable(queues.pause(name, actor=_actor(request, data), reason=reason))


@endpoint(body=True)
def resume_queue(request: Request, data: dict[str, Any]) -> Any:
    """Resume one paused queue."""
    _check_keys(data, {"reason", "actor"})
    queues = _console(request).mf.queues
    name, reason = str(request.path_params["name"]), _text(data, "reason")
    return jsonable(queues.resume(name, actor=_actor(request, data), reason=reason))


@endpoint(body=True)
def bulk_queues(request: Request, data: dict[str, Any]) -> Any:
    """Pause or resume the listed queues."""
    _check_keys(data, {"queues", "reason", "actor"})
    action = str(request.path_params["action"])
    if action not in ("pause", "resume"):
        raise InvalidInput(f"unknown queue action {action!r}: use pause or resume")
    names = data.get("queues")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise InvalidInput("queues must be a non-empty list of queue names")
    console = _console(request)
    act = console.pause_queues if action == "pause" else console.resume_queues
    return queue_bulk_json(act(names, actor=_actor(request, data), reason=_text(data, "reason")))


@endpoint()
def schedules(request: Request, _: dict[str, Any]) -> Any:
    """Every stored schedule with its next tick."""
    console = _console(request)
    now = console.now()
    return {"schedules": [schedule_json(s, now) for s in console.schedules()]}


@endpoint(body=True)
def pause_schedule(request: Request, data: dict[str, Any]) -> Any:
    """Pause a schedule on every worker."""
    _check_keys(data, {"reason", "actor"})
    console = _console(request)
    schedule = console.pause_schedule(
        str(request.path_params["name"]), actor=_actor(request, data), reason=_text(data, "reason")
    )
    return schedule_json(schedule, console.now())


@endpoint(body=True)
def resume_schedule(request: Request, data: dict[str, Any]) -> Any:
    """Resume a schedule from its next tick."""
    _check_keys(data, {"actor"})
    console = _console(request)
    schedule = console.resume_schedule(
        str(request.path_params["name"]), actor=_actor(request, data)
    )
    return schedule_json(schedule, console.now())


@endpoint()
def workers(request: Request, _: dict[str, Any]) -> Any:
    """Every registered worker, alive or not."""
    return {"workers": [worker_json(w) for w in _console(request).workers()]}


def _email_id(request: Request) -> int:
    email_id = int(request.path_params["email_id"])
    if not 1 <= email_id <= _MAX_ID:
        raise InvalidInput(f"an email id is a positive 64-bit integer, not {email_id}")
    return email_id


@endpoint()
def list_emails(request: Request, _: dict[str, Any]) -> Any:
    """A page of outgoing email, newest first."""
    before = _int_param(request, "before", low=1, high=_MAX_ID, default=None)
    limit = _int_param(request, "limit", low=1, high=500, default=50)
    assert limit is not None
    stage = request.query_params.get("stage") or None
    return email_page_json(_console(request).outbox(stage, before_id=before, limit=limit))


@endpoint()
def email_counts(request: Request, _: dict[str, Any]) -> Any:
    """Records per stage."""
    return {stage.value: n for stage, n in _console(request).outbox_counts().items()}


@endpoint()
def unknown_emails(request: Request, _: dict[str, Any]) -> Any:
    """A page of unknown outcomes, oldest first, with how many there are."""
    after = _int_param(request, "after", low=1, high=_MAX_ID, default=None)
    limit = _int_param(request, "limit", low=1, high=500, default=50)
    assert limit is not None
    return unknown_page_json(_console(request).unknown_outcomes(after_id=after, limit=limit))


@endpoint()
def get_email(request: Request, _: dict[str, Any]) -> Any:
    """One record with its stage history and audit trail."""
    return email_detail_json(_console(request).email(_email_id(request)))


@endpoint(body=True)
def cancel_email(request: Request, data: dict[str, Any]) -> Any:
    """Cancel a Recorded email."""
    _check_keys(data, {"reason", "actor"})
    email = _console(request).cancel_email(
        _email_id(request), actor=_actor(request, data), reason=_text(data, "reason")
    )
    return email_json(email)


@endpoint(body=True)
def resolve_email(request: Request, data: dict[str, Any]) -> Any:
    """Settle an unknown outcome: delivered, send_again or give_up, with a reason."""
    _check_keys(data, {"decision", "reason", "actor"})
    decision = data.get("decision")
    if not isinstance(decision, str):
        raise InvalidInput("decision is required: 'delivered', 'send_again' or 'give_up'")
    email = _console(request).resolve_email(
        _email_id(request), decision, actor=_actor(request, data), reason=_text(data, "reason")
    )
    return email_json(email)


@endpoint(body=True)
def record_email_again(request: Request, data: dict[str, Any]) -> Any:
    """Record a Refused email's bytes again as a new message."""
    _check_keys(data, {"reason", "actor"})
    email = _console(request).record_email_again(
        _email_id(request), actor=_actor(request, data), reason=_text(data, "reason")
    )
    return JSONResponse(email_json(email), status_code=201)


def suppression_json(entry: Suppression) -> dict[str, Any]:
    """A suppression entry as the API shows it."""
    return {
        "address": entry.address,
        "reason": entry.reason,
        "source": entry.source,
        "detail": entry.detail,
        "created_at": entry.created_at.isoformat(),
        "actor": entry.actor,
    }


@endpoint()
def list_suppressions(request: Request, _: dict[str, Any]) -> Any:
    """A page of suppressed addresses, by address."""
    limit = _int_param(request, "limit", low=1, high=500, default=50)
    assert limit is not None
    search = request.query_params.get("search") or None
    after = request.query_params.get("after") or None
    found = _console(request).mf.suppressions.list(search=search, after=after, limit=limit)
    return {
        "suppressions": [suppression_json(e) for e in found],
        "next_after": found[-1].address if len(found) == limit else None,
    }


@endpoint()
def list_soft_bounces(request: Request, _: dict[str, Any]) -> Any:
    """The soft bounces recorded (suppression events that suppress nothing), newest first."""
    limit = _int_param(request, "limit", low=1, high=500, default=50)
    assert limit is not None
    before_id = _int_param(request, "before_id", low=1, high=2**63 - 1, default=None)
    suppressions = _console(request).mf.suppressions
    found = suppressions.soft_bounces(limit=limit, before_id=before_id)
    return {
        "soft_bounces": [
            {
                "id": e.id,
                "address": e.address,
                "at": e.at.isoformat(),
                "source": e.source,
                "detail": e.detail,
                "actor": e.actor,
            }
            for e in found
        ],
        "total": suppressions.event_counts().get("soft_bounce", 0),
        "next_before_id": found[-1].id if len(found) == limit else None,
    }


@endpoint(body=True)
def suppress_address(request: Request, data: dict[str, Any]) -> Any:
    """Suppress an address (an address already suppressed keeps its entry)."""
    _check_keys(data, {"address", "reason", "source", "detail", "actor"})
    address = _text(data, "address", longest=320)
    if address is None:
        raise InvalidInput("address is required: the email address never to send to again")
    entry = _console(request).mf.suppressions.add(
        address,
        actor=_actor(request, data),
        reason=_text(data, "reason", longest=20) or "manual",
        source=_text(data, "source", longest=100) or "api",
        detail=_text(data, "detail"),
    )
    return suppression_json(entry)


@endpoint(body=True)
def ingest_suppression_events(request: Request, data: dict[str, Any]) -> Any:
    """Apply bounce and complaint events (see ``mf.suppressions.ingest_events``)."""
    _check_keys(data, {"events", "actor"})
    events = data.get("events")
    if not isinstance(events, list) or len(events) > 1000:
        raise InvalidInput("events is required: a list of at most 1000 event objects")
    report = _console(request).mf.suppressions.ingest_events(events, actor=_actor(request, data))
    return {
        "suppressed": [suppression_json(e) for e in report.suppressed],
        "soft": list(report.soft),
    }


@endpoint(body=True)
def lift_suppression(request: Request, data: dict[str, Any]) -> Any:
    """Lift a suppression: deliveries send to the address again."""
    _check_keys(data, {"address", "reason", "actor"})
    address = _text(data, "address", longest=320)
    if address is None:
        raise InvalidInput("address is required: the suppressed address to send to again")
    entry = _console(request).mf.suppressions.lift(
        address, actor=_actor(request, data), reason=_text(data, "reason")
    )
    return suppression_json(entry)


@endpoint()
def kinds(request: Request, _: dict[str, Any]) -> Any:
    """The job kinds this console can create."""
    return {"kinds": _console(request).kinds()}


@endpoint()
def audit(request: Request, _: dict[str, Any]) -> Any:
    """Operator actions on every job, newest first."""
    before = _int_param(request, "before", low=1, high=_MAX_ID, default=None)
    limit = _int_param(request, "limit", low=1, high=500, default=100)
    assert limit is not None
    return audit_json(_console(request).audit(before_id=before, limit=limit))


@endpoint()
def throughput(request: Request, _: dict[str, Any]) -> Any:
    """Jobs finished per minute."""
    minutes = _int_param(request, "minutes", low=1, high=1440, default=60)
    assert minutes is not None
    return {"minutes": throughput_json(_console(request).mf.jobs.throughput(minutes))}


@endpoint()
def limits(request: Request, _: dict[str, Any]) -> Any:
    """Every flow-control limit: its values, its use now, its busiest keys, who waits."""
    keys = _int_param(request, "keys", low=1, high=KEYS_MOST, default=KEYS_SHOWN)
    assert keys is not None
    return {"limits": _console(request).limits(keys=keys)}


@endpoint()
def get_limit(request: Request, _: dict[str, Any]) -> Any:
    """One flow-control limit by name (``kind:<kind>``, ``queue:<queue>``)."""
    keys = _int_param(request, "keys", low=1, high=KEYS_MOST, default=KEYS_MOST)
    assert keys is not None
    return _console(request).limit(str(request.path_params["name"]), keys=keys)


async def openapi(request: Request) -> Response:
    """The OpenAPI document of this API."""
    return JSONResponse(document(request.app.state.features))


async def not_found(request: Request) -> Response:
    """Anything else under /api."""
    return api_error(404, "NotFound", f"no API endpoint {request.url.path}: see /api/openapi.json")


routes = [
    Route("/api/openapi.json", openapi),
    Route("/api/overview", overview),
    Route("/api/jobs", list_jobs),
    Route("/api/jobs", create_job, methods=["POST"]),
    Route("/api/jobs/counts", job_counts),
    Route("/api/jobs/bulk/{action}", bulk, methods=["POST"]),
    Route("/api/jobs/{job_id:id}", get_job),
    Route("/api/jobs/{job_id:id}/{action}", act, methods=["POST"]),
    Route("/api/queues", queues),
    Route("/api/queues/bulk/{action}", bulk_queues, methods=["POST"]),
    Route("/api/queues/{name:name}/pause", pause_queue, methods=["POST"]),
    Route("/api/queues/{name:name}/resume", resume_queue, methods=["POST"]),
    Route("/api/schedules", schedules),
    Route("/api/schedules/{name:name}/pause", pause_schedule, methods=["POST"]),
    Route("/api/schedules/{name:name}/resume", resume_schedule, methods=["POST"]),
    Route("/api/workers", workers),
    Route("/api/limits", limits),
    Route("/api/limits/{name:name}", get_limit),
    Route("/api/outbox", list_emails),
    Route("/api/outbox/counts", email_counts),
    Route("/api/outbox/unknown", unknown_emails),
    Route("/api/outbox/{email_id:id}", get_email),
    Route("/api/outbox/{email_id:id}/cancel", cancel_email, methods=["POST"]),
    Route("/api/outbox/{email_id:id}/resolve", resolve_email, methods=["POST"]),
    Route("/api/outbox/{email_id:id}/record-again", record_email_again, methods=["POST"]),
    Route("/api/suppressions", list_suppressions),
    Route("/api/suppressions", suppress_address, methods=["POST"]),
    Route("/api/suppressions/events", ingest_suppression_events, methods=["POST"]),
    Route("/api/suppressions/lift", lift_suppression, methods=["POST"]),
    Route("/api/suppressions/soft-bounces", list_soft_bounces),
    Route("/api/kinds", kinds),
    Route("/api/audit", audit),
    Route("/api/throughput", throughput),
]
