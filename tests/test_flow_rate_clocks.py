"""A rate holds exactly whatever the claimers' clocks say: its windows are judged on one
clock, the database's, on every store. Two claimers 5 s and 10 s apart (inside and at the
10 s skew the design tolerates) share a rate: the one ahead never lets more start by
judging the other's starts old, and the one behind is never held back past the window
by the other's starts looking new."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from mailfathom import MailFathom, SystemClock
from mailfathom.clock import FakeClock
from raw_database import raw_reading

LEASE = timedelta(seconds=30)
SKEWS = [timedelta(seconds=5), timedelta(seconds=10)]


def _claim(app: MailFathom, owner: str, now: datetime) -> int:
    """How many jobs one claim at the claimer's ``now`` takes."""
    rows = app.store.claims.claim(owner=owner, limit=10, now=now, lease_until=now + LEASE)
    return len(rows)


@pytest.mark.parametrize("skew", SKEWS, ids=["5s", "10s"])
def test_claimers_whose_clocks_disagree_share_one_window(
    mf: MailFathom, clock: FakeClock, skew: timedelta
) -> None:
    """``clock`` stands for the database's clock here (the app's store judges rate
    windows on it); each claim passes its claimer's own ``now``."""

    @mf.job("rated", rate="5/s")
    def rated(ctx: object) -> None: ...

    mf.limits.sync()
    mf.enqueue_many("rated", [{}] * 30)
    assert _claim(mf, "behind", clock.now()) == 5
    # ahead by `skew`, longer than the window: the five starts are still in it
    assert _claim(mf, "ahead", clock.now() + skew) == 0
    clock.advance(1)
    assert _claim(mf, "ahead", clock.now() + skew) == 5
    clock.advance(timedelta(seconds=1) - timedelta(milliseconds=1))
    assert _claim(mf, "behind", clock.now()) == 0  # still inside the window
    clock.advance(timedelta(milliseconds=1))
    # one window after the last starts: not held back by the skew
    assert _claim(mf, "behind", clock.now()) == 5
    with raw_reading(mf) as cur:
        cur.execute("SELECT count(*) AS n FROM mf_flow_starts")
        assert int(cur.fetchone()["n"]) == 5  # the earlier windows were trimmed


class _Shifted(SystemClock):
    """The real time, ``by`` ahead: a machine whose clock is off."""

    def __init__(self, by: timedelta) -> None:
        self.by = by

    def now(self) -> datetime:
        return super().now() + self.by


def _database_now(app: MailFathom) -> datetime:
    """The database's own clock, read apart from the code under test (SQLite's is the
    clock of the machine holding the file: this one)."""
    if app.store.dialect == "sqlite":
        return datetime.now(UTC)
    with raw_reading(app) as cur:
        cur.execute("SELECT clock_timestamp() AS now")
        moment: datetime = cur.fetchone()["now"]
    return moment.astimezone(UTC)


def _wait_past(app: MailFathom, moment: datetime) -> None:
    """Wait until the database's clock has passed ``moment``."""
    while (left := (moment - _database_now(app)).total_seconds()) >= 0:
        time.sleep(left + 0.01)


WINDOW = timedelta(seconds=2)


@pytest.mark.slow
@pytest.mark.parametrize("skew", SKEWS, ids=["5s", "10s"])
def test_apps_on_real_clocks_apart_judge_rates_on_the_databases_clock(
    database_url: str, skew: timedelta
) -> None:
    with (
        MailFathom(database_url) as behind,
        MailFathom(database_url, clock=_Shifted(skew)) as ahead,
    ):
        behind.migrate()
        behind.limit_kind("rated", rate="5/2s")
        behind.limits.sync()
        behind.enqueue_many("rated", [{}] * 30)
        began = _database_now(behind)
        assert _claim(behind, "behind", behind.clock.now()) == 5
        ahead_got = _claim(ahead, "ahead", ahead.clock.now())
        ended = _database_now(behind)
        assert ended - began < WINDOW, "two claims took a whole window: the machine stalled"
        assert ahead_got == 0  # five started less than a window ago, whatever its clock says
        _wait_past(behind, ended + WINDOW)
        assert _claim(ahead, "ahead", ahead.clock.now()) == 5
        _wait_past(behind, _database_now(behind) + WINDOW)
        # a window after the last starts on the database's clock: behind is not held back
        assert _claim(behind, "behind", behind.clock.now()) == 5
