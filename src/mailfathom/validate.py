"""Checks of the plain arguments the public API takes: ids, page sizes, keys, actors.

Internal. One place for the wording and the limits, so ``mf.jobs``, ``mf.queue``,
``mf.schedules`` and ``mf.outbox`` refuse the same bad input with the same clear
:class:`~mailfathom.errors.InvalidInput` before anything reaches the store
(PostgreSQL refuses NUL characters in text; SQLite would store them).
"""

from __future__ import annotations

import math

from mailfathom.errors import InvalidInput

__all__ = ["KEY_LONGEST", "check_actor", "check_id", "check_key", "check_limit", "check_seconds"]

#: The longest idempotency key accepted, in characters.
KEY_LONGEST = 512


def check_key(key: object) -> str | None:
    """An idempotency key: ``None``, or 1-512 characters with no NUL."""
    if key is None:
        return None
    if not isinstance(key, str) or not key or len(key) > KEY_LONGEST:
        raise InvalidInput(
            f"idempotency_key must be a non-empty string of at most {KEY_LONGEST} characters, "
            f"not {key!r}"
        )
    if "\x00" in key:
        raise InvalidInput("idempotency_key must not contain NUL (\\x00) characters")
    return key


def check_id(value: object, what: str = "a job id") -> int:
    """A row id: a positive integer (``what`` names it in the error, e.g. "a job id")."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"{what} is a positive integer, not {value!r}")
    return value


def check_limit(limit: object, *, name: str = "limit", high: int = 10_000) -> int:
    """A page size (or similar count): an integer from 1 to ``high``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= high:
        raise InvalidInput(f"{name} must be an integer from 1 to {high}, not {limit!r}")
    return limit


def check_actor(actor: object, reason: object) -> None:
    """Who acts (non-blank text) and why (text or ``None``), neither holding NUL."""
    if not isinstance(actor, str) or not actor.strip():
        raise InvalidInput("actor must name who acts (for the audit trail), e.g. actor='ops'")
    if reason is not None and not isinstance(reason, str):
        raise InvalidInput("reason must be text")
    if "\x00" in actor or (reason is not None and "\x00" in reason):
        raise InvalidInput("actor and reason must not contain NUL (\\x00) characters")


def check_seconds(name: str, value: object, *, positive: bool) -> None:
    """A duration in seconds: a finite number, above zero when ``positive``, else at least 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise InvalidInput(f"{name} must be a number of seconds, not {value!r}")
    if value < 0 or (positive and value == 0):
        raise InvalidInput(f"{name} must be {'positive' if positive else 'zero or more'} seconds")
