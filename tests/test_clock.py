"""A clock must tell aware UTC time: naive or other-zone clocks are refused up front,
before the two stores could read the same value two ways."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from mailfathom import ConfigurationError, FakeClock, InvalidInput, MailFathom, SystemClock


class _Fixed:
    def __init__(self, moment: object) -> None:
        self.moment = moment

    def now(self) -> object:
        return self.moment


@pytest.mark.parametrize(
    ("moment", "why"),
    [
        (datetime(2030, 1, 1, 12, 0), "naive"),
        (datetime(2030, 1, 1, 12, 0, tzinfo=timezone(timedelta(hours=2))), "not UTC"),
        (datetime(2030, 7, 1, 12, 0, tzinfo=ZoneInfo("Europe/London")), "not UTC"),
        (datetime(2030, 1, 1, 12, 0, tzinfo=ZoneInfo("Europe/London")), "not UTC"),
        ("2030-01-01T12:00:00Z", "not a datetime"),
    ],
)
def test_a_clock_that_does_not_tell_aware_utc_time_is_refused(
    database_url: str, moment: object, why: str
) -> None:
    with pytest.raises(ConfigurationError, match=why) as refused:
        MailFathom(database_url, clock=_Fixed(moment))  # type: ignore[arg-type]
    assert "datetime.now(UTC)" in str(refused.value)


def test_a_clock_whose_now_raises_is_refused_with_the_reason(database_url: str) -> None:
    class Broken:
        def now(self) -> datetime:
            raise RuntimeError("no time source")

    with pytest.raises(ConfigurationError, match="no time source"):
        MailFathom(database_url, clock=Broken())


def test_utc_clocks_are_accepted(database_url: str) -> None:
    for clock in (
        SystemClock(),
        FakeClock(),
        _Fixed(datetime(2030, 1, 1, tzinfo=ZoneInfo("UTC"))),
        _Fixed(datetime(2030, 1, 1, tzinfo=timezone.utc)),  # noqa: UP017 - another UTC object
    ):
        with MailFathom(database_url, clock=clock) as app:  # type: ignore[arg-type]
            assert app.clock is clock


def test_a_fake_clock_refuses_naive_and_other_zone_instants() -> None:
    with pytest.raises(InvalidInput, match="naive"):
        FakeClock(datetime(2030, 1, 1))
    clock = FakeClock(datetime(2030, 1, 1, tzinfo=UTC))
    with pytest.raises(InvalidInput, match="naive"):
        clock.set(datetime(2031, 1, 1))
    assert clock.now() == datetime(2030, 1, 1, tzinfo=UTC)
    # an aware instant in another zone is the same instant, told in UTC
    clock.set(datetime(2030, 1, 1, 2, 0, tzinfo=timezone(timedelta(hours=2))))
    assert clock.now() == datetime(2030, 1, 1, tzinfo=UTC) and clock.now().tzinfo is UTC
