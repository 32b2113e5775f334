"""Migration 0002: the worker registry and schedules, the same on both dialects."""

from __future__ import annotations

import pytest

from mailfathom import FakeClock, MailFathom, StoreError
from mailfathom.store.base import WorkerRegistration
from raw_database import raw_transaction

COLUMNS = {
    "mf_workers": [
        "id",
        "host",
        "pid",
        "queues",
        "kinds",
        "concurrency",
        "lease_seconds",
        "started_at",
        "last_heartbeat_at",
    ],
    "mf_schedules": [
        "name",
        "cron",
        "timezone",
        "kind",
        "queue",
        "payload",
        "paused",
        "paused_by",
        "paused_at",
        "pause_reason",
        "not_before",
        "last_tick",
        "last_job_id",
        "created_at",
        "updated_at",
    ],
}


def test_both_dialects_have_the_same_columns(mf: MailFathom, clock: FakeClock) -> None:
    mf.schedule("s", cron="* * * * *", kind="k")
    mf.schedules.sync()
    mf.store.workers.heartbeat(_registration(clock), now=clock.now())
    (worker,) = mf.store.workers.list_workers()  # SELECT *: every column, in table order
    (schedule,) = mf.store.schedules.list_schedules()
    assert {"mf_workers": list(worker), "mf_schedules": list(schedule)} == COLUMNS


def _registration(clock: FakeClock) -> WorkerRegistration:
    return WorkerRegistration("w", "h", 1, None, (), 1, 30.0, clock.now())


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE mf_schedules SET paused_by = 'ops', paused_at = created_at",  # not paused
        "UPDATE mf_schedules SET paused = NOT paused",  # paused, by nobody
        "UPDATE mf_schedules SET payload = '[1]'",  # not an object
        "UPDATE mf_schedules SET cron = ''",
        "UPDATE mf_workers SET concurrency = 0",
        "UPDATE mf_workers SET kinds = '{}'",  # not an array
        "UPDATE mf_workers SET last_heartbeat_at = '2000-01-01T00:00:00.000000+00:00'",
    ],
)
def test_check_constraints_refuse_impossible_rows(
    mf: MailFathom, clock: FakeClock, sql: str
) -> None:
    mf.schedule("s", cron="* * * * *", kind="k")
    mf.schedules.sync()
    mf.store.workers.heartbeat(_registration(clock), now=clock.now())
    with pytest.raises(StoreError), raw_transaction(mf) as cur:
        cur.execute(sql)
    assert [w.id for w in mf.workers.list()] == ["w"]
    assert mf.schedules.get("s").cron == "* * * * *"
