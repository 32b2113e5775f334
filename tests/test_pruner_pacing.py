"""The pruner gives way to claimers: small short batches, a busy and an idle duty cycle,
commits that do not wait for their flush, and SQLite's freed pages handed back a real
step at a time. Both stores, the fake clock."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from mailfathom import FakeClock, JobContext, MailFathom
from mailfathom.jobs.pruner import WORKER_DUTY, WORKER_IDLE_DUTY, Pruner

DAY = 86400.0


def _ok(mf: MailFathom) -> None:
    @mf.job("t.ok")
    def ok(ctx: JobContext, pad: str = "") -> None:
        pass


def test_the_busy_duty_holds_while_a_due_job_waits(mf: MailFathom, clock: FakeClock) -> None:
    _ok(mf)
    pruner = mf.pruner(duty=WORKER_DUTY, idle_duty=WORKER_IDLE_DUTY)
    assert pruner.duty_now() == WORKER_IDLE_DUTY  # nothing to claim: catch up
    later = mf.enqueue("t.ok", {}, delay=60)
    assert pruner.duty_now() == WORKER_IDLE_DUTY  # not due yet
    clock.advance(61)
    assert pruner.duty_now() == WORKER_DUTY  # the claimers have work: they come first
    mf.queues.pause("default", actor="ops")
    assert pruner.duty_now() == WORKER_IDLE_DUTY  # nobody may claim it
    mf.queues.resume("default", actor="ops")
    mf.jobs.hold(later.id, actor="ops")
    assert pruner.duty_now() == WORKER_IDLE_DUTY  # held: not due
    assert mf.pruner(duty=0.3).duty_now() == 0.3  # one duty all along


def test_a_worker_prunes_with_the_busy_and_idle_duties(mf: MailFathom) -> None:
    pruner = mf.worker().pruner
    assert pruner is not None
    assert (pruner.pruner.duty, pruner.pruner.idle_duty) == (WORKER_DUTY, WORKER_IDLE_DUTY)
    assert pruner.pruner.batch_size == mf.settings.prune_batch == 10


def test_duties_are_validated(mf: MailFathom) -> None:
    with pytest.raises(ValueError, match="idle_duty must be in"):
        mf.pruner(duty=0.5, idle_duty=0)
    with pytest.raises(ValueError, match="duty must be in"):
        Pruner(mf.retention, mf.clock, mf.pruner().policy, duty=1.5)


def test_a_pass_puts_the_connection_back_as_it_was(mf: MailFathom, clock: FakeClock) -> None:
    """The batches commit without their own flush; everything else stays durable."""
    _ok(mf)
    mf.enqueue_many("t.ok", [{} for _ in range(5)], idempotency_keys=[f"k{n}" for n in range(5)])
    mf.worker().run(burst=True)
    clock.advance(8 * DAY)
    pruner = mf.pruner()
    pruner.batch_size = 2
    assert pruner.run().total == 5
    # the app's own connection (a new one would start at FULL whatever the pass did)
    with mf.store.db.reading() as cur:
        if mf.store.dialect == "sqlite":
            assert cur.execute("PRAGMA synchronous").fetchall()[0][0] == 2  # FULL
            assert cur.execute("PRAGMA foreign_keys").fetchall()[0][0] == 1
        else:
            cur.execute("SHOW synchronous_commit")
            assert cur.fetchone()["synchronous_commit"] == "on"
    by_key = {job.idempotency_key: job for job in mf.jobs.list()}
    assert len(by_key) == 5 and all(job.compacted for job in by_key.values())
    again = mf.enqueue("t.ok", {}, idempotency_key="k3")  # the repack kept ids and keys
    assert not again.created and again.id == by_key["k3"].id


def test_a_reclaim_step_frees_that_many_pages(tmp_path: Any, clock: FakeClock) -> None:
    path = tmp_path / "steps.db"
    with MailFathom(f"sqlite:///{path}", clock=clock) as mf:
        mf.migrate()
        _ok(mf)
        for start in range(0, 200, 50):
            mf.enqueue_many("t.ok", [{"pad": "x" * 8000} for _ in range(start, start + 50)])
        mf.worker().run(burst=True)
        clock.advance(8 * DAY)
        pages = mf.retention
        free_before = pages.reclaim(0)
        # compact without the pass's own reclaim, then hand back exactly 40 pages
        pruner = mf.pruner()
        pruner._reclaim = lambda cancel=None: 0  # type: ignore[method-assign]
        assert pruner.run().total == 200
        free = pages.reclaim(0)
        assert free > free_before + 100
        assert pages.reclaim(40) == free
        assert pages.reclaim(0) == free - 40
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
