"""The flow-control part of the console API's OpenAPI document: ``/api/limits``.

Internal. Assembled into the document by :mod:`mailfathom.web.openapi`; the shapes
are those of :func:`mailfathom.console.limits.limit_view` over ``mf.limits.usage()``.
"""

from __future__ import annotations

from typing import Any

from mailfathom.console.limits import KEYS_MOST, KEYS_SHOWN, WAITING_SHOWN
from mailfathom.web.openapi_common import (
    ID,
    NAME,
    answer,
    list_answer,
    nullable,
    object_schema,
    operation,
    query,
    ref,
)

__all__ = ["PATHS", "SCHEMAS"]

_COUNT = {"type": "integer", "minimum": 0}
_MOST = nullable("integer", minimum=1)
_RATE_OR_NULL = {"oneOf": [ref("Rate"), {"type": "null"}]}

SCHEMAS: dict[str, Any] = {
    "Rate": object_schema(
        {
            "count": {"type": "integer", "minimum": 1, "description": "starts at most"},
            "window_seconds": {"type": "number", "description": "per sliding window"},
        }
    ),
    "LimitKey": object_schema(
        {
            "key": {"type": "string"},
            "max_running": {**_MOST, "description": "this key's jobs running at once"},
            "rate": _RATE_OR_NULL,
            "running": _COUNT,
            "starts_in_window": _COUNT,
            "blocked": {"type": "boolean", "description": "no job of this key may start now"},
        }
    ),
    "Limit": object_schema(
        {
            "name": {"type": "string", "description": "kind:<kind> or queue:<queue>"},
            "scope": {"type": "string", "enum": ["kind", "queue"]},
            "target": {"type": "string"},
            "max_running": _MOST,
            "rate": _RATE_OR_NULL,
            "max_running_per_key": _MOST,
            "rate_per_key": _RATE_OR_NULL,
            "running": _COUNT,
            "starts_in_window": _COUNT,
            "blocked": {"type": "boolean", "description": "nothing more of it may start now"},
            "keys": {
                "type": "array",
                "items": ref("LimitKey"),
                "description": "blocked keys first, then the busiest (as many as asked)",
            },
            "keys_total": _COUNT,
            "keys_blocked": _COUNT,
            "waiting": {
                "type": "array",
                "items": ID,
                "maxItems": WAITING_SHOWN,
                "description": f"due Pending jobs it holds back, at most {WAITING_SHOWN}",
            },
            "waiting_more": {"type": "boolean", "description": "more wait than are listed"},
        }
    ),
}


def _keys(default: int) -> dict[str, Any]:
    return query(
        "keys",
        f"Keys listed per limit (default {default})",
        type="integer",
        minimum=1,
        maximum=KEYS_MOST,
    )


PATHS: dict[str, Any] = {
    "/api/limits": {
        "get": operation(
            "Every flow-control limit: its values, its use now, its keys, the jobs it holds back",
            list_answer("Limits by name", "limits", "Limit"),
            params=[_keys(KEYS_SHOWN)],
            operation_id="limits",
        )
    },
    "/api/limits/{name}": {
        "get": operation(
            "One flow-control limit by name (kind:<kind> or queue:<queue>)",
            answer("The limit", "Limit"),
            params=[NAME, _keys(KEYS_MOST)],
            errors=("404",),
            operation_id="limit",
        )
    },
}
