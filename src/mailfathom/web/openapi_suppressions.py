"""The suppression-list part of the console API's OpenAPI document: schemas and paths.

Internal; assembled by :func:`mailfathom.web.openapi.document`.
"""

from __future__ import annotations

from typing import Any

from mailfathom.web.openapi_common import (
    TIME,
    answer,
    nullable,
    object_schema,
    operation,
    query,
)

__all__ = ["PATHS", "SCHEMAS"]

_REASONS = ["hard_bounce", "complaint", "manual"]

#: The suppression schemas.
SCHEMAS: dict[str, Any] = {
    "Suppression": object_schema(
        {
            "address": {"type": "string"},
            "reason": {"type": "string", "enum": _REASONS},
            "source": {"type": "string"},
            "detail": nullable("string"),
            "created_at": TIME,
            "actor": {"type": "string"},
        }
    ),
    "SuppressionPage": object_schema(
        {
            "suppressions": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/Suppression"},
            },
            "next_after": nullable("string"),
        }
    ),
    "SuppressBody": {
        "type": "object",
        "properties": {
            "address": {"type": "string", "maxLength": 320},
            "reason": {"type": "string", "enum": _REASONS},
            "source": {"type": "string", "maxLength": 100},
            "detail": {"type": "string", "maxLength": 2000},
            "actor": {"type": "string", "maxLength": 100},
        },
        "required": ["address"],
        "additionalProperties": False,
    },
    "EventsBody": {
        "type": "object",
        "properties": {
            "events": {
                "type": "array",
                "maxItems": 1000,
                "items": {
                    "type": "object",
                    "properties": {
                        "event": {"type": "string", "enum": ["bounce", "complaint"]},
                        "bounce": {"type": "string", "enum": ["hard", "soft"]},
                        "address": {"type": "string", "maxLength": 320},
                        "detail": {"type": "string", "maxLength": 2000},
                        "source": {"type": "string", "maxLength": 100},
                    },
                    "required": ["event", "address"],
                    "additionalProperties": False,
                },
            },
            "actor": {"type": "string", "maxLength": 100},
        },
        "required": ["events"],
        "additionalProperties": False,
    },
    "EventReport": object_schema(
        {
            "suppressed": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/Suppression"},
            },
            "soft": {"type": "array", "items": {"type": "string"}},
        }
    ),
    "SoftBounce": object_schema(
        {
            "id": {"type": "integer"},
            "address": {"type": "string"},
            "at": TIME,
            "source": {"type": "string"},
            "detail": nullable("string"),
            "actor": {"type": "string"},
        }
    ),
    "SoftBouncePage": object_schema(
        {
            "soft_bounces": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/SoftBounce"},
            },
            "total": {"type": "integer"},
            "next_before_id": nullable("integer"),
        }
    ),
    "SnsAnswer": object_schema(
        {
            "type": {
                "type": "string",
                "enum": ["Notification", "SubscriptionConfirmation", "UnsubscribeConfirmation"],
            },
            "topic_arn": {"type": "string"},
            "confirmed": {"type": "boolean"},
            "ignored": {"type": "boolean"},
            "message_id": {"type": "string"},
            "notification_type": {"type": "string"},
            "suppressed": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/Suppression"},
            },
            "soft": {"type": "array", "items": {"type": "string"}},
            "duplicate": {"type": "boolean"},
        },
        required=["type", "topic_arn"],
    ),
    "LiftBody": {
        "type": "object",
        "properties": {
            "address": {"type": "string", "maxLength": 320},
            "reason": {"type": "string", "maxLength": 2000},
            "actor": {"type": "string", "maxLength": 100},
        },
        "required": ["address"],
        "additionalProperties": False,
    },
}


def _sns_operation() -> dict[str, Any]:
    """``POST /api/suppressions/sns``: SNS posts its JSON as ``text/plain`` and sends no
    token (the signature and the allowed topics authenticate it)."""
    op = operation(
        "Amazon SNS delivers an SES bounce or complaint notification (or a subscription "
        "confirmation). No token: the message's SNS signature and the sns_topic_arns setting "
        "authenticate it. A permanent bounce or a complaint suppresses each recipient, a "
        "transient one is kept as a soft bounce; a MessageId applies once",
        answer("What was done (a retried MessageId reports duplicate)", "SnsAnswer"),
        operation_id="receiveSnsMessage",
    )
    op["security"] = []
    op["requestBody"] = {
        "required": True,
        "description": "The SNS message, JSON sent as text/plain by SNS",
        "content": {"text/plain": {"schema": {"type": "string", "maxLength": 1_000_000}}},
    }
    op["responses"]["403"] = answer(
        "The endpoint is off (NotConfigured: set sns_topic_arns), or the message's topic "
        "is not allowed or its signature does not verify (SignatureRefused); nothing changed",
        "Error",
    )
    too_large = answer("The body is larger than an SNS message (or than any request).", "Error")
    too_large["content"]["text/plain"] = {"schema": {"type": "string"}}
    op["responses"]["413"] = too_large
    op["responses"]["503"] = answer(
        "The signing certificate or SubscribeURL could not be fetched: SNS retries.", "Error"
    )
    return op


#: The suppression paths.
PATHS: dict[str, Any] = {
    "/api/suppressions": {
        "get": operation(
            "Suppressed addresses (never sent to) by address, a page at a time",
            answer("A page of entries", "SuppressionPage"),
            params=[
                query("search", "Only addresses containing this text (any case)"),
                query("after", "Only addresses after this one (the page's next_after)"),
                query("limit", "Page size", type="integer", minimum=1, maximum=500),
            ],
            operation_id="listSuppressions",
        ),
        "post": operation(
            "Suppress an address: no delivery sends to it from now on; audited. An address "
            "already suppressed keeps its entry",
            answer("The entry", "Suppression"),
            body="SuppressBody",
            operation_id="suppressAddress",
        ),
    },
    "/api/suppressions/events": {
        "post": operation(
            "Apply bounce and complaint events (a webhook's): a hard bounce or a complaint "
            "suppresses the address, a soft bounce never does; all checked before any applies",
            answer("The entries of the addresses suppressed, and the soft bounces", "EventReport"),
            body="EventsBody",
            operation_id="ingestSuppressionEvents",
        )
    },
    "/api/suppressions/soft-bounces": {
        "get": operation(
            "Soft bounces recorded (4.x.x DSNs, webhook soft bounces), newest first: kept "
            "and counted, they never suppress an address",
            answer("A page of soft bounces, and how many there are", "SoftBouncePage"),
            params=[
                query("before_id", "Only older ones (the page's next_before_id)", type="integer"),
                query("limit", "Page size", type="integer", minimum=1, maximum=500),
            ],
            operation_id="listSoftBounces",
        )
    },
    "/api/suppressions/sns": {"post": _sns_operation()},
    "/api/suppressions/lift": {
        "post": operation(
            "Lift a suppression: deliveries send to the address again; audited",
            answer("The entry lifted", "Suppression"),
            body="LiftBody",
            errors=("404",),
            operation_id="liftSuppression",
        )
    },
}
