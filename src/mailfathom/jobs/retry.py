"""When a failed attempt runs again: exponential backoff with full jitter, capped.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Full jitter (``uniform(0, min(cap, base·2^(n-1)))``) spreads a thundering herd
of retries better than any fixed schedule; see the AWS architecture note
"Exponential Backoff And Jitter". Each job kind may bring its own ``Backoff``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import timedelta

from mailfathom.errors import InvalidInput
from mailfathom.jobs.reasons import type_name
from mailfathom.jobs.signals import HardStop

__all__ = ["RETRY_AFTER_LIMIT", "Backoff", "retry_delay"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with full jitter.

    ``base`` is the ceiling of the first retry's delay, doubling each attempt up
    to ``cap``. The defaults (1 s, 1 h) retry fast first and never wait longer
    than an hour, so 20 attempts span roughly half a day.
    """

    base: timedelta = timedelta(seconds=1)
    cap: timedelta = timedelta(hours=1)

    def __post_init__(self) -> None:
        if self.base <= timedelta(0) or self.cap < self.base:
            raise InvalidInput("Backoff needs 0 < base <= cap")

    def ceiling(self, attempt: int) -> timedelta:
        """The longest delay after failed attempt number ``attempt`` (1-based)."""
        exponent = min(max(attempt - 1, 0), 62)
        seconds = min(self.cap.total_seconds(), self.base.total_seconds() * 2.0**exponent)
        return timedelta(seconds=seconds)

    def delay(self, attempt: int, rng: random.Random | None = None) -> timedelta:
        """A random delay in ``[0, ceiling(attempt)]``."""
        source = rng if rng is not None else random
        return self.ceiling(attempt) * source.random()


#: The longest wait a ``TransientFailure(retry_after=...)`` gets: a longer one is cut to it.
RETRY_AFTER_LIMIT = timedelta(days=365)
_LIMIT_SECONDS = RETRY_AFTER_LIMIT.total_seconds()
_BACKOFF = "retrying after the usual backoff"


def retry_delay(given: object) -> tuple[timedelta | None, str | None]:
    """The wait a handler's ``retry_after`` asks for, made safe, and a note when it was not.

    Returns ``(delay, note)``; a ``delay`` of None means "the kind's backoff". A
    timedelta or a number of seconds from 0 to :data:`RETRY_AFTER_LIMIT` is kept
    as it is; a longer one (``inf`` included) is cut to the limit; a negative one,
    NaN, or anything that is not a timedelta or a number falls back to the backoff.
    The note says which, for the attempt's reason. Never raises.
    """
    if given is None:
        return None, None
    name = type_name(type(given))
    if isinstance(given, bool) or not isinstance(given, (timedelta, int, float)):
        return (
            None,
            f"retry_after must be a timedelta or a number of seconds, not {name}: {_BACKOFF}",
        )
    try:
        seconds = given.total_seconds() if isinstance(given, timedelta) else given
        if isinstance(seconds, float) and math.isnan(seconds):
            return None, f"retry_after nan is not a number of seconds: {_BACKOFF}"
        if seconds < 0:
            return None, f"retry_after {_seconds(seconds)} is negative: {_BACKOFF}"
        if seconds > _LIMIT_SECONDS:
            days = RETRY_AFTER_LIMIT.days
            return RETRY_AFTER_LIMIT, (
                f"retry_after {_seconds(seconds)} is over the {days}-day limit: "
                f"retrying in {days} days"
            )
        if isinstance(given, timedelta):
            return given, None
        return timedelta(seconds=seconds), None
    except HardStop:
        raise
    except BaseException:  # a number subclass whose arithmetic misbehaves
        return None, f"retry_after ({name}) could not be read as seconds: {_BACKOFF}"


def _seconds(value: float) -> str:
    try:
        return f"{float(value):g} s"
    except OverflowError:  # an int past a float's range
        return "over 1e308 s"
