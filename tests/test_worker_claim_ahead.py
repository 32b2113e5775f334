"""Jobs claimed ahead of the free slots never wait behind a long job, and a stopping
worker hands back the ones it never started without spending their attempt."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mailfathom import JobContext, JobState, MailFathom
from mailfathom.jobs.model import Job
from mailfathom.jobs.worker import claim_ahead
from mailfathom.jobs.worker.worker import Worker
from mailfathom.store.sqlite import SQLiteDatabase

WARM = 40  # short jobs run first, so the worker knows its jobs are short and claims ahead


@contextmanager
def running(worker: Worker) -> Iterator[None]:
    """Run ``worker`` on a thread for the ``with`` block; stop it and wait at the end."""
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        yield
    finally:
        worker.stop()
        thread.join(30)
        assert not thread.is_alive(), "the worker did not stop"


def _long_among_short(app: MailFathom, gate: threading.Event, shorts: int) -> tuple[int, set[int]]:
    """Register the kinds, enqueue WARM short jobs, one long one, then ``shorts`` short
    ones with one attempt each; returns the long job's id and the short ones'."""

    @app.job("short", max_attempts=1)
    def short(ctx: JobContext) -> None:
        pass

    @app.job("long")
    def long(ctx: JobContext) -> None:
        assert gate.wait(30)

    app.enqueue_many("short", [{} for _ in range(WARM)], priority=2)
    long_job = app.enqueue("long", priority=1)
    behind = app.enqueue_many("short", [{} for _ in range(shorts)], priority=0)
    return long_job.id, {job.id for job in behind}


def _claimed_ahead(worker: Worker, long_id: int, behind: set[int]) -> None:
    """Wait until the long job runs with some of ``behind`` claimed ahead of it."""
    worker.signals.started.wait_for(lambda job: job.id == long_id)

    def holds_some(jobs: list[Job]) -> bool:
        return bool({job.id for job in jobs} & behind)

    worker.signals.claimed.wait_for(holds_some)


def test_jobs_claimed_ahead_behind_a_long_job_go_to_an_idle_worker(database_url: str) -> None:
    gate = threading.Event()
    with MailFathom(database_url) as busy_app, MailFathom(database_url) as idle_app:
        busy_app.migrate()
        long_id, behind = _long_among_short(busy_app, gate, 10)
        done: list[int] = []
        all_done = threading.Event()

        @idle_app.job("short", max_attempts=1)
        def short(ctx: JobContext) -> None:
            done.append(ctx.job_id)
            if set(done) >= behind:
                all_done.set()

        busy = busy_app.worker(concurrency=1)
        busy.signals.init()
        idle = idle_app.worker(concurrency=4, poll_interval=0.05)
        try:
            with running(busy):
                _claimed_ahead(busy, long_id, behind)
                with running(idle):
                    # Without the release these wait for the long job, which waits for them.
                    assert all_done.wait(20), "the short jobs waited behind the long job"
                    gate.set()
                # On a loaded machine warm-up jobs may go late and be released too: wait
                # for the release of jobs claimed behind the long one.
                released = busy.signals.released.wait_for(
                    lambda jobs: bool({job.id for job in jobs} & behind)
                )
        finally:
            gate.set()
        assert {job.id for job in released} & behind
        for job_id in behind:
            job = busy_app.jobs.get(job_id)
            assert job.state is JobState.SUCCEEDED and job.claimed_by == idle.id
            assert job.attempts == 1  # the released claim did not count
            (attempt,) = busy_app.jobs.attempts(job_id)
            assert (attempt.attempt, attempt.worker) == (1, idle.id)
        assert busy_app.jobs.get(long_id).state is JobState.SUCCEEDED


def test_a_stopping_worker_releases_what_it_claimed_ahead_without_spending_it(
    mf: MailFathom, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One attempt each: recording anything for them would dead-letter jobs never run."""
    monkeypatch.setattr(claim_ahead, "LATE_AFTER", 3600.0)  # only the stop releases them
    gate = threading.Event()
    long_id, behind = _long_among_short(mf, gate, 10)
    worker = mf.worker(concurrency=1, shutdown_timeout=30)
    worker.signals.init()
    try:
        with running(worker):
            _claimed_ahead(worker, long_id, behind)
            worker.stop()
            gate.set()  # the running job ends within the grace period
            worker.signals.stopped.wait()
    finally:
        gate.set()
    assert mf.jobs.get(long_id).state is JobState.SUCCEEDED
    counts = mf.jobs.counts()
    assert counts[JobState.CLAIMED] == 0 and counts[JobState.DEAD_LETTERED] == 0
    released = worker.signals.released.wait()
    assert released and {job.id for job in released} <= behind
    for job in released:
        back = mf.jobs.get(job.id)
        assert back.state is JobState.PENDING and back.lease_owner is None
        assert back.attempts == 0 and mf.jobs.attempts(job.id) == []  # nothing recorded


class _Seen(logging.Handler):
    """Sets ``event`` when a log record's message contains ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.event = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


def test_a_release_refused_by_an_outage_at_stop_is_tried_again_not_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write lock is held by another connection when the worker stops: the jobs it
    claimed ahead stay in hand (their leases renewed) and go back unspent once the
    database answers, within the grace period — not left to their leases."""
    monkeypatch.setattr(claim_ahead, "LATE_AFTER", 3600.0)  # only the stop releases them
    path = tmp_path / "mf.db"
    with MailFathom(f"sqlite:///{path}") as mf:
        assert isinstance(mf.store.db, SQLiteDatabase)
        mf.store.db._busy_ms = 50  # before the first connection: the lock shows at once
        mf.migrate()
        gate = threading.Event()
        long_id, behind = _long_among_short(mf, gate, 10)
        worker = mf.worker(concurrency=1, shutdown_timeout=30, lease=5)
        worker.signals.init()
        seen = _Seen("releasing jobs claimed ahead")
        logging.getLogger("mailfathom.jobs").addHandler(seen)
        try:
            with running(worker):
                _claimed_ahead(worker, long_id, behind)
                holder = sqlite3.connect(path, isolation_level=None)
                holder.execute("BEGIN IMMEDIATE")  # every write fails meanwhile
                try:
                    worker.stop()
                    assert seen.event.wait(10), "the release was never tried"
                finally:
                    holder.execute("ROLLBACK")
                    holder.close()
                gate.set()
                worker.signals.stopped.wait()
        finally:
            gate.set()
            logging.getLogger("mailfathom.jobs").removeHandler(seen)
        counts = mf.jobs.counts()
        assert counts[JobState.CLAIMED] == 0 and counts[JobState.DEAD_LETTERED] == 0
        released = worker.signals.released.wait()
        assert released and {job.id for job in released} <= behind
        for job in released:
            back = mf.jobs.get(job.id)
            assert back.state is JobState.PENDING and back.attempts == 0
