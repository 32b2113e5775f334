"""The hand-over: how the worker's slots are filled, freed and filled again.

Internal, mixed into :class:`~mailfathom.jobs.worker.worker.Worker` (a base class, so the
per-job calls cost what they cost as the worker's own methods: no extra layer). A
job claimed ahead (:class:`~mailfathom.jobs.worker.claim_ahead.ReadyJobs`) starts when a
slot is free: the loop starts what fits, and the thread whose attempt just ended
fills its own slot at once — a pool thread whose plain attempt ended takes the next
job in the same locked step and runs it itself (``_finished_next``). An attempt's
end keeps its outcome for the :class:`~mailfathom.jobs.worker.recorder.OutcomeRecorder`,
logs it and tells the observability hooks. Jobs claimed ahead that cannot start
soon (a long job holds the slot they waited for) or that never start (the worker
stops) go back to the queue, their attempt not spent; when the database refuses
that, they are kept and tried again.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from datetime import datetime

from mailfathom.clock import Clock
from mailfathom.errors import StoreError
from mailfathom.jobs.worker.claim_ahead import ReadyJobs
from mailfathom.jobs.worker.completer import Completer
from mailfathom.jobs.worker.execute import aborted
from mailfathom.jobs.model import Job
from mailfathom.jobs.worker.observed import Observed
from mailfathom.jobs.worker.outcomes import Outage, Unrecorded
from mailfathom.jobs.queue import Finished
from mailfathom.jobs.reasons import describe_error
from mailfathom.jobs.worker.runner import Runner, Running
from mailfathom.jobs.state import AttemptOutcome
from mailfathom.jobs.worker.testsignal import WorkerSignals
from mailfathom.observability.hooks import attempt_started, attempt_stopped
from mailfathom.observability.logs import log_fields
from mailfathom.store.base import Store

__all__ = ["HandOver"]

logger = logging.getLogger(__name__)


class HandOver:
    """The slots half of :class:`~mailfathom.jobs.worker.worker.Worker`: starting attempts,
    ending them, and handing a freed slot to the next job claimed ahead.

    Holds no state of its own: every attribute below is the worker's, set in its
    ``__init__`` (``_running``, ``_ready`` and ``_ran`` under ``_lock``).
    """

    id: str
    concurrency: int
    signals: WorkerSignals
    _store: Store
    _clock: Clock
    _lock: threading.Lock
    _starting: threading.Lock  # held by whoever starts jobs claimed ahead
    _wake: threading.Event
    _running: dict[int, Running]
    _ready: ReadyJobs
    _ran: int
    _stopping: bool
    _runner: Runner | None
    _outage: Outage
    _done: Unrecorded
    _completer: Completer | None

    # -- starting attempts -------------------------------------------------------------

    def _start_ready(self) -> None:
        """Start jobs claimed ahead while slots are free, oldest claim first (none once
        the worker is stopping: what it claimed ahead is given back).

        Called by the loop and by the thread whose attempt just ended (so a freed slot
        is filled at once, even while the loop waits for a claim); one caller at a
        time — another finds the work being done and leaves it (the loop is woken and
        looks again).
        """
        if not self._starting.acquire(blocking=False):
            return
        try:
            while True:
                with self._lock:
                    # checked here, under the lock, as well as by the callers: a caller
                    # may have looked just before the worker began stopping
                    if self._stopping or not self._ready:
                        return
                    if len(self._running) >= self.concurrency:
                        return
                    job = self._ready.next()
                self._begin(job)
        finally:
            self._starting.release()

    def _begin(self, job: Job) -> None:
        assert self._runner is not None
        try:
            running = self._runner.prepare(job)
        except Exception as exc:  # a bug of ours: the job fails, the loop goes on
            self._done.add(_not_started(job, exc, self._clock.now()))
            return
        with self._lock:
            self._running[job.id] = running
        self._launch(running)

    def _launch(self, running: Running) -> None:
        """Start an attempt already filed as running."""
        attempt_started(running)
        self.signals.started.signal(running.job)
        self._start_filed(running)

    def _start_filed(self, running: Running) -> None:
        """Hand an attempt filed as running (and announced) to the runner."""
        assert self._runner is not None
        job = running.job
        try:
            self._runner.start(running)
        except Exception as exc:
            with self._lock:
                started = self._running.pop(job.id, None) is running
            if started:  # not ended meanwhile: its outcome is this failure
                self._done.add(_not_started(job, exc, running.started_at))

    # -- ending attempts: the freed slot's hand-over -----------------------------------

    def _finished(self, running: Running, result: Finished | None) -> None:
        """Called by the runner, on any thread, when an attempt ends (None: it was stopped)."""
        self._ended(running, result)
        if self._ready and not self._stopping:
            self._start_ready()  # the freed slot takes the next job claimed ahead at once
        if not self._wake.is_set():  # setting it takes a lock: skip it when already set
            self._wake.set()

    def _finished_next(self, running: Running, result: Finished) -> Running | None:
        """Called by a pool thread whose plain attempt ended: as :meth:`_finished`, and
        the next job claimed ahead takes the freed slot in the same step (under the one
        lock: a slot for a slot, so the count never exceeds ``concurrency``, whatever
        else starts jobs meanwhile). A plain attempt is returned, filed as running, for
        this thread to run itself — no queue, no other thread woken; others start as
        usual."""
        following = self._ended(running, result, take=True)
        if following is not None:
            attempt_started(following)
            self.signals.started.signal(following.job)
            if following.mode != "thread" or following.span is not None:
                self._start_filed(following)
                following = None
        if self._ready and not self._stopping and len(self._running) < self.concurrency:
            self._start_ready()  # more slots free than this one (the loop re-checks too)
        if not self._wake.is_set():
            self._wake.set()
        return following

    def _ended(
        self, running: Running, result: Finished | None, *, take: bool = False
    ) -> Running | None:
        """An attempt ended: its outcome kept for recording (unless the job was given up),
        logged and observed. ``take``: the next job claimed ahead, if one may start, is
        filed as running in its place and returned (not started)."""
        following: Running | None = None
        if running.abort.reason is not None and not running.abandoned:
            result = aborted(running.job, running.abort.reason, running.started_at, result)
        if result is not None and not running.abandoned:
            # counted, its span ended and its line logged once the outcome is committed
            result = replace(result, observer=Observed(running, self.id, time.monotonic()))
        with self._lock:
            if self._running.get(running.job.id) is running:
                del self._running[running.job.id]
            if result is not None and not running.abandoned:
                self._done.add(result)
                if self._completer is not None:
                    self._completer.notify()
            if result is not None:
                self._ran += 1
                self._ready.ran(time.monotonic() - running.began)
            if take and self._ready and not self._stopping:
                following = self._take_next()
        job = running.job
        if result is None:
            attempt_stopped(running)
            logger.info(
                "job_id=%d kind=%s attempt=%d stopped: this worker gave the job up",
                job.id,
                job.kind,
                job.attempts,
                extra=log_fields(
                    "attempt_given_up", job_id=job.id, kind=job.kind, attempt=job.attempts
                ),
            )
        elif running.abandoned:
            self.signals.outcome_discarded.signal(job)
            logger.warning(
                "job_id=%d kind=%s attempt=%d ended (%s) after this worker released it: "
                "outcome discarded",
                job.id,
                job.kind,
                job.attempts,
                result.outcome.value,
                extra=log_fields(
                    "outcome_discarded",
                    job_id=job.id,
                    kind=job.kind,
                    attempt=job.attempts,
                    outcome=result.outcome.value,
                ),
            )
        return following

    def _take_next(self) -> Running | None:
        """Under ``_lock``: the oldest job claimed ahead, filed as running, when a slot is
        free (a job that cannot even be prepared gets that failure as its outcome)."""
        if len(self._running) >= self.concurrency:
            return None
        assert self._runner is not None
        job = self._ready.next()
        try:
            running = self._runner.prepare(job)
        except Exception as exc:  # a bug of ours: the job fails, the loop goes on
            self._done.add(_not_started(job, exc, self._clock.now()))
            return None
        self._running[job.id] = running
        return running

    # -- jobs claimed ahead that go back -----------------------------------------------

    def _take_ready(self) -> list[Job]:
        with self._lock:
            return self._ready.take_all()

    def _release_late(self, now: float) -> None:
        """Jobs claimed ahead that have not started by now go back to the queue."""
        if self._outage.blocked(now):  # kept meanwhile: started when a slot frees
            return
        with self._lock:
            late = self._ready.late(now)
        if late:
            self._release_unstarted(late, "a long job holds the slot it waited for")

    def _release_unstarted(self, jobs: list[Job], why: str) -> None:
        """Give back jobs claimed ahead that never started: Pending, no attempt spent.

        When the database fails they are kept, their leases renewed, until a later try
        (or, while running on, until a slot frees and they start).
        """
        if not jobs:
            return
        try:
            released = self._store.release_unstarted(
                owner=self.id,
                held=[(job.id, job.attempts) for job in jobs],
                now=self._clock.now(),
            )
        except StoreError as exc:
            with self._lock:
                self._ready.add(jobs, time.monotonic())
            self._outage.failed("releasing jobs claimed ahead", exc)
            return
        back = [job for job in jobs if job.id in released]
        logger.info(
            "worker=%s released %d job(s) claimed ahead that had not started (%s): %s",
            self.id,
            len(back),
            why,
            ", ".join(str(job.id) for job in back) or "-",
            extra=log_fields(
                "release_unstarted",
                worker=self.id,
                reason=why,
                job_ids=[job.id for job in back],
            ),
        )
        self.signals.released.signal(back)

    def _leave_ready(self) -> None:
        """The grace period ran out with the database still failing: what was claimed
        ahead stays with its lease, which the reaper returns (its attempt then counts)."""
        gone = self._take_ready()
        if gone:
            logger.error(
                "worker=%s leaving %d job(s) claimed ahead it could not give back (the "
                "database still fails): %s return when their leases expire",
                self.id,
                len(gone),
                ", ".join(str(job.id) for job in gone),
                extra=log_fields(
                    "left_claimed_ahead", worker=self.id, job_ids=[job.id for job in gone]
                ),
            )


def _not_started(job: Job, error: Exception, now: datetime) -> Finished:
    return Finished(
        job,
        AttemptOutcome.FAILED,
        error=error,
        message=f"the worker could not start it: {describe_error(error)}",
        started_at=now,
    )
