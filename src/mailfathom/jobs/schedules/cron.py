"""Cron expressions: which are accepted, and the instants they tick at in a time zone.

Internal; used by the schedules. croniter matches the fields against wall-clock
times; this module turns wall-clock times into instants the way Vixie/ISC cron
(``cron.c``) does across daylight-saving changes, which croniter alone does not
(it runs ``30 1 * * *`` at both 01:30s of an autumn night):

- A **fixed-time** expression (neither the minute nor the hour field starts with
  ``*``: ``30 1 * * *``, ``0 9 * * 1-5``, ``@daily``) ticks once per wall-clock
  time. A time that happens twice (clocks go back) ticks at its first occurrence
  only; a time that never happens (clocks go forward) ticks once, at the instant
  the clock jumps over it — several such times of one jump make one tick.
- A **wildcard** expression (``0 * * * *``, ``*/15 * * * *``, ``@hourly``) ticks at
  every wall-clock time that happens: in a repeated hour again, in a skipped one
  not at all, so an hourly job keeps running once an hour of real time.

Zone offsets are read from the IANA database (``zoneinfo``); the search for an
offset change assumes no zone changes its offset twice within 12 hours.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from mailfathom.errors import InvalidInput

__all__ = ["check_cron", "is_fixed_time", "latest_tick", "next_tick", "zone"]

SECOND = timedelta(seconds=1)
#: Offset changes are looked for at this spacing, then pinned down to the second.
_PROBE = timedelta(hours=12)
#: Aliases croniter knows; only ``@hourly`` has a ``*`` in its hour (as in cron).
_ALIASES = {
    "@yearly": True,
    "@annually": True,
    "@monthly": True,
    "@weekly": True,
    "@daily": True,
    "@midnight": True,
    "@hourly": False,
}
#: Steps of the tick search before giving up (each crosses one offset change).
_STEPS = 100


def check_cron(cron: object) -> str:
    """``cron`` if it is a five-field (or six, seconds last) expression that fires, else
    a clear :class:`InvalidInput`."""
    if not isinstance(cron, str) or not cron.strip() or len(cron) > 200:
        raise InvalidInput(f"cron must be a cron expression like '0 3 * * *', not {cron!r}")
    fields = cron.split()
    if not croniter.is_valid(cron) or not (
        len(fields) in (5, 6) or (len(fields) == 1 and fields[0].lower() in _ALIASES)
    ):
        raise InvalidInput(
            f"cron {cron!r} is not a valid cron expression: use five fields (minute hour "
            "day-of-month month day-of-week, e.g. '0 3 * * *'), or six with seconds last "
            "('* * * * * */10'); a year field is not supported"
        )
    try:
        croniter(cron, datetime(2000, 1, 1)).get_next(datetime)
    except CroniterError:
        raise InvalidInput(
            f"cron {cron!r} never fires (no date matches its day and month fields, such as "
            "'31 2' for 31 February): fix the day-of-month or month field"
        ) from None
    return cron


def zone(name: object) -> ZoneInfo:
    """The IANA time zone called ``name``, or a clear error."""
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"timezone must be an IANA name like 'Europe/Paris', not {name!r}")
    try:
        return _zone(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidInput(
            f"timezone {name!r} is not a known IANA time zone: use a name like 'UTC' or "
            "'Europe/Paris'"
        ) from exc


@lru_cache(maxsize=128)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


@lru_cache(maxsize=256)
def is_fixed_time(cron: str) -> bool:
    """True when neither the minute nor the hour field starts with ``*`` (cron's test)."""
    fields = cron.split()
    if len(fields) == 1:
        return _ALIASES.get(fields[0].lower(), True)
    return not fields[0].startswith(("*", "?")) and not fields[1].startswith(("*", "?"))


def next_tick(cron: str, timezone: str, now: datetime) -> datetime:
    """The first instant after ``now`` at which ``cron`` ticks in ``timezone`` (UTC)."""
    z, fixed = zone(timezone), is_fixed_time(cron)
    at = _whole(now) + SECOND  # the search includes ``at``
    before = _offset(z, at - SECOND)
    if fixed and _offset(z, at) > before:  # clocks go forward right at ``at``
        skipped_from, skipped_until = _naive(at + before), _naive(at + _offset(z, at))
        if _match_from(cron, skipped_from) < skipped_until:
            return at
    for _ in range(_STEPS):
        offset = _offset(z, at)
        wall = _match_from(cron, _wall(z, at))
        tick = _instant(wall, offset)
        change = _next_change(z, at, tick)
        if change is None:
            if fixed and tick.astimezone(z).fold:  # the second time this wall time happens
                at = _end_of_repeat(z, tick)
                continue
            return tick
        after = _offset(z, change)
        if after > offset:  # clocks go forward at ``change``: walls up to ``change + after`` skip
            if fixed and wall < _naive(change + after):
                return change
            at = change
        else:  # clocks go back: a fixed time skips the repeated walls
            at = change + (offset - after) if fixed else change
    raise _unevaluable(cron, timezone)


def latest_tick(cron: str, timezone: str, now: datetime) -> datetime:
    """The latest instant at or before ``now`` at which ``cron`` ticks in ``timezone`` (UTC)."""
    z, fixed = zone(timezone), is_fixed_time(cron)
    at = _whole(now)  # the search includes ``at``
    for _ in range(_STEPS):
        offset = _offset(z, at)
        wall = _match_until(cron, _wall(z, at))
        tick = _instant(wall, offset)
        change = _last_change(z, tick, at)
        if change is None:
            if fixed and tick.astimezone(z).fold:  # look for the first occurrence instead
                at = _start_of_repeat(z, tick) - SECOND
                continue
            return tick
        before = _offset(z, change - SECOND)
        if offset > before and fixed and wall >= _naive(change + before):
            return change  # ``wall`` was skipped when clocks went forward at ``change``
        at = change - SECOND
    raise _unevaluable(cron, timezone)


# -- wall-clock times ------------------------------------------------------------------------


def _match_from(cron: str, wall: datetime) -> datetime:
    """The first wall-clock time at or after ``wall`` that ``cron`` matches (naive)."""
    try:
        found: datetime = croniter(cron, wall - SECOND).get_next(datetime)
    except CroniterError as exc:
        raise _unreadable(cron, exc) from exc
    return found


def _match_until(cron: str, wall: datetime) -> datetime:
    """The last wall-clock time at or before ``wall`` that ``cron`` matches (naive)."""
    try:
        found: datetime = croniter(cron, wall + SECOND).get_prev(datetime)
    except CroniterError as exc:
        raise _unreadable(cron, exc) from exc
    return found


def _unreadable(cron: str, exc: CroniterError) -> InvalidInput:
    """For a stored expression that no longer passes :func:`check_cron`."""
    return InvalidInput(f"cron {cron!r} has no tick to find ({exc}): declare a valid one")


def _whole(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(microsecond=0)


def _naive(moment: datetime) -> datetime:
    """An instant's UTC fields read as a wall-clock time (for ``instant + offset``)."""
    return moment.replace(tzinfo=None)


def _wall(z: ZoneInfo, moment: datetime) -> datetime:
    return moment.astimezone(z).replace(tzinfo=None)


def _instant(wall: datetime, offset: timedelta) -> datetime:
    return (wall - offset).replace(tzinfo=UTC)


def _offset(z: ZoneInfo, moment: datetime) -> timedelta:
    offset = moment.astimezone(z).utcoffset()
    assert offset is not None  # a ZoneInfo always has one
    return offset


# -- offset changes --------------------------------------------------------------------------


def _next_change(z: ZoneInfo, start: datetime, end: datetime) -> datetime | None:
    """The first instant in ``(start, end]`` whose offset differs from ``start``'s."""
    base, low = _offset(z, start), start
    while low < end:
        high = min(low + _PROBE, end)
        if _offset(z, high) != base:
            return _pin(z, low, high)
        low = high
    return None


def _last_change(z: ZoneInfo, start: datetime, end: datetime) -> datetime | None:
    """The instant in ``(start, end]`` at which ``end``'s offset began, if it is there."""
    base, high = _offset(z, end), end
    while high > start:
        low = max(high - _PROBE, start)
        if _offset(z, low) != base:
            return _pin(z, low, high)
        high = low
    return None


def _pin(z: ZoneInfo, low: datetime, high: datetime) -> datetime:
    """The first second after ``low`` with ``high``'s offset (they differ)."""
    target = _offset(z, high)
    while high - low > SECOND:
        middle = low + timedelta(seconds=int((high - low).total_seconds()) // 2)
        if _offset(z, middle) == target:
            high = middle
        else:
            low = middle
    return high


def _start_of_repeat(z: ZoneInfo, tick: datetime) -> datetime:
    """The instant clocks went back to repeat ``tick``'s wall-clock time."""
    shift = _repeat_shift(z, tick)
    change = _last_change(z, tick - shift, tick)
    assert change is not None  # a repeated wall time lies within ``shift`` of its change
    return change


def _end_of_repeat(z: ZoneInfo, tick: datetime) -> datetime:
    """The first instant after the repeated wall-clock times that ``tick`` is one of."""
    return _start_of_repeat(z, tick) + _repeat_shift(z, tick)


def _repeat_shift(z: ZoneInfo, tick: datetime) -> timedelta:
    """How far clocks went back around ``tick``, a second occurrence of its wall time."""
    local = tick.astimezone(z)
    first = local.replace(fold=0).utcoffset()
    assert first is not None
    return first - _offset(z, tick)


def _unevaluable(cron: str, timezone: str) -> InvalidInput:
    return InvalidInput(
        f"cron {cron!r} in {timezone} has no tick near this time that can be worked out: "
        "check the expression and the time zone"
    )
