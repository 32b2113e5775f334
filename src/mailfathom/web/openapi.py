"""The OpenAPI 3.1 document of the console's JSON API (``GET /api/openapi.json``).

Internal. Written by hand next to :mod:`mailfathom.web.api` and checked two
ways by the tests: every API route is documented (and nothing else), and a
schemathesis run sends generated requests to every operation and validates
each answer against the schemas here.
"""

from __future__ import annotations

from typing import Any

__all__ = ["document"]

_STATES = ["Pending", "Claimed", "Succeeded", "DeadLettered", "Dropped"]
_STAGES = ["Recorded", "TransmissionBegun", "Sent", "Refused", "Cancelled"]
_OUTCOMES = [
    "Succeeded",
    "Failed",
    "ExecutionTimeout",
    "ShutdownTimeout",
    "LeaseExpired",
    "UnknownKind",
]


def _nullable(kind: str, **extra: Any) -> dict[str, Any]:
    return {"type": [kind, "null"], **extra}


_TIME = {"type": "string", "format": "date-time"}
_TIME_OR_NULL = _nullable("string", format="date-time")
_ID = {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}


def _object(properties: dict[str, Any], *, required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


_JOB: dict[str, Any] = {
    "id": _ID,
    "kind": {"type": "string"},
    "queue": {"type": "string"},
    "payload": {"type": "object"},
    "priority": {"type": "integer"},
    "state": {"type": "string", "enum": _STATES},
    "idempotency_key": _nullable("string"),
    "available_at": _TIME_OR_NULL,
    "attempts": {"type": "integer", "minimum": 0},
    "attempt_base": {"type": "integer", "minimum": 0},
    "max_attempts": {"type": "integer", "minimum": 1},
    "lease_owner": _nullable("string"),
    "lease_expires_at": _TIME_OR_NULL,
    "claimed_by": _nullable("string"),
    "claimed_at": _TIME_OR_NULL,
    "failure_class": {"enum": ["Permanent", "Transient", None]},
    "failure_reason": _nullable("string"),
    "created_at": _TIME,
    "finished_at": _TIME_OR_NULL,
    "held": {"type": "boolean"},
    "attempts_left": {"type": "integer", "minimum": 0},
}

SCHEMAS: dict[str, Any] = {
    "Error": _object(
        {
            "error": _object(
                {"type": {"type": "string"}, "message": {"type": "string"}},
            )
        }
    ),
    "Job": _object(_JOB),
    "Attempt": _object(
        {
            "job_id": _ID,
            "attempt": {"type": "integer", "minimum": 1},
            "outcome": {"type": "string", "enum": _OUTCOMES},
            "failure_class": {"enum": ["Permanent", "Transient", None]},
            "error_type": _nullable("string"),
            "message": _nullable("string"),
            "traceback": _nullable("string"),
            "worker": _nullable("string"),
            "started_at": _TIME_OR_NULL,
            "finished_at": _TIME_OR_NULL,
        }
    ),
    "JobEvent": _object(
        {
            "id": _ID,
            "job_id": _ID,
            "at": _TIME,
            "actor": {"type": "string"},
            "action": {"type": "string"},
            "from_state": {"type": "string", "enum": _STATES},
            "to_state": {"type": "string", "enum": _STATES},
            "reason": _nullable("string"),
        }
    ),
    "JobPage": _object(
        {
            "jobs": {"type": "array", "items": {"$ref": "#/components/schemas/Job"}},
            "next_before": _nullable("integer"),
        }
    ),
    "JobDetail": _object(
        {
            "job": {"$ref": "#/components/schemas/Job"},
            "attempts": {"type": "array", "items": {"$ref": "#/components/schemas/Attempt"}},
            "events": {"type": "array", "items": {"$ref": "#/components/schemas/JobEvent"}},
        }
    ),
    "CreatedJob": _object({**_JOB, "created": {"type": "boolean"}}),
    "Counts": {
        "type": "object",
        "properties": {name: {"type": "integer", "minimum": 0} for name in [*_STATES, "Held"]},
        "required": [*_STATES, "Held"],
        "additionalProperties": False,
    },
    "Minute": _object(
        {
            "minute": _TIME,
            "succeeded": {"type": "integer", "minimum": 0},
            "dead_lettered": {"type": "integer", "minimum": 0},
            "dropped": {"type": "integer", "minimum": 0},
            "failed_attempts": {"type": "integer", "minimum": 0},
        }
    ),
    "Overview": _object(
        {
            "at": _TIME,
            "job_counts": {
                "type": "object",
                "additionalProperties": {"type": "integer", "minimum": 0},
            },
            "held": {"type": "integer", "minimum": 0},
            "throughput": {"type": "array", "items": {"$ref": "#/components/schemas/Minute"}},
            "email_counts": {
                "type": "object",
                "additionalProperties": {"type": "integer", "minimum": 0},
            },
            "workers_alive": {"type": "integer", "minimum": 0},
            "workers_dead": {"type": "integer", "minimum": 0},
            "schedules": {"type": "integer", "minimum": 0},
            "schedules_paused": {"type": "integer", "minimum": 0},
            "attention": {
                "type": "array",
                "items": _object(
                    {
                        "key": {"type": "string"},
                        "label": {"type": "string"},
                        "count": {"type": "integer", "minimum": 1},
                    }
                ),
            },
        }
    ),
    "Schedule": _object(
        {
            "name": {"type": "string"},
            "cron": {"type": "string"},
            "timezone": {"type": "string"},
            "kind": {"type": "string"},
            "queue": {"type": "string"},
            "payload": {"type": "object"},
            "paused": {"type": "boolean"},
            "paused_by": _nullable("string"),
            "paused_at": _TIME_OR_NULL,
            "pause_reason": _nullable("string"),
            "not_before": _TIME,
            "last_tick": _TIME_OR_NULL,
            "last_job_id": _nullable("integer"),
            "created_at": _TIME,
            "updated_at": _TIME,
            "next_tick": _TIME_OR_NULL,
        }
    ),
    "Worker": _object(
        {
            "id": {"type": "string"},
            "host": {"type": "string"},
            "pid": {"type": "integer"},
            "queues": {"type": ["array", "null"], "items": {"type": "string"}},
            "kinds": {"type": "array", "items": {"type": "string"}},
            "concurrency": {"type": "integer", "minimum": 1},
            "lease": {"type": "number", "description": "seconds"},
            "started_at": _TIME,
            "last_heartbeat_at": _TIME,
            "alive": {"type": "boolean"},
        }
    ),
    "ScheduleBody": {
        "type": "object",
        "properties": {
            "reason": {"type": "string", "maxLength": 2000},
            "actor": {"type": "string", "maxLength": 100},
        },
        "additionalProperties": False,
    },
    "ResumeBody": {
        "type": "object",
        "properties": {"actor": {"type": "string", "maxLength": 100}},
        "additionalProperties": False,
    },
    "Recipient": _object(
        {
            "address": {"type": "string"},
            "reply_code": _nullable("integer"),
            "enhanced_status": _nullable("string"),
            "reply_text": _nullable("string"),
            "replied_at": _TIME_OR_NULL,
        }
    ),
    "Email": _object(
        {
            "id": _ID,
            "stage": {"type": "string", "enum": _STAGES},
            "idempotency_key": _nullable("string"),
            "message_id": {"type": "string"},
            "sender": {"type": "string"},
            "recipients": {"type": "array", "items": {"$ref": "#/components/schemas/Recipient"}},
            "subject": _nullable("string"),
            "size": {"type": "integer", "minimum": 0},
            "smtputf8": {"type": "boolean"},
            "eightbit": {"type": "boolean"},
            "attempts": {"type": "integer", "minimum": 0},
            "job_id": _nullable("integer"),
            "parent_id": _nullable("integer"),
            "created_at": _TIME,
            "last_attempt_at": _TIME_OR_NULL,
            "transmission_begun_at": _TIME_OR_NULL,
            "finished_at": _TIME_OR_NULL,
            "reply_code": _nullable("integer"),
            "reply_text": _nullable("string"),
            "reason": _nullable("string"),
        }
    ),
    "EmailPage": _object(
        {
            "emails": {"type": "array", "items": {"$ref": "#/components/schemas/Email"}},
            "next_before": _nullable("integer"),
        }
    ),
    "EmailDetail": _object(
        {
            "email": {"$ref": "#/components/schemas/Email"},
            "history": {
                "type": "array",
                "items": _object(
                    {"at": _TIME, "stage": {"type": "string"}, "detail": {"type": "string"}}
                ),
            },
            "events": {
                "type": "array",
                "items": _object(
                    {
                        "id": _ID,
                        "email_id": _ID,
                        "at": _TIME,
                        "actor": {"type": "string"},
                        "action": {"type": "string"},
                        "from_stage": {"type": "string", "enum": _STAGES},
                        "to_stage": {"type": "string", "enum": _STAGES},
                        "reason": _nullable("string"),
                    }
                ),
            },
            "attempts": {"type": "array", "items": {"$ref": "#/components/schemas/Attempt"}},
        }
    ),
    "StageCounts": {
        "type": "object",
        "properties": {name: {"type": "integer", "minimum": 0} for name in _STAGES},
        "required": _STAGES,
        "additionalProperties": False,
    },
    "ResolveBody": {
        "type": "object",
        "properties": {
            "decision": {"type": "string", "enum": ["delivered", "send_again", "give_up"]},
            "reason": {"type": "string", "maxLength": 2000},
            "actor": {"type": "string", "maxLength": 100},
        },
        "required": ["decision", "reason"],
        "additionalProperties": False,
    },
    "AuditPage": _object(
        {
            "events": {"type": "array", "items": {"$ref": "#/components/schemas/JobEvent"}},
            "next_before": _nullable("integer"),
        }
    ),
    "BulkResult": _object(
        {
            "action": {"type": "string", "enum": ["requeue", "drop", "release"]},
            "done": {"type": "array", "items": _ID},
            "refused": {
                "type": "array",
                "items": _object({"id": _ID, "error": {"type": "string"}}),
            },
        }
    ),
    "ActionBody": {
        "type": "object",
        "properties": {
            "reason": {"type": "string", "maxLength": 2000},
            "actor": {"type": "string", "maxLength": 100},
        },
        "additionalProperties": False,
    },
    "JobFilter": {
        "type": "object",
        "properties": {
            "state": {"type": "string"},
            "kind": {"type": "string"},
            "queue": {"type": "string"},
            "text": {"type": "string"},
            "older_than": {"type": "string", "examples": ["2h"]},
            "newer_than": {"type": "string", "examples": ["7d"]},
        },
        "additionalProperties": False,
    },
    "BulkBody": {
        "type": "object",
        "properties": {
            "ids": {"type": "array", "items": _ID},
            "filter": {"$ref": "#/components/schemas/JobFilter"},
            "reason": {"type": "string", "maxLength": 2000},
            "actor": {"type": "string", "maxLength": 100},
        },
        "additionalProperties": False,
    },
    "NewJob": {
        "type": "object",
        "properties": {
            "kind": {"type": "string"},
            "payload": {"type": "object"},
            "queue": {"type": "string"},
            "priority": {"type": "integer"},
            "run_at": {"type": "string", "format": "date-time"},
            "hold": {"type": "boolean"},
            "idempotency_key": {"type": "string"},
        },
        "required": ["kind"],
        "additionalProperties": False,
    },
}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _answer(description: str, schema: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(schema)}}}


_ERRORS = {
    "400": _answer("Bad input: the message says what to change; nothing changed.", "Error"),
    "401": _answer("The console token is missing or wrong.", "Error"),
    "503": _answer("The database is unavailable.", "Error"),
}


def _op(
    summary: str,
    answer: dict[str, Any],
    *,
    code: str = "200",
    params: list[dict[str, Any]] | None = None,
    body: str | None = None,
    errors: tuple[str, ...] = (),
    operation_id: str,
) -> dict[str, Any]:
    responses = {code: answer, **_ERRORS}
    for status in errors:
        responses[status] = _answer(
            {
                "404": "No such job, schedule or email.",
                "409": "The job's state does not allow this move; nothing changed.",
                "415": "The body must be JSON (Content-Type: application/json).",
            }[status],
            "Error",
        )
    op: dict[str, Any] = {"summary": summary, "operationId": operation_id, "responses": responses}
    if params:
        op["parameters"] = params
    if body:
        op["requestBody"] = {
            "required": False,
            "content": {"application/json": {"schema": _ref(body)}},
        }
        op["responses"]["415"] = _answer("The body must be JSON.", "Error")
    return op


def _list_answer(description: str, key: str, schema: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {
            "application/json": {"schema": _object({key: {"type": "array", "items": _ref(schema)}})}
        },
    }


def _query(name: str, description: str, **schema: Any) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": schema or {"type": "string"},
    }


_NAME = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
_EMAIL_ID = {"name": "email_id", "in": "path", "required": True, "schema": _ID}
_JOB_ID = {"name": "job_id", "in": "path", "required": True, "schema": _ID}
_ACTION = {
    "name": "action",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "enum": ["requeue", "drop", "release"]},
}
_FILTER_PARAMS = [
    _query("state", "Pending, Claimed, Succeeded, DeadLettered, Dropped or Held"),
    _query("kind", "Only this kind"),
    _query("queue", "Only this queue"),
    _query("text", "Text in the failure reason, idempotency key or payload"),
    _query("older_than", "Enqueued longer ago than this (30m, 2h, 7d)"),
    _query("newer_than", "Enqueued more recently than this (30m, 2h, 7d)"),
]


def document(features: Any = None) -> dict[str, Any]:
    """The OpenAPI document for the endpoints this console serves."""
    paths: dict[str, Any] = {
        "/api/overview": {
            "get": _op(
                "Counts, throughput and what waits for an operator",
                _answer("The overview", "Overview"),
                operation_id="overview",
            )
        },
        "/api/jobs": {
            "get": _op(
                "Jobs newest first, filtered, keyset-paginated",
                _answer("A page of jobs", "JobPage"),
                params=[
                    *_FILTER_PARAMS,
                    _query(
                        "before",
                        "Only jobs with a smaller id (the previous page's next_before)",
                        type="integer",
                        minimum=1,
                    ),
                    _query("limit", "Page size", type="integer", minimum=1, maximum=500),
                ],
                operation_id="listJobs",
            ),
            "post": _op(
                "Create a job of a registered kind (held unless run_at is given)",
                _answer("The job", "CreatedJob"),
                code="201",
                body="NewJob",
                operation_id="createJob",
            ),
        },
        "/api/jobs/counts": {
            "get": _op(
                "Jobs per state, and held jobs",
                _answer("Counts", "Counts"),
                operation_id="jobCounts",
            )
        },
        "/api/jobs/{job_id}": {
            "get": _op(
                "One job with every attempt and its audit trail",
                _answer("The job", "JobDetail"),
                params=[_JOB_ID],
                errors=("404",),
                operation_id="getJob",
            )
        },
        "/api/jobs/{job_id}/{action}": {
            "post": _op(
                "Requeue or drop a dead letter, or release (run) a held job; audited",
                _answer("The job afterwards", "Job"),
                params=[_JOB_ID, _ACTION],
                body="ActionBody",
                errors=("404", "409"),
                operation_id="actOnJob",
            )
        },
        "/api/jobs/bulk/{action}": {
            "post": _op(
                "Apply an action to listed jobs or to every job a filter matches",
                _answer("What was done and what was refused", "BulkResult"),
                params=[_ACTION],
                body="BulkBody",
                operation_id="bulkAction",
            )
        },
        "/api/schedules": {
            "get": _op(
                "Every stored schedule with its next tick",
                _list_answer("Schedules", "schedules", "Schedule"),
                operation_id="schedules",
            )
        },
        "/api/schedules/{name}/pause": {
            "post": _op(
                "Pause a schedule on every worker",
                _answer("The schedule afterwards", "Schedule"),
                params=[_NAME],
                body="ScheduleBody",
                errors=("404", "409"),
                operation_id="pauseSchedule",
            )
        },
        "/api/schedules/{name}/resume": {
            "post": _op(
                "Resume a schedule from its next tick",
                _answer("The schedule afterwards", "Schedule"),
                params=[_NAME],
                body="ResumeBody",
                errors=("404", "409"),
                operation_id="resumeSchedule",
            )
        },
        "/api/workers": {
            "get": _op(
                "Every registered worker, alive or silent past its lease",
                _list_answer("Workers", "workers", "Worker"),
                operation_id="workers",
            )
        },
        "/api/outbox": {
            "get": _op(
                "Outgoing email newest first, optionally in one stage",
                _answer("A page of records", "EmailPage"),
                params=[
                    _query("stage", "Recorded, TransmissionBegun, Sent, Refused or Cancelled"),
                    _query("before", "Only records with a smaller id", type="integer", minimum=1),
                    _query("limit", "Page size", type="integer", minimum=1, maximum=500),
                ],
                operation_id="listEmails",
            )
        },
        "/api/outbox/counts": {
            "get": _op(
                "Records per stage", _answer("Counts", "StageCounts"), operation_id="emailCounts"
            )
        },
        "/api/outbox/unknown": {
            "get": _op(
                "Unknown outcomes (body sent, answer never read), oldest first",
                _list_answer("Records awaiting a decision", "emails", "Email"),
                operation_id="unknownEmails",
            )
        },
        "/api/outbox/{email_id}": {
            "get": _op(
                "One record with its stage history, audit trail and delivery attempts",
                _answer("The record", "EmailDetail"),
                params=[_EMAIL_ID],
                errors=("404",),
                operation_id="getEmail",
            )
        },
        "/api/outbox/{email_id}/cancel": {
            "post": _op(
                "Cancel a Recorded email (never sent); audited",
                _answer("The record afterwards", "Email"),
                params=[_EMAIL_ID],
                body="ActionBody",
                errors=("404", "409"),
                operation_id="cancelEmail",
            )
        },
        "/api/outbox/{email_id}/resolve": {
            "post": _op(
                "Resolve an unknown outcome: delivered, send_again or give_up, with a reason",
                _answer("The record afterwards", "Email"),
                params=[_EMAIL_ID],
                body="ResolveBody",
                errors=("404", "409"),
                operation_id="resolveEmail",
            )
        },
        "/api/outbox/{email_id}/record-again": {
            "post": _op(
                "Record a Refused email's exact bytes again as a new message; audited",
                _answer("The new record", "Email"),
                code="201",
                params=[_EMAIL_ID],
                body="ActionBody",
                errors=("404", "409"),
                operation_id="recordEmailAgain",
            )
        },
        "/api/kinds": {
            "get": _op(
                "Job kinds this console can create",
                {
                    "description": "Registered kinds",
                    "content": {
                        "application/json": {
                            "schema": _object(
                                {"kinds": {"type": "array", "items": {"type": "string"}}}
                            )
                        }
                    },
                },
                operation_id="kinds",
            )
        },
        "/api/audit": {
            "get": _op(
                "Operator actions on every job, newest first",
                _answer("A page of the audit log", "AuditPage"),
                params=[
                    _query("before", "Only events with a smaller id", type="integer", minimum=1),
                    _query("limit", "Page size", type="integer", minimum=1, maximum=500),
                ],
                operation_id="audit",
            )
        },
        "/api/throughput": {
            "get": _op(
                "Jobs finished (and attempts failed) per UTC minute",
                {
                    "description": "Per-minute counts, oldest first",
                    "content": {
                        "application/json": {
                            "schema": _object(
                                {"minutes": {"type": "array", "items": _ref("Minute")}}
                            )
                        }
                    },
                },
                params=[
                    _query(
                        "minutes", "How many minutes back", type="integer", minimum=1, maximum=1440
                    )
                ],
                operation_id="throughput",
            )
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "mailfathom console API",
            "version": "1",
            "description": "Reads and operator actions on jobs. With a console token, send "
            "'Authorization: Bearer <token>'. State-changing calls take JSON bodies.",
        },
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
    }
