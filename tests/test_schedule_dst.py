"""Schedules across daylight-saving changes, as cron runs them.

Vixie/ISC cron (``cron.c``) sorts jobs in two: a *fixed-time* job (no ``*`` at the
start of its minute or hour field, e.g. ``30 1 * * *``) runs once per wall-clock
time, so a repeated time runs at its first occurrence only and a skipped one runs
once, at the moment the clock jumps; a *wildcard* job (``0 * * * *``,
``*/15 * * * *``) runs at every wall-clock time that happens, so in a repeated
hour it runs again and in a skipped one it does not. Here a FakeClock steps
through each change of several zones (half-hour ones included) on both stores,
counting the ticks enqueued; and the tick arithmetic is checked against a
minute-by-minute model of the cron daemon.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, available_timezones

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from mailfathom import FakeClock, JobContext, MailFathom
from mailfathom.jobs.schedules.schedules import Scheduler, latest_tick, next_tick

MINUTE = timedelta(minutes=1)


@dataclass(frozen=True)
class Change:
    """One daylight-saving change in 2026, and what cron does with it."""

    zone: str
    day: date  # the local date of the change
    at: datetime  # the instant the offset changes (UTC)
    daily: str  # a wall-clock time in the repeated or skipped range, as "M H"
    hours: int  # how many o'clock times the local day has (`0 * * * *` ticks)
    quarters: int  # how many quarter-hour times it has (`*/15 * * * *` ticks)

    @property
    def fall_back(self) -> bool:
        z = ZoneInfo(self.zone)
        before, after = (
            (self.at - MINUTE).astimezone(z).utcoffset(),
            self.at.astimezone(z).utcoffset(),
        )
        assert before is not None and after is not None
        return after < before

    def __str__(self) -> str:
        return f"{self.zone}-{self.day}"


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


CHANGES = [
    # New York: 02:00 EST -> 03:00 EDT; 02:00 EDT -> 01:00 EST.
    Change("America/New_York", date(2026, 3, 8), utc(2026, 3, 8, 7), "30 2", 23, 92),
    Change("America/New_York", date(2026, 11, 1), utc(2026, 11, 1, 6), "30 1", 25, 100),
    # Paris: 02:00 CET -> 03:00 CEST; 03:00 CEST -> 02:00 CET.
    Change("Europe/Paris", date(2026, 3, 29), utc(2026, 3, 29, 1), "30 2", 23, 92),
    Change("Europe/Paris", date(2026, 10, 25), utc(2026, 10, 25, 1), "30 2", 25, 100),
    # Adelaide, +9:30 / +10:30: 03:00 -> 02:00 in April; 02:00 -> 03:00 in October.
    Change("Australia/Adelaide", date(2026, 4, 5), utc(2026, 4, 4, 16, 30), "30 2", 25, 100),
    Change("Australia/Adelaide", date(2026, 10, 4), utc(2026, 10, 3, 16, 30), "30 2", 23, 92),
    # Lord Howe moves by 30 minutes: 02:00 -> 01:30 in April; 02:00 -> 02:30 in October.
    # The repeated half hour has no o'clock time; the skipped one loses 02:00.
    Change("Australia/Lord_Howe", date(2026, 4, 5), utc(2026, 4, 4, 15), "45 1", 24, 98),
    Change("Australia/Lord_Howe", date(2026, 10, 4), utc(2026, 10, 3, 15, 30), "15 2", 23, 94),
]


def local_day(zone: str, day: date) -> tuple[datetime, datetime]:
    """The instants the local ``day`` starts and ends (UTC)."""
    z = ZoneInfo(zone)
    start = datetime(day.year, day.month, day.day, tzinfo=z)
    end = start.replace(tzinfo=None) + timedelta(days=1)
    return start.astimezone(UTC), end.replace(tzinfo=z).astimezone(UTC)


# -- a model of the cron daemon, one real minute at a time ------------------------------


def cron_daemon(cron: str, zone: str, start: datetime, end: datetime) -> list[datetime]:
    """The instants in ``[start, end)`` at which cron starts a ``cron`` job (minutes
    and hours only: the expressions here leave day, month and weekday at ``*``)."""
    fields = croniter(cron).expanded
    assert all(field == ["*"] for field in fields[2:5]), "the model reads minute and hour only"
    minutes = set(range(60)) if fields[0] == ["*"] else set(fields[0])
    hours = set(range(24)) if fields[1] == ["*"] else set(fields[1])
    minute_field, hour_field = cron.split()[:2]
    wildcard = minute_field.startswith("*") or hour_field.startswith("*")
    z = ZoneInfo(zone)

    def matches(wall: datetime) -> bool:
        return wall.minute in minutes and wall.hour in hours

    ticks: list[datetime] = []
    moment = start
    while moment < end:
        wall = moment.astimezone(z)
        if matches(wall) and (wildcard or wall.fold == 0):  # fixed: first occurrence only
            ticks.append(moment)
        previous = (moment - MINUTE).astimezone(z)
        jumped = wall.replace(tzinfo=None) - previous.replace(tzinfo=None)
        if not wildcard and jumped > MINUTE:  # the clock jumped: run the skipped times now
            skipped = previous.replace(tzinfo=None) + MINUTE
            while skipped < wall.replace(tzinfo=None):
                if matches(skipped) and ticks[-1:] != [moment]:
                    ticks.append(moment)
                skipped += MINUTE
        moment += MINUTE
    return ticks


# -- the tick arithmetic against the model --------------------------------------------

CRONS = ["0 * * * *", "*/15 * * * *", "30 * * * *", "*/10 1 * * *", "0,30 1,2 * * *", "0 0 * * *"]


@pytest.mark.parametrize("change", CHANGES, ids=str)
def test_ticks_match_the_cron_daemon(change: Change) -> None:
    start, end = local_day(change.zone, change.day)
    assert len(cron_daemon("0 * * * *", change.zone, start, end)) == change.hours
    assert len(cron_daemon("*/15 * * * *", change.zone, start, end)) == change.quarters
    crons = [f"{change.daily} * * *", *CRONS]
    for cron in crons:
        expected = cron_daemon(
            cron, change.zone, start - timedelta(days=1), end + timedelta(days=1)
        )
        probes = [
            start + timedelta(minutes=20 * i) for i in range(int((end - start) / MINUTE) // 20)
        ]
        probes += [t + timedelta(seconds=s) for t in expected for s in (-1, 0)]
        for probe in probes:
            if not start <= probe < end:
                continue
            last = max(t for t in expected if t <= probe)
            upcoming = min(t for t in expected if t > probe)
            assert latest_tick(cron, change.zone, probe) == last, (cron, probe)
            assert next_tick(cron, change.zone, probe) == upcoming, (cron, probe)


def test_the_headline_cases() -> None:
    """``30 1 * * *`` in New York: once at 01:30 EDT on the autumn day (not again at
    01:30 EST); ``30 2 * * *`` on the spring day: once, at 03:00 EDT."""
    ny = "America/New_York"
    assert latest_tick("30 1 * * *", ny, utc(2026, 11, 1, 7)) == utc(2026, 11, 1, 5, 30)
    assert next_tick("30 1 * * *", ny, utc(2026, 11, 1, 5, 30)) == utc(2026, 11, 2, 6, 30)
    assert latest_tick("30 2 * * *", ny, utc(2026, 3, 8, 7, 30)) == utc(2026, 3, 8, 7)
    assert next_tick("30 2 * * *", ny, utc(2026, 3, 8, 6)) == utc(2026, 3, 8, 7)
    assert next_tick("30 2 * * *", ny, utc(2026, 3, 8, 7)) == utc(2026, 3, 9, 6, 30)
    # Six fields (seconds last) follow the same rules.
    assert latest_tick("30 1 * * * 15", ny, utc(2026, 11, 1, 7)) == utc(
        2026, 11, 1, 5, 30
    ) + timedelta(seconds=15)
    # Kolkata has no daylight saving: nothing special.
    assert latest_tick("30 2 * * *", "Asia/Kolkata", utc(2026, 3, 8, 0)) == utc(2026, 3, 7, 21)


# -- the scheduler on both stores, the FakeClock stepping through the change -----------


def run_day(mf: MailFathom, clock: FakeClock, zone: str, day: date) -> dict[str, list[datetime]]:
    """Declare the schedules, step the clock a quarter of an hour at a time over the local
    ``day`` (and an hour either side), firing due ticks; return each one's ticks."""
    start, end = local_day(zone, day)
    clock.set(start - timedelta(hours=1, seconds=1))
    mf.schedules.sync()  # just before the first step, so that step's tick runs
    clock.advance(1)
    scheduler = Scheduler(mf.queue, clock)
    while clock.now() < end + timedelta(hours=1):
        scheduler.run_due()
        clock.advance(timedelta(minutes=15))
    ticks: dict[str, list[datetime]] = {}
    for job in mf.jobs.list(kind="tick", limit=1000):
        _, name, stamp = (job.idempotency_key or "").split(":", 2)
        tick = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        if start <= tick < end:
            ticks.setdefault(name, []).append(tick)
    return {name: sorted(found) for name, found in ticks.items()}


@pytest.fixture
def tick_app(mf: MailFathom) -> MailFathom:
    @mf.job("tick")
    def tick(ctx: JobContext) -> None:
        """Nothing: the test counts the enqueued jobs."""

    return mf


@pytest.mark.parametrize("change", CHANGES, ids=str)
def test_each_change_enqueues_what_cron_runs(
    tick_app: MailFathom, clock: FakeClock, change: Change
) -> None:
    zone = change.zone
    tick_app.schedule("daily", cron=f"{change.daily} * * *", kind="tick", timezone=zone)
    tick_app.schedule("hourly", cron="0 * * * *", kind="tick", timezone=zone)
    ticks = run_day(tick_app, clock, zone, change.day)
    minute, hour = (int(part) for part in change.daily.split())
    wall = datetime(change.day.year, change.day.month, change.day.day, hour, minute)
    if change.fall_back:  # the first of the two 01:30s, say
        once = wall.replace(tzinfo=ZoneInfo(zone), fold=0).astimezone(UTC)
        assert once < change.at
    else:  # the moment the clock jumps over it
        once = change.at
    assert ticks["daily"] == [once], "a daily job runs exactly once on the day of the change"
    assert len(ticks["hourly"]) == change.hours
    start, end = local_day(zone, change.day)
    assert ticks["hourly"] == cron_daemon("0 * * * *", zone, start, end)


def test_a_zone_without_daylight_saving(tick_app: MailFathom, clock: FakeClock) -> None:
    zone = "Asia/Kolkata"  # +5:30 all year
    tick_app.schedule("daily", cron="30 2 * * *", kind="tick", timezone=zone)
    tick_app.schedule("hourly", cron="0 * * * *", kind="tick", timezone=zone)
    ticks = run_day(tick_app, clock, zone, date(2026, 3, 8))
    assert ticks["daily"] == [utc(2026, 3, 7, 21)]
    assert len(ticks["hourly"]) == 24


ZONES = sorted(available_timezones())


@settings(max_examples=30, deadline=None)
@given(
    zone_name=st.sampled_from(ZONES),
    year=st.integers(1975, 2035),
    which=st.integers(0, 3),
    shift=st.integers(-12 * 3600, 12 * 3600),
    cron=st.sampled_from([*CRONS, "30 1 * * *", "30 2 * * *", "45 3 * * *", "0 0,12 * * *"]),
)
def test_any_zone_any_year_matches_the_cron_daemon(
    zone_name: str, year: int, which: int, shift: int, cron: str
) -> None:
    """Around a random offset change of a random zone (or any instant of a zone without)."""
    changes = offset_changes(zone_name, year)
    middle = changes[which % len(changes)] if changes else utc(year, 6, 1)
    probe = middle + timedelta(seconds=shift)
    expected = cron_daemon(cron, zone_name, middle - timedelta(days=2), middle + timedelta(days=2))
    assert latest_tick(cron, zone_name, probe) == max(t for t in expected if t <= probe)
    assert next_tick(cron, zone_name, probe) == min(t for t in expected if t > probe)


def offset_changes(zone_name: str, year: int) -> list[datetime]:
    """The instants ``zone_name`` changed its UTC offset in ``year`` (to the minute)."""
    z = ZoneInfo(zone_name)
    found, moment = [], utc(year, 1, 1)
    offset = moment.astimezone(z).utcoffset()
    while moment.year == year:
        step = moment + timedelta(hours=6)
        if step.astimezone(z).utcoffset() != offset:
            while step.astimezone(z).utcoffset() != offset:
                step -= MINUTE
            found.append(step + MINUTE)
            offset = (step + MINUTE).astimezone(z).utcoffset()
        moment = moment + timedelta(hours=6)
    return found
