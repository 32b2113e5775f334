"""The OpenAPI 3.1 document of the console's JSON API (``GET /api/openapi.json``).

Internal. Written by hand next to :mod:`mailfathom.web.api` and checked two
ways by the tests: every API route is documented (and nothing else), and a
schemathesis run sends generated requests to every operation and validates
each answer against the schemas here. The jobs and outbox parts live in
:mod:`~mailfathom.web.openapi_jobs` and :mod:`~mailfathom.web.openapi_outbox`,
the flow-control limits in :mod:`~mailfathom.web.openapi_limits`, the shared building
blocks in :mod:`~mailfathom.web.openapi_common`; the
schedule and worker parts are here.
"""

from __future__ import annotations

from typing import Any

from mailfathom.web import openapi_common as common
from mailfathom.web import openapi_jobs, openapi_limits, openapi_outbox, openapi_suppressions
from mailfathom.web.openapi_common import (
    NAME,
    TIME,
    TIME_OR_NULL,
    answer,
    list_answer,
    nullable,
    object_schema,
    operation,
)

__all__ = ["document"]

_SCHEDULE_SCHEMAS: dict[str, Any] = {
    "Schedule": object_schema(
        {
            "name": {"type": "string"},
            "cron": {"type": "string"},
            "timezone": {"type": "string"},
            "kind": {"type": "string"},
            "queue": {"type": "string"},
            "payload": {"type": "object"},
            "paused": {"type": "boolean"},
            "paused_by": nullable("string"),
            "paused_at": TIME_OR_NULL,
            "pause_reason": nullable("string"),
            "not_before": TIME,
            "last_tick": TIME_OR_NULL,
            "last_job_id": nullable("integer"),
            "created_at": TIME,
            "updated_at": TIME,
            "next_tick": TIME_OR_NULL,
        }
    ),
    "Worker": object_schema(
        {
            "id": {"type": "string"},
            "host": {"type": "string"},
            "pid": {"type": "integer"},
            "queues": {"type": ["array", "null"], "items": {"type": "string"}},
            "kinds": {"type": "array", "items": {"type": "string"}},
            "concurrency": {"type": "integer", "minimum": 1},
            "lease": {"type": "number", "description": "seconds"},
            "started_at": TIME,
            "last_heartbeat_at": TIME,
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
}

_SCHEDULE_PATHS: dict[str, Any] = {
    "/api/schedules": {
        "get": operation(
            "Every stored schedule with its next tick",
            list_answer("Schedules", "schedules", "Schedule"),
            operation_id="schedules",
        )
    },
    "/api/schedules/{name}/pause": {
        "post": operation(
            "Pause a schedule on every worker",
            answer("The schedule afterwards", "Schedule"),
            params=[NAME],
            body="ScheduleBody",
            errors=("404", "409"),
            operation_id="pauseSchedule",
        )
    },
    "/api/schedules/{name}/resume": {
        "post": operation(
            "Resume a schedule from its next tick",
            answer("The schedule afterwards", "Schedule"),
            params=[NAME],
            body="ResumeBody",
            errors=("404", "409"),
            operation_id="resumeSchedule",
        )
    },
    "/api/workers": {
        "get": operation(
            "Every registered worker, alive or silent past its lease",
            list_answer("Workers", "workers", "Worker"),
            operation_id="workers",
        )
    },
}

SCHEMAS: dict[str, Any] = {
    **common.SCHEMAS,
    **openapi_jobs.SCHEMAS,
    **_SCHEDULE_SCHEMAS,
    **openapi_outbox.SCHEMAS,
    **openapi_limits.SCHEMAS,
    **openapi_suppressions.SCHEMAS,
}


def document(features: Any = None) -> dict[str, Any]:
    """The OpenAPI document for the endpoints this console serves."""
    paths: dict[str, Any] = {
        **openapi_jobs.PATHS,
        **_SCHEDULE_PATHS,
        **openapi_limits.PATHS,
        **openapi_outbox.PATHS,
        **openapi_suppressions.PATHS,
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
