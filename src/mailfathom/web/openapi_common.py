"""Building blocks of the console API's OpenAPI document: schema and operation helpers.

Internal. :mod:`mailfathom.web.openapi` assembles the document from the parts
in :mod:`~mailfathom.web.openapi_jobs`, :mod:`~mailfathom.web.openapi_outbox`
and the schedule and worker parts it holds itself; the shapes every part
shares (errors, ids, times, operator bodies) live here.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ACTION",
    "EMAIL_ID",
    "ERRORS",
    "ID",
    "JOB_ID",
    "NAME",
    "SCHEMAS",
    "TIME",
    "TIME_OR_NULL",
    "answer",
    "list_answer",
    "nullable",
    "object_schema",
    "operation",
    "query",
    "ref",
]


def nullable(kind: str, **extra: Any) -> dict[str, Any]:
    """A JSON Schema of ``kind`` or null."""
    return {"type": [kind, "null"], **extra}


TIME = {"type": "string", "format": "date-time"}
TIME_OR_NULL = nullable("string", format="date-time")
ID = {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}


def object_schema(
    properties: dict[str, Any], *, required: list[str] | None = None
) -> dict[str, Any]:
    """A closed JSON object schema (every property required unless told)."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


def ref(name: str) -> dict[str, Any]:
    """A reference to the component schema ``name``."""
    return {"$ref": f"#/components/schemas/{name}"}


def answer(description: str, schema: str) -> dict[str, Any]:
    """A JSON response whose body is the component schema ``schema``."""
    return {"description": description, "content": {"application/json": {"schema": ref(schema)}}}


ERRORS = {
    "400": answer("Bad input: the message says what to change; nothing changed.", "Error"),
    "401": answer("The console token is missing or wrong.", "Error"),
    "429": {
        **answer(
            "Too many wrong tokens from this address: wait Retry-After seconds, then retry.",
            "Error",
        ),
        "headers": {
            "Retry-After": {
                "description": "Seconds to wait.",
                "schema": {"type": "integer", "minimum": 1},
            }
        },
    },
    "503": answer("The database is unavailable.", "Error"),
}


def operation(
    summary: str,
    success: dict[str, Any],
    *,
    code: str = "200",
    params: list[dict[str, Any]] | None = None,
    body: str | None = None,
    errors: tuple[str, ...] = (),
    operation_id: str,
) -> dict[str, Any]:
    """An operation with its success answer, the shared error answers and any of 404/409."""
    responses = {code: success, **ERRORS}
    for status in errors:
        responses[status] = answer(
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
            "content": {"application/json": {"schema": ref(body)}},
        }
        op["responses"]["415"] = answer("The body must be JSON.", "Error")
        op["responses"]["408"] = {
            "description": "The body did not arrive in time (30 s); nothing changed.",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    return op


def list_answer(description: str, key: str, schema: str) -> dict[str, Any]:
    """A JSON response holding one array ``key`` of ``schema`` items."""
    return {
        "description": description,
        "content": {
            "application/json": {
                "schema": object_schema({key: {"type": "array", "items": ref(schema)}})
            }
        },
    }


def query(name: str, description: str, **schema: Any) -> dict[str, Any]:
    """An optional query parameter (a string unless a schema is given)."""
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": schema or {"type": "string"},
    }


NAME = {
    "name": "name",
    "in": "path",
    "required": True,
    "description": "Percent-encoded whole (quote(name, safe='')): a / is sent as %2F, so a "
    "name such as reports/../mail reaches the server as it is",
    "schema": {"type": "string"},
}
EMAIL_ID = {"name": "email_id", "in": "path", "required": True, "schema": ID}
JOB_ID = {"name": "job_id", "in": "path", "required": True, "schema": ID}
ACTION = {
    "name": "action",
    "in": "path",
    "required": True,
    "schema": {
        "type": "string",
        "enum": ["requeue", "drop", "release", "hold", "run_now", "abort"],
    },
}

#: Schemas every area uses.
SCHEMAS: dict[str, Any] = {
    "Error": object_schema(
        {
            "error": object_schema(
                {"type": {"type": "string"}, "message": {"type": "string"}},
            )
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
}
