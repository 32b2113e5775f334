"""The executor: runs attempts in the worker's slots and hands a freed slot on at once.

Internal, one of the worker's three parts (with the
:class:`~mailfathom.jobs.worker.producer.Producer` that claims and the
:class:`~mailfathom.jobs.worker.completer.Completer` that records outcomes). It owns
the slots: the attempts running (``concurrency`` at most) and the jobs claimed ahead
(:class:`~mailfathom.jobs.worker.claim_ahead.ReadyJobs`) that wait for one, both
under one lock. A job claimed ahead starts when a slot is free: the producer's loop
starts what fits, and the thread whose attempt just ended fills its own slot at once
— a pool thread whose plain attempt ended takes the next job in the same locked step
and runs it itself (:meth:`Executor._finished_next`). An attempt's end hands its
outcome to the completer, logs it and tells the observability hooks. The heartbeat's
findings (leases lost, aborts asked) and the end of the grace period at shutdown stop
what runs here.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from mailfathom.clock import Clock
from mailfathom.jobs.model import Job
from mailfathom.jobs.queue import Finished
from mailfathom.jobs.reasons import describe_error
from mailfathom.jobs.registry import Registry
from mailfathom.jobs.state import AttemptOutcome
from mailfathom.jobs.worker.aborts import flag_aborted, stop_aborted
from mailfathom.jobs.worker.claim_ahead import ReadyJobs
from mailfathom.jobs.worker.execute import aborted, shutdown_timed_out
from mailfathom.jobs.worker.interruptions import (
    mark_lost,
    mark_overruns,
    report_overruns,
    stop_lost,
)
from mailfathom.jobs.worker.observed import Observed, observed
from mailfathom.jobs.worker.runner import Runner, Running
from mailfathom.jobs.worker.testsignal import WorkerSignals
from mailfathom.observability.hooks import attempt_started, attempt_stopped
from mailfathom.observability.logs import log_fields

__all__ = ["Executor"]

logger = logging.getLogger(__name__)


class Executor:
    """Runs the attempts of worker ``worker_id`` in ``concurrency`` slots.

    Gives: :meth:`accept` (jobs just claimed), the counts and leases the producer and
    the heartbeat need, and the stops (:meth:`lost`, :meth:`abort`,
    :meth:`release_running`). Needs: the ``ready`` queue it shares with the claim
    pacer, ``add_outcome`` (the completer's: called under this executor's lock, so
    cheap and never blocking), and ``wake`` (the worker's loop, set when a slot frees).
    """

    def __init__(
        self,
        *,
        worker_id: str,
        concurrency: int,
        clock: Clock,
        ready: ReadyJobs,
        add_outcome: Callable[[Finished], None],
        wake: threading.Event,
        signals: WorkerSignals,
    ) -> None:
        self._worker_id = worker_id
        self._concurrency = concurrency
        self._clock = clock
        self._ready = ready  # claimed ahead, not started (under _lock)
        self._add_outcome = add_outcome
        self._wake = wake
        self._signals = signals
        self._lock = threading.Lock()
        self._starting = threading.Lock()  # held by whoever starts jobs claimed ahead
        self._running: dict[int, Running] = {}  # under _lock
        self._runner: Runner | None = None
        #: Attempts run to an end (under the lock).
        self.ran = 0
        #: Set once by the worker when it stops: nothing more starts here.
        self.stopping = False

    # -- opening and closing -----------------------------------------------------------

    def open(self, registry: Registry) -> None:
        """Make the runner (thread pool, event loop, child processes) the slots run on."""
        self._runner = Runner(
            registry,
            self._clock,
            size=self._concurrency,
            worker_id=self._worker_id,
            on_done=self._finished,
            on_done_next=self._finished_next,
        )

    def kill_children(self) -> None:
        """Kill the child processes of isolated attempts (the worker leaves)."""
        if self._runner is not None:
            self._runner.kill_children()

    def close(self, wait: float) -> None:
        """Shut the runner down, waiting up to ``wait`` seconds for its threads."""
        if self._runner is not None:
            self._runner.close(wait=wait)

    # -- what the producer and the heartbeat ask ---------------------------------------

    def accept(self, jobs: list[Job], now: float) -> None:
        """Jobs just claimed (at ``now``): they wait for a slot, and start while one is free."""
        with self._lock:
            self._ready.add(jobs, now)
        self.start_ready()

    def counts(self) -> tuple[int, int]:
        """How many attempts run and how many jobs claimed ahead wait."""
        with self._lock:
            return len(self._running), len(self._ready)

    def idle(self) -> bool:
        """Nothing runs and nothing waits for a slot."""
        with self._lock:
            return not self._running and not self._ready

    def queues_taken(self) -> list[str]:
        """The queue of every job running or claimed ahead (one entry per job)."""
        with self._lock:
            taken = [r.job.queue for r in self._running.values()]
            taken.extend(job.queue for job in self._ready)
        return taken

    def held(self) -> list[Job]:
        """The jobs here whose leases must be renewed (running, or claimed ahead)."""
        with self._lock:
            running = [r.job for r in self._running.values() if not r.lost and not r.abandoned]
            running.extend(self._ready)
        return running

    def wake_by(self, *, late: bool) -> list[float]:
        """Instants the loop must look again: a plain attempt's deadline, and (``late``)
        when the oldest job claimed ahead goes late."""
        with self._lock:
            instants = [
                r.deadline
                for r in self._running.values()
                if r.mode == "thread" and r.deadline is not None and not r.overran
            ]
            late_at = self._ready.late_at() if late else None
        if late_at is not None:
            instants.append(late_at)
        return instants

    def late(self, now: float) -> list[Job]:
        """Take the jobs claimed ahead that have not started by ``now`` (they go back)."""
        with self._lock:
            return self._ready.late(now)

    def take_ready(self) -> list[Job]:
        """Take every job claimed ahead and not started."""
        with self._lock:
            return self._ready.take_all()

    def put_back(self, jobs: list[Job], now: float) -> None:
        """Jobs that could not be given back wait here again (claimed at ``now``)."""
        with self._lock:
            self._ready.add(jobs, now)

    # -- starting attempts -------------------------------------------------------------

    def start_ready(self) -> None:
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
                    if self.stopping or not self._ready:
                        return
                    if len(self._running) >= self._concurrency:
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
            self._add_outcome(_not_started(job, exc, self._clock.now()))
            return
        with self._lock:
            self._running[job.id] = running
        self._launch(running)

    def _launch(self, running: Running) -> None:
        """Start an attempt already filed as running."""
        attempt_started(running)
        self._signals.started.signal(running.job)
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
                self._add_outcome(_not_started(job, exc, running.started_at))

    # -- ending attempts: the freed slot's hand-over -----------------------------------

    def _finished(self, running: Running, result: Finished | None) -> None:
        """Called by the runner, on any thread, when an attempt ends (None: it was stopped)."""
        self._ended(running, result)
        if self._ready and not self.stopping:
            self.start_ready()  # the freed slot takes the next job claimed ahead at once
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
            self._signals.started.signal(following.job)
            if following.mode != "thread" or following.span is not None:
                self._start_filed(following)
                following = None
        if self._ready and not self.stopping and len(self._running) < self._concurrency:
            self.start_ready()  # more slots free than this one (the loop re-checks too)
        if not self._wake.is_set():
            self._wake.set()
        return following

    def _ended(
        self, running: Running, result: Finished | None, *, take: bool = False
    ) -> Running | None:
        """An attempt ended: its outcome handed to the completer (unless the job was given
        up), logged and observed. ``take``: the next job claimed ahead, if one may start,
        is filed as running in its place and returned (not started)."""
        following: Running | None = None
        if running.abort.reason is not None and not running.abandoned:
            result = aborted(running.job, running.abort.reason, running.started_at, result)
        if result is not None and not running.abandoned:
            # counted, its span ended and its line logged once the outcome is committed
            result = observed(result, running, self._worker_id, time.monotonic())
        with self._lock:
            if self._running.get(running.job.id) is running:
                del self._running[running.job.id]
            if result is not None and not running.abandoned:
                self._add_outcome(result)
            if result is not None:
                self.ran += 1
                self._ready.ran(time.monotonic() - running.began)
            if take and self._ready and not self.stopping:
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
            self._signals.outcome_discarded.signal(job)
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
        if len(self._running) >= self._concurrency:
            return None
        assert self._runner is not None
        job = self._ready.next()
        try:
            running = self._runner.prepare(job)
        except Exception as exc:  # a bug of ours: the job fails, the loop goes on
            self._add_outcome(_not_started(job, exc, self._clock.now()))
            return None
        self._running[job.id] = running
        return running

    # -- stopping what runs ------------------------------------------------------------

    def lost(self, lost: set[tuple[int, int]]) -> None:
        """The heartbeat found these leases gone: stop what can be stopped."""
        self._signals.lease_lost.signal(lost)
        with self._lock:
            victims, gone = mark_lost(self._running.values(), self._ready, lost)
        stop_lost(victims, gone)

    def abort(self, aborts: dict[int, str]) -> None:
        """Operators asked to abort these jobs (the heartbeat learnt it): see ``aborts``."""
        with self._lock:
            victims, unstarted = flag_aborted(self._running.values(), self._ready, aborts)
        for job in unstarted:  # claimed ahead, never started: Aborted without running
            self._add_outcome(aborted(job, aborts[job.id], self._clock.now(), None))
        stop_aborted(victims, unstarted, aborts, self._signals)
        if unstarted:
            self._wake.set()

    def warn_overruns(self, now: float) -> None:
        """Log the plain attempts that ran past their timeout (once each)."""
        with self._lock:
            late = mark_overruns(self._running.values(), now)
        report_overruns(late)

    def release_running(self, shutdown_timeout: float) -> None:
        """The grace period is over: record ShutdownTimeout for what runs and release it."""
        with self._lock:
            victims = list(self._running.values())
            self._running.clear()
            for running in victims:
                running.abandoned = True
                how = {
                    "thread": "its thread cannot be stopped and ends with the process",
                    "async": "its coroutine was cancelled",
                    "process": "its process was killed",
                    "none": "it had not started",
                }[running.mode]
                timed_out = shutdown_timed_out(
                    running.job, running.started_at, shutdown_timeout, how
                )
                # counted and its span ended once the ShutdownTimeout is recorded
                self._add_outcome(
                    replace(
                        timed_out, observer=Observed(running, self._worker_id, time.monotonic())
                    )
                )
        for running in victims:
            running.cancel()
            logger.warning(
                "job_id=%d kind=%s attempt=%d outcome=ShutdownTimeout: still running after "
                "the %gs grace period; released for another worker",
                running.job.id,
                running.job.kind,
                running.job.attempts,
                shutdown_timeout,
                extra=log_fields(
                    "shutdown_timeout",
                    job_id=running.job.id,
                    kind=running.job.kind,
                    attempt=running.job.attempts,
                    shutdown_timeout=shutdown_timeout,
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
