"""The outbox part of the console API's OpenAPI document: schemas and paths.

Internal; assembled by :func:`mailfathom.web.openapi.document`.
"""

from __future__ import annotations

from typing import Any

from mailfathom.web.openapi_common import (
    EMAIL_ID,
    ID,
    TIME,
    TIME_OR_NULL,
    answer,
    nullable,
    object_schema,
    operation,
    query,
)

__all__ = ["PATHS", "SCHEMAS"]

_STAGES = ["Recorded", "TransmissionBegun", "Sent", "Refused", "Cancelled"]

#: The outgoing email schemas.
SCHEMAS: dict[str, Any] = {
    "Recipient": object_schema(
        {
            "address": {"type": "string"},
            "reply_code": nullable("integer"),
            "enhanced_status": nullable("string"),
            "reply_text": nullable("string"),
            "replied_at": TIME_OR_NULL,
        }
    ),
    "Email": object_schema(
        {
            "id": ID,
            "stage": {"type": "string", "enum": _STAGES},
            "idempotency_key": nullable("string"),
            "message_id": {"type": "string"},
            "sender": {"type": "string"},
            "recipients": {"type": "array", "items": {"$ref": "#/components/schemas/Recipient"}},
            "subject": nullable("string"),
            "size": {"type": "integer", "minimum": 0},
            "smtputf8": {"type": "boolean"},
            "eightbit": {"type": "boolean"},
            "attempts": {"type": "integer", "minimum": 0},
            "job_id": nullable("integer"),
            "parent_id": nullable("integer"),
            "created_at": TIME,
            "last_attempt_at": TIME_OR_NULL,
            "transmission_begun_at": TIME_OR_NULL,
            "body_transmissions": {"type": "integer", "minimum": 0},
            "compacted_at": TIME_OR_NULL,
            "finished_at": TIME_OR_NULL,
            "reply_code": nullable("integer"),
            "reply_text": nullable("string"),
            "reason": nullable("string"),
            "expires_at": TIME_OR_NULL,
            "root_id": nullable("integer"),
            "priority": {"type": "integer"},
            "queue": nullable("string"),
            "parts": {"type": "array", "items": {"$ref": "#/components/schemas/Email"}},
        }
    ),
    "EmailPage": object_schema(
        {
            "emails": {"type": "array", "items": {"$ref": "#/components/schemas/Email"}},
            "next_before": nullable("integer"),
        }
    ),
    "UnknownPage": object_schema(
        {
            "emails": {"type": "array", "items": {"$ref": "#/components/schemas/Email"}},
            "next_after": nullable("integer"),
            "total": {"type": "integer", "minimum": 0},
        }
    ),
    "EmailDetail": object_schema(
        {
            "email": {"$ref": "#/components/schemas/Email"},
            "history": {
                "type": "array",
                "items": object_schema(
                    {"at": TIME, "stage": {"type": "string"}, "detail": {"type": "string"}}
                ),
            },
            "events": {
                "type": "array",
                "items": object_schema(
                    {
                        "id": ID,
                        "email_id": ID,
                        "at": TIME,
                        "actor": {"type": "string"},
                        "action": {"type": "string"},
                        "from_stage": {"type": "string", "enum": _STAGES},
                        "to_stage": {"type": "string", "enum": _STAGES},
                        "reason": nullable("string"),
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
}

_PART_LIST = {"type": "array", "items": {"$ref": "#/components/schemas/Email"}}
#: What a cancel answers: the message (an Email) and what the cancel did to each part.
SCHEMAS["CancelledEmail"] = object_schema(
    {
        **SCHEMAS["Email"]["properties"],
        "cancelled": _PART_LIST,
        "begun": _PART_LIST,
        "finished": _PART_LIST,
    }
)

#: The outbox paths.
PATHS: dict[str, Any] = {
    "/api/outbox": {
        "get": operation(
            "Outgoing email newest first, optionally in one stage",
            answer("A page of records", "EmailPage"),
            params=[
                query("stage", "Recorded, TransmissionBegun, Sent, Refused or Cancelled"),
                query("before", "Only records with a smaller id", type="integer", minimum=1),
                query("limit", "Page size", type="integer", minimum=1, maximum=500),
            ],
            operation_id="listEmails",
        )
    },
    "/api/outbox/counts": {
        "get": operation(
            "Records per stage", answer("Counts", "StageCounts"), operation_id="emailCounts"
        )
    },
    "/api/outbox/unknown": {
        "get": operation(
            "Unknown outcomes (body sent, answer never read), oldest first, a page at a time",
            answer("A page of records awaiting a decision, and how many there are", "UnknownPage"),
            params=[
                query("after", "Only records with a larger id", type="integer", minimum=1),
                query("limit", "Page size", type="integer", minimum=1, maximum=500),
            ],
            operation_id="unknownEmails",
        )
    },
    "/api/outbox/{email_id}": {
        "get": operation(
            "One record with its stage history, audit trail and delivery attempts",
            answer("The record", "EmailDetail"),
            params=[EMAIL_ID],
            errors=("404",),
            operation_id="getEmail",
        )
    },
    "/api/outbox/{email_id}/cancel": {
        "post": operation(
            "Cancel a Recorded email (never sent), every Recorded part of a message; audited",
            answer(
                "The message afterwards, with what the cancel did to each part", "CancelledEmail"
            ),
            params=[EMAIL_ID],
            body="ActionBody",
            errors=("404", "409"),
            operation_id="cancelEmail",
        )
    },
    "/api/outbox/{email_id}/resolve": {
        "post": operation(
            "Resolve an unknown outcome: delivered, send_again or give_up, with a reason",
            answer("The record afterwards", "Email"),
            params=[EMAIL_ID],
            body="ResolveBody",
            errors=("404", "409"),
            operation_id="resolveEmail",
        )
    },
    "/api/outbox/{email_id}/record-again": {
        "post": operation(
            "Record a Refused email's exact bytes again as a new message; audited",
            answer("The new record", "Email"),
            code="201",
            params=[EMAIL_ID],
            body="ActionBody",
            errors=("404", "409"),
            operation_id="recordEmailAgain",
        )
    },
}
