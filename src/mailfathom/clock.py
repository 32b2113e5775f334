"""Where queue logic gets the time: an injected :class:`Clock`.

Queue logic never reads the wall clock itself; every query gets ``now`` from a
clock, so tests move time with a :class:`FakeClock` instead of sleeping.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "FakeClock", "SystemClock", "utc"]


def utc(moment: datetime) -> datetime:
    """Return ``moment`` as an aware UTC datetime; naive values are refused."""
    if moment.tzinfo is None:
        from mailfathom.errors import InvalidInput

        raise InvalidInput(
            f"naive datetime {moment.isoformat()} has no time zone: pass an aware datetime "
            "(for example datetime.now(UTC))"
        )
    return moment.astimezone(UTC)


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
        """Jump to ``moment`` (aware), forward or back."""
        with self._lock:
            self._now = utc(moment)

    def __repr__(self) -> str:
        return f"FakeClock({self._now.isoformat()})"
