"""Recurring schedules: ticks on the fake clock, pause and resume, exactly once across workers."""

from __future__ import annotations

import itertools
import os
import signal
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mailfathom import (
    FakeClock,
    IllegalTransition,
    InvalidInput,
    JobContext,
    JobState,
    MailFathom,
    NotFound,
)
from mailfathom.jobs.schedules.schedules import latest_tick, next_tick, tick_key
from worker_processes import start_worker, wait_for

START = datetime(2030, 1, 1, 0, 0, 30, tzinfo=UTC)


@pytest.fixture
def app(mf: MailFathom, clock: FakeClock) -> MailFathom:
    """``mf`` at 00:00:30 with a ``report`` kind whose runs are recorded."""
    clock.set(START)
    mf.ran = []  # type: ignore[attr-defined]

    @mf.job("report", queue="reports")
    def report(ctx: JobContext, size: int) -> None:
        mf.ran.append((ctx.job.idempotency_key, size))  # type: ignore[attr-defined]

    return mf


def keys(mf: MailFathom) -> list[str]:
    return sorted(job.idempotency_key or "" for job in mf.jobs.list(kind="report"))


def test_each_tick_is_enqueued_once_and_only_after_the_declaration(
    app: MailFathom, clock: FakeClock
) -> None:
    app.schedule("minutely", cron="* * * * *", kind="report", payload={"size": 3})
    app.worker().run(burst=True)
    assert keys(app) == []  # 00:00:00 came before the schedule existed
    clock.set(START + timedelta(seconds=35))  # 00:01:05
    app.worker().run(burst=True)
    app.worker().run(burst=True)
    assert app.ran == [("schedule:minutely:2030-01-01T00:01:00Z", 3)]  # type: ignore[attr-defined]
    (job,) = app.jobs.list(kind="report")
    assert (job.queue, job.state, job.available_at) == (
        "reports",
        JobState.SUCCEEDED,
        datetime(2030, 1, 1, 0, 1, tzinfo=UTC),
    )
    stored = app.schedules.get("minutely")
    assert stored.last_tick == datetime(2030, 1, 1, 0, 1, tzinfo=UTC)
    assert stored.last_job_id == job.id


def test_after_downtime_only_the_latest_missed_tick_runs(app: MailFathom, clock: FakeClock) -> None:
    app.schedule("minutely", cron="* * * * *", kind="report", payload={"size": 1})
    app.schedules.sync()
    clock.advance(timedelta(minutes=10, seconds=5))  # ten ticks went by while all was down
    app.worker().run(burst=True)
    assert keys(app) == ["schedule:minutely:2030-01-01T00:10:00Z"]


def test_many_workers_enqueue_a_tick_once(
    app: MailFathom, database_url: str, clock: FakeClock
) -> None:
    others = [MailFathom(database_url, clock=clock) for _ in range(2)]
    try:
        for other in others:  # the same app, deployed three times
            other.job("report", queue="reports")(lambda ctx, size: None)
        for mf in [app, *others]:
            mf.schedule("minutely", cron="* * * * *", kind="report", payload={"size": 1})
        for mf in [app, *others]:
            mf.worker().run(burst=True)
        clock.advance(60)
        for mf in [app, *others]:
            mf.worker().run(burst=True)
        assert keys(app) == ["schedule:minutely:2030-01-01T00:01:00Z"]
        # The store itself refuses a tick that is not ahead of the last one.
        row = app.store.schedules.get_schedule("minutely")
        assert row is not None
        tick = datetime(2030, 1, 1, 0, 1, tzinfo=UTC)
        fired = app.store.schedules.fire_schedule(
            row, tick=tick, idempotency_key="x", max_attempts=1, now=clock.now()
        )
        assert fired is None
    finally:
        for mf in others:
            mf.close()


def test_pause_and_resume(app: MailFathom, clock: FakeClock) -> None:
    app.schedule("minutely", cron="* * * * *", kind="report", payload={"size": 1})
    app.schedules.sync()
    paused = app.schedules.pause("minutely", actor="ops", reason="migration")
    assert (paused.paused, paused.paused_by, paused.pause_reason) == (True, "ops", "migration")
    assert paused.paused_at == clock.now()
    with pytest.raises(IllegalTransition, match="already paused"):
        app.schedules.pause("minutely", actor="ops")
    clock.advance(60)
    app.worker().run(burst=True)
    assert keys(app) == []
    app.schedules.sync()  # a redeploy does not unpause it
    assert app.schedules.get("minutely").paused
    clock.advance(5)
    resumed = app.schedules.resume("minutely", actor="ops")
    assert not resumed.paused and resumed.paused_by is None
    app.worker().run(burst=True)
    assert keys(app) == []  # the tick missed while paused is skipped
    clock.advance(60)
    app.worker().run(burst=True)
    assert keys(app) == ["schedule:minutely:2030-01-01T00:02:00Z"]
    with pytest.raises(IllegalTransition, match="not paused"):
        app.schedules.resume("minutely", actor="ops")
    with pytest.raises(NotFound, match="no schedule is called 'nope'"):
        app.schedules.pause("nope", actor="ops")


def test_a_schedule_paused_after_a_worker_read_it_is_not_advanced(
    app: MailFathom, clock: FakeClock
) -> None:
    """A worker that read the schedule just before an operator paused it fires nothing:
    the store's own guard (not the worker's check of the row it read) refuses the tick,
    and the tick is still not taken after the resume."""
    app.schedule("minutely", cron="* * * * *", kind="report", payload={"size": 1})
    app.schedules.sync()
    clock.advance(60)
    stale = app.store.schedules.get_schedule("minutely")
    assert stale is not None and not stale["paused"]
    app.schedules.pause("minutely", actor="ops", reason="migration")
    tick = latest_tick(stale["cron"], stale["timezone"], clock.now())
    fired = app.store.schedules.fire_schedule(
        stale,
        tick=tick,
        idempotency_key=tick_key("minutely", tick),
        max_attempts=1,
        now=clock.now(),
    )
    assert fired is None
    assert keys(app) == []
    stored = app.schedules.get("minutely")
    assert stored.paused and stored.last_tick is None


def test_a_changed_definition_starts_afresh(
    app: MailFathom, database_url: str, clock: FakeClock
) -> None:
    app.schedule("daily", cron="0 0 * * *", kind="report", payload={"size": 1})
    assert app.schedules.sync() == ["daily"]
    assert app.schedules.sync() == []  # unchanged: nothing written
    clock.advance(timedelta(hours=1))
    with MailFathom(database_url, clock=clock) as redeployed:
        redeployed.schedule("daily", cron="30 0 * * *", kind="report", payload={"size": 2})
        assert redeployed.schedules.sync() == ["daily"]
        stored = redeployed.schedules.get("daily")
        assert (stored.cron, stored.payload, stored.not_before) == (
            "30 0 * * *",
            {"size": 2},
            clock.now(),
        )
        redeployed.worker().run(burst=True)  # 00:30 passed before the change: not run
        assert keys(app) == []
    clock.advance(timedelta(days=1))
    with MailFathom(database_url, clock=clock) as again:
        again.schedule("daily", cron="30 0 * * *", kind="report", payload={"size": 5})
        assert again.schedules.sync() == ["daily"]
        assert again.schedules.get("daily").not_before == START + timedelta(hours=1)
        again.worker().run(burst=True)  # a new payload keeps the time base: the tick runs
        assert keys(app) == ["schedule:daily:2030-01-02T00:30:00Z"]


def test_time_zones_and_keys() -> None:
    winter = datetime(2030, 1, 15, 12, tzinfo=UTC)
    summer = datetime(2030, 7, 15, 12, tzinfo=UTC)
    assert latest_tick("0 3 * * *", "Europe/Paris", winter) == datetime(2030, 1, 15, 2, tzinfo=UTC)
    assert latest_tick("0 3 * * *", "Europe/Paris", summer) == datetime(2030, 7, 15, 1, tzinfo=UTC)
    assert next_tick("0 3 * * *", "UTC", winter) == datetime(2030, 1, 16, 3, tzinfo=UTC)
    on_the_tick = datetime(2030, 1, 15, 3, tzinfo=UTC)
    assert latest_tick("0 3 * * *", "UTC", on_the_tick) == on_the_tick
    assert latest_tick("* * * * * */10", "UTC", datetime(2030, 1, 1, 0, 0, 19, 5, UTC)) == (
        datetime(2030, 1, 1, 0, 0, 10, tzinfo=UTC)
    )
    assert tick_key("n", on_the_tick) == "schedule:n:2030-01-15T03:00:00Z"


def test_bad_declarations_are_refused(app: MailFathom) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"cron": "61 * * * *"}, "not a valid cron expression"),
        ({"cron": ""}, "cron must be a cron expression"),
        ({"timezone": "Mars/Olympus"}, "not a known IANA time zone"),
        ({"kind": "bad kind"}, "job kind 'bad kind' is not usable"),
        ({"payload": {"when": datetime.now(UTC)}}, "payload is not JSON"),
        ({"queue": ""}, "queue '' is not usable"),
    ]
    for kwargs, message in cases:
        arguments: dict[str, Any] = {"cron": "* * * * *", "kind": "report", **kwargs}
        with pytest.raises(InvalidInput, match=message):
            app.schedule("s", **arguments)
    with pytest.raises(InvalidInput, match="schedule name"):
        app.schedule("a b", cron="* * * * *", kind="report")
    app.schedule("s", cron="* * * * *", kind="report")
    with pytest.raises(InvalidInput, match="declared twice"):
        app.schedule("s", cron="* * * * *", kind="report")
    assert [spec.name for spec in app.schedules.declared()] == ["s"]
    assert app.schedules.list() == []


def test_remove(app: MailFathom) -> None:
    app.schedule("s", cron="* * * * *", kind="report")
    app.schedules.sync()
    assert [s.name for s in app.schedules.list()] == ["s"]
    app.schedules.remove("s", actor="ops")
    assert app.schedules.list() == []
    with pytest.raises(NotFound):
        app.schedules.remove("s", actor="ops")


@pytest.fixture
def real_app(database_url: str) -> Iterator[MailFathom]:
    with MailFathom(database_url) as mf:
        mf.migrate()
        yield mf


@pytest.mark.slow
def test_three_worker_processes_enqueue_each_tick_once(
    real_app: MailFathom, database_url: str, tmp_path: Path
) -> None:
    tick_log, log = tmp_path / "ticks", tmp_path / "workers.log"
    env = {"MF_TEST_TICK_LOG": str(tick_log)}
    workers = [
        start_worker(database_url, log, "--app", "worker_app:scheduled", env=env) for _ in range(3)
    ]
    try:
        wait_for(lambda: len(real_app.workers.list()) == 3, 30, "three workers", log)
        wait_for(
            lambda: len(real_app.jobs.list(kind="test.tick", state=JobState.SUCCEEDED)) >= 4,
            30,
            "four ticks run",
            log,
        )
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        codes = [worker.wait(20) for worker in workers]
    assert codes == [0, 0, 0], log.read_text()
    jobs = real_app.jobs.list(kind="test.tick")
    ticks = sorted(
        datetime.strptime(job.idempotency_key or "", "schedule:every-second:%Y-%m-%dT%H:%M:%SZ")
        for job in jobs
    )
    assert len(ticks) >= 4
    assert [b - a for a, b in itertools.pairwise(ticks)] == [timedelta(seconds=1)] * (
        len(ticks) - 1
    ), "a tick was skipped"
    # A tick enqueued as the workers stopped may not have started: it waits, untouched.
    assert all(
        (job.state, job.attempts) in {(JobState.SUCCEEDED, 1), (JobState.PENDING, 0)}
        for job in jobs
    )
    ran = [job for job in jobs if job.state is JobState.SUCCEEDED]
    assert len(ran) >= 4
    # Each tick's job ran exactly once, under its own tick's key: the whole count compared.
    runs = Counter(tuple(line.split()) for line in tick_log.read_text().splitlines())
    assert runs == Counter({(str(job.id), job.idempotency_key or ""): 1 for job in ran}), (
        "a tick's job ran twice, or ran without being recorded"
    )
    claimed_by = {job.claimed_by for job in ran}
    assert all(w is not None and w.split(":")[1] != str(os.getpid()) for w in claimed_by)
