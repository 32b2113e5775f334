"""The jobs part of the console API's OpenAPI document: schemas and paths.

Internal; assembled by :func:`mailfathom.web.openapi.document`.
"""

from __future__ import annotations

from typing import Any

from mailfathom.web.openapi_common import (
    ACTION,
    ID,
    JOB_ID,
    NAME,
    TIME,
    TIME_OR_NULL,
    answer,
    nullable,
    object_schema,
    operation,
    query,
    ref,
)

__all__ = ["PATHS", "SCHEMAS"]

_STATES = ["Pending", "Claimed", "Succeeded", "DeadLettered", "Dropped"]
_OUTCOMES = [
    "Succeeded",
    "Failed",
    "ExecutionTimeout",
    "ShutdownTimeout",
    "LeaseExpired",
    "UnknownKind",
    "Aborted",
    "Snoozed",
]

_JOB: dict[str, Any] = {
    "id": ID,
    "kind": {"type": "string"},
    "queue": {"type": "string"},
    "payload": {"type": "object"},
    "priority": {"type": "integer"},
    "state": {"type": "string", "enum": _STATES},
    "idempotency_key": nullable("string"),
    "available_at": TIME_OR_NULL,
    "attempts": {"type": "integer", "minimum": 0},
    "attempt_base": {"type": "integer", "minimum": 0},
    "max_attempts": {"type": "integer", "minimum": 1},
    "lease_owner": nullable("string"),
    "lease_expires_at": TIME_OR_NULL,
    "claimed_by": nullable("string"),
    "claimed_at": TIME_OR_NULL,
    "failure_class": {"enum": ["Permanent", "Transient", None]},
    "failure_reason": nullable("string"),
    "created_at": TIME,
    "finished_at": TIME_OR_NULL,
    "compacted_at": TIME_OR_NULL,
    "abort_reason": nullable("string"),
    "snoozes": {"type": "integer", "minimum": 0},
    "trace_context": nullable("string"),
    "limit_key": nullable("string", description="its flow-control limit key, if any"),
    "result": {
        "type": ["object", "array", "string", "number", "boolean", "null"],
        "description": "What its handler returned (any JSON value), once Succeeded; null "
        "when the handler returned None, before it succeeded, and once retention "
        "compacted the job",
    },
    "held": {"type": "boolean"},
    "attempts_left": {"type": "integer", "minimum": 0},
}

_COUNT = {"type": "integer", "minimum": 0}
#: The overview's retention block: the last pruning pass and rows per state.
_RETENTION = object_schema(
    {
        "last_started_at": TIME_OR_NULL,
        "last_finished_at": TIME_OR_NULL,
        "pruning_now": nullable("string"),
        "last_pass": nullable("string"),
        "last_rows": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "additionalProperties": {"type": "object", "additionalProperties": _COUNT},
            },
        },
        "rows": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "additionalProperties": object_schema({"rows": _COUNT, "compacted": _COUNT}),
            },
        },
    }
)

_FILTER_PARAMS = [
    query("state", "Pending, Claimed, Succeeded, DeadLettered, Dropped or Held"),
    query("kind", "Only this kind"),
    query("queue", "Only this queue"),
    query("text", "Text in the failure reason, idempotency key or payload"),
    query("older_than", "Enqueued longer ago than this (30m, 2h, 7d)"),
    query("newer_than", "Enqueued more recently than this (30m, 2h, 7d)"),
]

#: The job schemas (and the overview, audit log and throughput).
SCHEMAS: dict[str, Any] = {
    "Job": object_schema(_JOB),
    "Attempt": object_schema(
        {
            "job_id": ID,
            "attempt": {"type": "integer", "minimum": 1},
            "outcome": {"type": "string", "enum": _OUTCOMES},
            "failure_class": {"enum": ["Permanent", "Transient", None]},
            "error_type": nullable("string"),
            "message": nullable("string"),
            "traceback": nullable("string"),
            "worker": nullable("string"),
            "started_at": TIME_OR_NULL,
            "finished_at": TIME_OR_NULL,
        }
    ),
    "JobEvent": object_schema(
        {
            "id": ID,
            "job_id": ID,
            "at": TIME,
            "actor": {"type": "string"},
            "action": {"type": "string"},
            "from_state": {"type": "string", "enum": _STATES},
            "to_state": {"type": "string", "enum": _STATES},
            "reason": nullable("string"),
        }
    ),
    "JobPage": object_schema(
        {
            "jobs": {"type": "array", "items": {"$ref": "#/components/schemas/Job"}},
            "next_before": nullable("integer"),
        }
    ),
    "JobDetail": object_schema(
        {
            "job": {"$ref": "#/components/schemas/Job"},
            "attempts": {"type": "array", "items": {"$ref": "#/components/schemas/Attempt"}},
            "events": {"type": "array", "items": {"$ref": "#/components/schemas/JobEvent"}},
        }
    ),
    "CreatedJob": object_schema({**_JOB, "created": {"type": "boolean"}}),
    "Counts": {
        "type": "object",
        "properties": {name: {"type": "integer", "minimum": 0} for name in [*_STATES, "Held"]},
        "required": [*_STATES, "Held"],
        "additionalProperties": False,
    },
    "Minute": object_schema(
        {
            "minute": TIME,
            "succeeded": {"type": "integer", "minimum": 0},
            "dead_lettered": {"type": "integer", "minimum": 0},
            "dropped": {"type": "integer", "minimum": 0},
            "failed_attempts": {"type": "integer", "minimum": 0},
        }
    ),
    "Overview": object_schema(
        {
            "at": TIME,
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
            "retention": _RETENTION,
            "smtp_problem": nullable(
                "string", description="the SMTP configuration error pausing delivery"
            ),
            "unhandled_kinds": {
                "type": "object",
                "description": "kind -> due jobs of it that no live worker handles (they "
                "wait, no attempt spent); empty while no worker is alive",
                "additionalProperties": {"type": "integer", "minimum": 1},
            },
            "attention": {
                "type": "array",
                "items": object_schema(
                    {
                        "key": {"type": "string"},
                        "label": {"type": "string"},
                        "count": {"type": "integer", "minimum": 1},
                    }
                ),
            },
        }
    ),
    "AuditPage": object_schema(
        {
            "events": {"type": "array", "items": {"$ref": "#/components/schemas/JobEvent"}},
            "next_before": nullable("integer"),
        }
    ),
    "BulkResult": object_schema(
        {
            "action": ACTION["schema"],
            "done": {"type": "array", "items": ID},
            "refused": {
                "type": "array",
                "items": object_schema({"id": ID, "error": {"type": "string"}}),
            },
        }
    ),
    "PausedQueue": object_schema(
        {
            "queue": {"type": "string"},
            "paused_at": TIME,
            "actor": {"type": "string"},
            "reason": nullable("string"),
        }
    ),
    "Queue": object_schema(
        {
            "queue": {"type": "string"},
            "pending": {"type": "integer", "minimum": 0},
            "held": {"type": "integer", "minimum": 0},
            "running": {"type": "integer", "minimum": 0},
            "paused": {"anyOf": [ref("PausedQueue"), {"type": "null"}]},
        }
    ),
    "QueueBulkResult": object_schema(
        {
            "action": {"type": "string", "enum": ["pause", "resume"]},
            "done": {"type": "array", "items": {"type": "string"}},
            "refused": {
                "type": "array",
                "items": object_schema({"queue": {"type": "string"}, "error": {"type": "string"}}),
            },
        }
    ),
    "QueueBody": {
        "type": "object",
        "properties": {
            "reason": {"type": "string", "maxLength": 2000},
            "actor": {"type": "string", "maxLength": 100},
        },
        "additionalProperties": False,
    },
    "QueueBulkBody": {
        "type": "object",
        "properties": {
            "queues": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "reason": {"type": "string", "maxLength": 2000},
            "actor": {"type": "string", "maxLength": 100},
        },
        "required": ["queues"],
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
            "ids": {"type": "array", "items": ID},
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
            "hold": {
                "type": "boolean",
                "default": False,
                "description": "true creates it held: no worker takes it until it is released",
            },
            "idempotency_key": {"type": "string"},
        },
        "required": ["kind"],
        "additionalProperties": False,
    },
}

#: The job paths (and the overview, kinds, audit log and throughput).
PATHS: dict[str, Any] = {
    "/api/overview": {
        "get": operation(
            "Counts, throughput and what waits for an operator",
            answer("The overview", "Overview"),
            operation_id="overview",
        )
    },
    "/api/jobs": {
        "get": operation(
            "Jobs newest first, filtered, keyset-paginated",
            answer("A page of jobs", "JobPage"),
            params=[
                *_FILTER_PARAMS,
                query(
                    "before",
                    "Only jobs with a smaller id (the previous page's next_before)",
                    type="integer",
                    minimum=1,
                ),
                query("limit", "Page size", type="integer", minimum=1, maximum=500),
            ],
            operation_id="listJobs",
        ),
        "post": operation(
            "Create a job of a registered kind, ready to run unless hold is true",
            answer("The job", "CreatedJob"),
            code="201",
            body="NewJob",
            operation_id="createJob",
        ),
    },
    "/api/jobs/counts": {
        "get": operation(
            "Jobs per state, and held jobs",
            answer("Counts", "Counts"),
            operation_id="jobCounts",
        )
    },
    "/api/jobs/{job_id}": {
        "get": operation(
            "One job with every attempt and its audit trail",
            answer("The job", "JobDetail"),
            params=[JOB_ID],
            errors=("404",),
            operation_id="getJob",
        )
    },
    "/api/jobs/{job_id}/{action}": {
        "post": operation(
            "Requeue or drop a dead letter, release (run) a held job, hold a Pending job, "
            "run a delayed one now, or abort a Claimed one; audited",
            answer("The job afterwards", "Job"),
            params=[JOB_ID, ACTION],
            body="ActionBody",
            errors=("404", "409"),
            operation_id="actOnJob",
        )
    },
    "/api/jobs/bulk/{action}": {
        "post": operation(
            "Apply an action to listed jobs or to every job a filter matches",
            answer("What was done and what was refused", "BulkResult"),
            params=[ACTION],
            body="BulkBody",
            operation_id="bulkAction",
        )
    },
    "/api/queues": {
        "get": operation(
            "Every queue with unfinished jobs or a pause",
            {
                "description": "Queues by name",
                "content": {
                    "application/json": {
                        "schema": object_schema(
                            {"queues": {"type": "array", "items": ref("Queue")}}
                        )
                    }
                },
            },
            operation_id="queues",
        )
    },
    "/api/queues/{name}/pause": {
        "post": operation(
            "Pause a queue fleet-wide: no worker claims from it; enqueue goes on; audited",
            answer("The pause", "PausedQueue"),
            params=[NAME],
            body="QueueBody",
            errors=("409",),
            operation_id="pauseQueue",
        )
    },
    "/api/queues/{name}/resume": {
        "post": operation(
            "Resume a paused queue (idle workers are woken); audited",
            answer("The pause it ended", "PausedQueue"),
            params=[NAME],
            body="QueueBody",
            errors=("409",),
            operation_id="resumeQueue",
        )
    },
    "/api/queues/bulk/{action}": {
        "post": operation(
            "Pause or resume several queues, each audited",
            answer("What was done and what was refused", "QueueBulkResult"),
            params=[
                {
                    "name": "action",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string", "enum": ["pause", "resume"]},
                }
            ],
            body="QueueBulkBody",
            operation_id="bulkQueues",
        )
    },
    "/api/kinds": {
        "get": operation(
            "Job kinds this console can create",
            {
                "description": "Registered kinds",
                "content": {
                    "application/json": {
                        "schema": object_schema(
                            {"kinds": {"type": "array", "items": {"type": "string"}}}
                        )
                    }
                },
            },
            operation_id="kinds",
        )
    },
    "/api/audit": {
        "get": operation(
            "Operator actions on every job, newest first",
            answer("A page of the audit log", "AuditPage"),
            params=[
                query("before", "Only events with a smaller id", type="integer", minimum=1),
                query("limit", "Page size", type="integer", minimum=1, maximum=500),
            ],
            operation_id="audit",
        )
    },
    "/api/throughput": {
        "get": operation(
            "Jobs finished (and attempts failed) per UTC minute",
            {
                "description": "Per-minute counts, oldest first",
                "content": {
                    "application/json": {
                        "schema": object_schema(
                            {"minutes": {"type": "array", "items": ref("Minute")}}
                        )
                    }
                },
            },
            params=[
                query("minutes", "How many minutes back", type="integer", minimum=1, maximum=1440)
            ],
            operation_id="throughput",
        )
    },
}
