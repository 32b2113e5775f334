"""The completer: outcomes recorded on a thread of their own, beside the claims, on the
real stores (the worker uses it on PostgreSQL; it works on both)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from mailfathom import AttemptOutcome, JobContext, JobState, MailFathom, Snooze
from mailfathom.jobs.queue import Finished
from mailfathom.jobs.worker.completer import Completer
from mailfathom.jobs.worker.outcomes import Outage
from mailfathom.jobs.worker.recorder import Claim, OutcomeRecorder
from mailfathom.jobs.worker.testsignal import DEFAULT_WAIT, WorkerSignals

LEASE = timedelta(seconds=30)
OWNER = "completer-test"


def _recorder(mf: MailFathom) -> tuple[OutcomeRecorder, Outage]:
    outage = Outage(OWNER, limit=0.5)
    signals = WorkerSignals().init()
    return OutcomeRecorder(mf.queue, OWNER, outage=outage, signals=signals), outage


def test_outcomes_are_recorded_as_they_arrive_without_a_claim(mf: MailFathom) -> None:
    recorder, outage = _recorder(mf)
    mf.enqueue_many("k", [{} for _ in range(3)])
    jobs = recorder.record_and_claim(Claim(limit=3, lease=LEASE, queues=None, reap=False))
    assert jobs is not None and len(jobs) == 3
    woken: list[int] = []
    completer = Completer(
        recorder, outage, name="test-complete", on_recorded=lambda: woken.append(1)
    )
    completer.start()
    try:
        for job in jobs:
            recorder.unrecorded.add(
                Finished(job, AttemptOutcome.SUCCEEDED, started_at=job.claimed_at)
            )
            completer.notify()
        recorded = recorder._signals.batch_recorded.wait_for(
            lambda batch: any(pair[0] == jobs[-1].id for pair in batch.recorded)
        )
        assert not recorded.lost
        assert woken  # the worker's loop is told after each batch
        assert recorder.unrecorded.empty()
        assert {mf.jobs.get(job.id).state for job in jobs} == {JobState.SUCCEEDED}
    finally:
        completer.stop(wait=5)


def test_a_claim_without_carry_leaves_the_outcomes_to_the_completer(mf: MailFathom) -> None:
    recorder, _ = _recorder(mf)
    mf.enqueue_many("k", [{} for _ in range(2)])
    (first,) = recorder.record_and_claim(Claim(limit=1, lease=LEASE, queues=None, reap=False)) or []
    recorder.unrecorded.add(Finished(first, AttemptOutcome.SUCCEEDED, started_at=first.claimed_at))
    claimed = recorder.record_and_claim(
        Claim(limit=1, lease=LEASE, queues=None, reap=False), carry=False
    )
    assert claimed is not None and len(claimed) == 1
    assert len(recorder.unrecorded.waiting()) == 1  # still waiting, still leased
    assert mf.jobs.get(first.id).state is JobState.CLAIMED
    recorder.flush()
    assert mf.jobs.get(first.id).state is JobState.SUCCEEDED


def test_a_stopped_completer_records_nothing_more(mf: MailFathom) -> None:
    recorder, outage = _recorder(mf)
    mf.enqueue("k")
    (job,) = recorder.record_and_claim(Claim(limit=1, lease=LEASE, queues=None, reap=False)) or []
    completer = Completer(recorder, outage, name="test-complete", on_recorded=lambda: None)
    completer.start()
    completer.stop(wait=5)
    assert not completer._thread.is_alive()
    recorder.unrecorded.add(Finished(job, AttemptOutcome.SUCCEEDED, started_at=job.claimed_at))
    completer.notify()
    assert mf.jobs.get(job.id).state is JobState.CLAIMED  # what is left is the drain's
    recorder.drain(5.0, threading.Event())
    assert mf.jobs.get(job.id).state is JobState.SUCCEEDED


def test_a_burst_ends_only_after_the_outcomes_it_waited_for_are_recorded(
    mf: MailFathom, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burst stops at an empty claim only if nothing was running or unrecorded when it
    claimed: an outcome the completer commits meanwhile can make a job due again (a
    snooze, a retry due at once), and the burst must still run it. Forced here: the
    completer holds the snooze until the loop's claim came back empty, and that claim
    returns only once the snooze is committed."""

    @mf.job("nap")
    def nap(ctx: JobContext) -> None:
        if ctx.job.snoozes == 0:
            raise Snooze(0)

    job = mf.enqueue("nap")
    worker = mf.worker()
    worker.signals.init()
    store = mf.queue.store
    claim, record = store.claims.record_and_claim, store.claims.record_outcomes
    empty_claim = threading.Event()

    def claim_then_let_the_completer_finish(**kwargs: Any) -> Any:
        lost, rows = claim(**kwargs)
        if not rows and not empty_claim.is_set():
            empty_claim.set()  # the completer may write the snooze now ...
            worker.signals.batch_recorded.wait()  # ... and has, before the loop goes on
        return lost, rows

    def record_after_an_empty_claim(**kwargs: Any) -> Any:
        empty_claim.wait(DEFAULT_WAIT)
        return record(**kwargs)

    monkeypatch.setattr(store.claims, "record_and_claim", claim_then_let_the_completer_finish)
    monkeypatch.setattr(store.claims, "record_outcomes", record_after_an_empty_claim)
    assert worker.run(burst=True) == 2
    assert mf.jobs.get(job.id).state is JobState.SUCCEEDED
