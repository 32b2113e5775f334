"""An outage while outcomes are recorded keeps every outcome for later; only a row the
database refuses for what is in it is recorded one by one with a fallback.

Recording one by one during an outage would record a fallback Failed for work that
succeeded as soon as the database answered again (so it ran twice), and leave the
rest to their leases. The outage here is real: another connection holds SQLite's
write lock; on PostgreSQL, a server that does not answer.
"""

from __future__ import annotations

import logging
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from mailfathom import AttemptOutcome, FakeClock, JobState, MailFathom, StoreError
from mailfathom.jobs.queue import Finished
from mailfathom.jobs.worker.outcomes import Outage
from mailfathom.jobs.worker.recorder import Claim, OutcomeRecorder
from mailfathom.jobs.worker.testsignal import WorkerSignals
from mailfathom.store.sqlite import SQLiteDatabase
from raw_database import raw_transaction

LEASE = timedelta(seconds=30)
OWNER = "outage-test"


def test_a_refused_row_is_told_from_an_outage(mf: MailFathom) -> None:
    job = mf.enqueue("k")
    with pytest.raises(StoreError) as refused, raw_transaction(mf) as cur:
        cur.execute(f"UPDATE mf_jobs SET state = 'Nonsense' WHERE id = {job.id}")  # no CHECK allows
    assert refused.value.refused
    assert mf.jobs.get(job.id).state is JobState.PENDING


def test_postgresql_out_of_reach_is_an_outage(tmp_path: Path) -> None:
    app = MailFathom("postgresql://postgres@127.0.0.1:1/none?connect_timeout=1")
    with pytest.raises(StoreError) as down:
        app.migrate()
    assert not down.value.refused
    app.close()


def test_an_outage_keeps_the_batch_and_records_no_fallback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "mf.db"
    with MailFathom(f"sqlite:///{path}", clock=FakeClock()) as mf:
        assert isinstance(mf.store.db, SQLiteDatabase)
        mf.store.db._busy_ms = 50  # before the first connection: the outage shows at once
        mf.migrate()
        recorder = OutcomeRecorder(
            mf.queue, OWNER, outage=Outage(OWNER, limit=0.05), signals=WorkerSignals().init()
        )
        mf.enqueue("k")
        claimed = recorder.record_and_claim(Claim(limit=1, lease=LEASE, queues=None, reap=True))
        assert claimed is not None
        (job,) = claimed
        recorder.unrecorded.add(Finished(job, AttemptOutcome.SUCCEEDED))
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # the write lock: every write now fails
        try:
            with caplog.at_level(logging.DEBUG, logger="mailfathom"):
                recorder.flush()
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert "one by one" not in caplog.text  # an outage, not a row to single out
        assert len(recorder.unrecorded) == 1  # kept, for the next flush
        assert mf.jobs.attempts(job.id) == []  # no fallback Failed was written
        recorder._outage.ok()  # the back-off is over: try again now
        recorder.flush()
        assert mf.jobs.get(job.id).state is JobState.SUCCEEDED
        assert [a.outcome for a in mf.jobs.attempts(job.id)] == [AttemptOutcome.SUCCEEDED]
