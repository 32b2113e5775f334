"""Where queue logic gets the time: an injected :class:`Clock`.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Queue logic never reads the wall clock itself; every query gets ``now`` from a
clock, so tests move time with a :class:`FakeClock` instead of sleeping.

Machines' clocks disagree a little. A lease is written with the claimer's clock
and judged by whoever looks (a reaping worker, an operator), so every judgement
allows :data:`DEFAULT_CLOCK_SKEW` (the ``clock_skew`` setting): a lease counts as
expired only once ``lease_expires_at + clock_skew <= now``. See
``docs/postgresql.md`` ("Clocks") for the assumptions this rests on.
"""

from __future__ import annotations

import math
import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

from mailfathom.errors import ConfigurationError, InvalidInput

__all__ = [
    "DEFAULT_CLOCK_SKEW",
    "MAX_CLOCK_SKEW",
    "Clock",
    "FakeClock",
    "SystemClock",
    "check_clock",
    "check_clock_skew",
    "utc",
]

#: How far apart two machines' clocks may be without a lease being judged expired early.
DEFAULT_CLOCK_SKEW = timedelta(seconds=10)
#: The largest margin accepted: beyond it a dead worker's jobs would wait too long.
MAX_CLOCK_SKEW = timedelta(hours=1)
_HALF_A_YEAR = timedelta(days=182)


def utc(moment: datetime) -> datetime:
    """Return ``moment`` as an aware UTC datetime; naive values are refused."""
    if moment.tzinfo is None:
        raise InvalidInput(
            f"naive datetime {moment.isoformat()} has no time zone: pass an aware datetime "
            "(for example datetime.now(UTC))"
        )
    return moment.astimezone(UTC)


def check_clock(clock: Clock) -> Clock:
    """Return ``clock`` once one call of its ``now()`` told aware UTC time.

    A naive datetime would be read as local time by one store and as the session's
    zone by the other, so the stores would disagree on every lease and due time; a
    zone other than UTC would break at its next daylight-saving change. Both are
    refused here, at start, with :class:`~mailfathom.errors.ConfigurationError`.
    """
    fix = "make now() return an aware UTC datetime, for example datetime.now(UTC)"
    now = getattr(clock, "now", None)
    if not callable(now):
        raise ConfigurationError(f"clock {clock!r} has no now() method: {fix}")
    try:
        moment = now()
    except Exception as exc:  # a clock that cannot tell the time cannot run a queue
        raise ConfigurationError(
            f"clock {clock!r} failed to tell the time ({exc!r}): {fix}"
        ) from exc
    if not isinstance(moment, datetime):
        raise ConfigurationError(
            f"clock {clock!r} returned {moment!r}, which is not a datetime: {fix}"
        )
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ConfigurationError(
            f"clock {clock!r} returned the naive datetime {moment.isoformat()}: {fix}"
        )
    zone = moment.tzinfo
    offsets = {
        zone.utcoffset(moment + shift) for shift in (-_HALF_A_YEAR, timedelta(0), _HALF_A_YEAR)
    }
    if offsets != {timedelta(0)}:
        raise ConfigurationError(
            f"clock {clock!r} returned {moment.isoformat()} in {zone}, which is not UTC: {fix}"
        )
    return clock


def check_clock_skew(seconds: object) -> timedelta:
    """The ``clock_skew`` setting as a timedelta: 0 to :data:`MAX_CLOCK_SKEW` seconds."""
    limit = MAX_CLOCK_SKEW.total_seconds()
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or not 0 <= seconds <= limit
    ):
        raise ConfigurationError(
            f"clock_skew must be a number of seconds from 0 to {limit:g}, not {seconds!r}: "
            "set it to how far apart your machines' clocks may be (default 10; "
            "MAILFATHOM_CLOCK_SKEW)"
        )
    return timedelta(seconds=seconds)


@runtime_checkable
class Clock(Protocol):
    """Tells the current instant, always as an aware UTC datetime."""

    def now(self) -> datetime:
        """The current instant in UTC."""
        ...


class SystemClock:
    """The real time, from the operating system."""

    def now(self) -> datetime:
        """The current instant in UTC."""
        return datetime.now(UTC)

    def __repr__(self) -> str:
        return "SystemClock()"


class FakeClock:
    """A clock that moves only when told to: for tests and simulations."""

    def __init__(self, start: datetime | None = None) -> None:
        """Start at ``start`` (aware; naive is refused), by default 2030-01-01 UTC."""
        self._now = utc(start) if start is not None else datetime(2030, 1, 1, tzinfo=UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """The instant this clock was last set or advanced to."""
        with self._lock:
            return self._now

    def advance(self, by: timedelta | float) -> datetime:
        """Move time forward by a timedelta or a number of seconds; returns the new instant."""
        step = by if isinstance(by, timedelta) else timedelta(seconds=by)
        if step < timedelta(0):
            raise ValueError("a FakeClock only moves forward: pass a positive duration")
        with self._lock:
            self._now += step
            return self._now

    def set(self, moment: datetime) -> None:
        """Jump to ``moment`` (aware; naive is refused), forward or back."""
        with self._lock:
            self._now = utc(moment)

    def __repr__(self) -> str:
        return f"FakeClock({self._now.isoformat()})"
