"""Checks of the plain arguments the public API takes: ids, page sizes, keys, actors.

Internal. One place for the wording and the limits, so ``mf.jobs``, ``mf.queue``,
``mf.schedules`` and ``mf.outbox`` refuse the same bad input with the same clear
:class:`~mailfathom.errors.InvalidInput` before anything reaches the store
(PostgreSQL refuses NUL characters in text; SQLite would store them).

Every free text an operator or caller gives (actor, reason, idempotency key, filter text)
passes :func:`check_text`: no NUL, and no lone surrogate (``"\\ud800"``, which JSON
escapes and ``surrogateescape`` command-line arguments can carry but neither store can
encode), so such text is a clear :class:`~mailfathom.errors.InvalidInput`, never a
database error.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta

from mailfathom.clock import utc
from mailfathom.errors import InvalidInput

__all__ = [
    "KEY_LONGEST",
    "MAX_ATTEMPTS",
    "available_at",
    "check_actor",
    "check_id",
    "check_key",
    "check_limit",
    "check_max_attempts",
    "check_name",
    "check_priority",
    "check_seconds",
    "check_text",
]

#: The longest idempotency key accepted, in characters.
KEY_LONGEST = 512
#: The most attempts a job may have: one limit for kinds (checked when registered), the
#: delivery setting and ``enqueue(max_attempts=...)``.
MAX_ATTEMPTS = 10_000

#: What a kind, queue or schedule name is made of; matched against the whole name
#: (``fullmatch``: a ``$`` would also let a trailing newline through).
_NAME = re.compile(r"[A-Za-z0-9_.:\-/]+")


def check_name(what: str, value: object, *, longest: int) -> str:
    """``value`` if it is a usable kind or queue name, else a clear error."""
    if (
        not isinstance(value, str)
        or not value
        or len(value) > longest
        or not _NAME.fullmatch(value)
    ):
        raise InvalidInput(
            f"{what} {value!r} is not usable: use 1-{longest} characters from letters, digits "
            "and . _ : - /"
        )
    return value


def check_text(name: str, value: object) -> str:
    """``value`` if it is text that can be stored: a string with no NUL character and no
    lone surrogate (half of a UTF-16 pair, not a character); a clear error naming ``name``
    otherwise."""
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be text, not {type(value).__name__}")
    if "\x00" in value:
        raise InvalidInput(f"{name} must not contain NUL (\\x00) characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            f"{name} holds a lone surrogate ({value[exc.start]!r} at position {exc.start}), "
            "which is half of a UTF-16 pair, not a character: send whole characters "
            '(in JSON, a pair such as "\\ud83d\\ude00", or the character itself)'
        ) from None
    return value


def check_key(key: object) -> str | None:
    """An idempotency key: ``None``, or 1-512 characters of text (:func:`check_text`)."""
    if key is None:
        return None
    if not isinstance(key, str) or not key or len(key) > KEY_LONGEST:
        raise InvalidInput(
            f"idempotency_key must be a non-empty string of at most {KEY_LONGEST} characters, "
            f"not {key!r}"
        )
    return check_text("idempotency_key", key)


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
    """Who acts (non-blank text) and why (text or ``None``), both :func:`check_text`."""
    if not isinstance(actor, str) or not actor.strip():
        raise InvalidInput("actor must name who acts (for the audit trail), e.g. actor='ops'")
    check_text("actor", actor)
    if reason is not None:
        check_text("reason", reason)


def check_seconds(name: str, value: object, *, positive: bool) -> None:
    """A duration in seconds: a finite number, above zero when ``positive``, else at least 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise InvalidInput(f"{name} must be a number of seconds, not {value!r}")
    if value < 0 or (positive and value == 0):
        raise InvalidInput(f"{name} must be {'positive' if positive else 'zero or more'} seconds")


def check_priority(value: object) -> int:
    """A job's priority: a 32-bit integer (higher runs first)."""
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31:
        raise InvalidInput(f"priority must be a 32-bit integer, not {value!r}")
    return value


def check_max_attempts(value: object, *, name: str = "max_attempts") -> int:
    """A number of attempts: an integer from 1 to :data:`MAX_ATTEMPTS`."""
    return check_limit(value, name=name, high=MAX_ATTEMPTS)


def available_at(
    now: datetime, *, delay: timedelta | float | None, run_at: datetime | None, hold: bool
) -> datetime | None:
    """When a new job becomes due: ``now``, ``now + delay``, ``run_at`` (UTC), or None
    when held. A time outside the years 1-9999 in UTC is refused, naming the end it misses."""
    given = [name for name, value in (("delay", delay), ("run_at", run_at)) if value is not None]
    if hold and given:
        raise InvalidInput(f"hold=True cannot be combined with {given[0]}: a held job has no time")
    if len(given) > 1:
        raise InvalidInput("give either delay or run_at, not both")
    if hold:
        return None
    if run_at is not None:
        return _run_at(run_at)
    if delay is not None:
        return _after(now, delay)
    return now


def _run_at(run_at: object) -> datetime:
    if not isinstance(run_at, datetime):
        raise InvalidInput(f"run_at must be a datetime, not {type(run_at).__name__}")
    try:
        return utc(run_at)
    except OverflowError:
        offset = run_at.utcoffset() or timedelta(0)
        end = "before the year 1" if offset > timedelta(0) else "past the year 9999"
        raise InvalidInput(
            f"run_at {run_at.isoformat()} is {end} in UTC: give a time from "
            "0001-01-01 to 9999-12-31 UTC (a time already past runs at once)"
        ) from None


def _after(now: datetime, delay: object) -> datetime:
    if isinstance(delay, bool) or not isinstance(delay, (timedelta, int, float)):
        raise InvalidInput(f"delay must be a timedelta or seconds, not {delay!r}")
    if isinstance(delay, float) and not math.isfinite(delay):
        raise InvalidInput(f"delay must be a finite number of seconds, not {delay!r}")
    if (delay < timedelta(0)) if isinstance(delay, timedelta) else (delay < 0):
        raise InvalidInput(f"delay must be zero or positive, not {delay!r}")
    try:
        return now + (delay if isinstance(delay, timedelta) else timedelta(seconds=delay))
    except OverflowError:
        raise InvalidInput(
            f"delay is too far in the future: {delay!r} goes past the year 9999"
        ) from None
