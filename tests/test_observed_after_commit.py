"""Metrics, spans and the ``outcome=…`` log line of an attempt come after its outcome is
committed, on every store: an outcome the database refused, one not recorded yet, or
one discarded because the lease had moved on is never counted or logged as done."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest
from prometheus_client import generate_latest

from mailfathom import AttemptOutcome, JobContext, JobState, MailFathom
from mailfathom.jobs.queue import Finished
from mailfathom.jobs.worker.outcomes import Outage
from mailfathom.jobs.worker.recorder import Claim, OutcomeRecorder
from mailfathom.jobs.worker.testsignal import WorkerSignals
from mailfathom.observability import metrics
from mailfathom.testing import claim
from raw_database import raw_transaction
from test_metrics import parse

LEASE = timedelta(seconds=30)


@pytest.fixture
def installed() -> Iterator[metrics.Metrics]:
    made = metrics.install()
    yield made
    metrics.uninstall()


class _Lines(logging.Handler):
    """Keeps the message of every record logged."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def lines() -> Iterator[_Lines]:
    handler = _Lines()
    root = logging.getLogger("mailfathom")
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield handler
    root.removeHandler(handler)
    root.setLevel(level)


def _refuse_successes_of(mf: MailFathom, kind: str) -> None:
    """The database refuses to record a success of ``kind`` (a trigger, like a full disk)."""
    with raw_transaction(mf) as cur:
        if mf.store.dialect == "sqlite":
            cur.execute(
                "CREATE TRIGGER refuse_success BEFORE UPDATE OF state ON mf_jobs "
                f"WHEN NEW.state = 'Succeeded' AND NEW.kind = '{kind}' "
                "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
            )
        else:
            cur.execute(
                "CREATE FUNCTION refuse_success() RETURNS trigger LANGUAGE plpgsql AS $$ "
                "BEGIN RAISE EXCEPTION 'refused by the test' USING ERRCODE = 'check_violation'; "
                "END $$"
            )
            cur.execute(
                "CREATE TRIGGER refuse_success BEFORE UPDATE OF state ON mf_jobs FOR EACH ROW "
                f"WHEN (NEW.state = 'Succeeded' AND NEW.kind = '{kind}') "
                "EXECUTE FUNCTION refuse_success()"
            )


def _attempts(made: metrics.Metrics, kind: str) -> dict[str, float]:
    samples = parse(generate_latest(made.registry).decode())
    return {
        dict(labels)["outcome"]: count
        for (name, labels), count in samples.items()
        if name == "mailfathom_job_attempts_total" and dict(labels)["kind"] == kind
    }


def test_a_success_the_database_refused_is_never_counted_nor_logged(
    mf: MailFathom, installed: metrics.Metrics, lines: _Lines
) -> None:
    """The handler returned, but the success could not be committed: the fallback outcome
    (Failed) is what the store holds, so it is what is counted and logged."""

    @mf.job("refused", max_attempts=1)
    def refused(ctx: JobContext) -> None:
        pass

    _refuse_successes_of(mf, "refused")
    job = mf.enqueue("refused")
    worker = mf.worker()
    worker.signals.init()
    assert worker.run(burst=True) == 1
    worker.signals.fallback_recorded.wait()
    assert mf.jobs.get(job.id).state is JobState.DEAD_LETTERED
    assert _attempts(installed, "refused") == {"Failed": 1.0}
    mine = [line for line in lines.lines if f"job_id={job.id} " in line]
    assert not [line for line in mine if "outcome=Succeeded" in line], mine
    assert len([line for line in mine if "outcome=Failed" in line]) == 1, mine


def test_an_outcome_is_observed_once_its_commit_is_done_and_a_discarded_one_as_nothing(
    mf: MailFathom,
) -> None:
    owner = "observer-test"
    recorder = OutcomeRecorder(
        mf.queue, owner, outage=Outage(owner, limit=0.5), signals=WorkerSignals().init()
    )
    mf.enqueue_many("k", [{}, {}])
    claimed = recorder.record_and_claim(Claim(limit=2, lease=LEASE, queues=None, reap=False))
    assert claimed is not None
    kept, lost = claimed
    seen: list[tuple[int, str | None, str | None]] = []
    committed = threading.Event()

    def observer(result: Finished, outcome: str | None, message: str | None) -> None:
        # called after the commit: the store already holds what it is told
        assert mf.jobs.get(result.job.id).state is not JobState.CLAIMED or outcome is None
        seen.append((result.job.id, outcome, message))
        committed.set()

    mf.store.claims.release_unstarted(owner=owner, held=[(lost.id, 1)], now=mf.clock.now())
    claim(mf, "another", 1, LEASE)  # the lease moved on: its outcome is discarded
    for job in (kept, lost):
        recorder.unrecorded.add(Finished(job, AttemptOutcome.SUCCEEDED, observer=observer))
    assert seen == []  # ended, not yet recorded: nothing told
    recorder.flush()
    assert committed.is_set()
    assert sorted(seen) == sorted([(kept.id, "Succeeded", None), (lost.id, None, None)])
    assert mf.jobs.get(kept.id).state is JobState.SUCCEEDED
