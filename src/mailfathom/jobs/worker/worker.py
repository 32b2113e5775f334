"""The worker: claims due jobs in batches, runs them, records outcomes in batches.

One synchronous main loop per worker. It claims as many due jobs as it has free
slots (``concurrency`` in all) — and, while jobs are short, a few more that wait in
a small ready queue (:mod:`~mailfathom.jobs.worker.claim_ahead`) — hands each to the
:class:`~mailfathom.jobs.worker.runner.Runner`
(a thread pool for plain handlers, an event loop for ``async def`` ones, child
processes for ``isolation="process"``), and records finished attempts in one
transaction per batch — on SQLite the same transaction as the next claim when it
is busy; on PostgreSQL on a :class:`~mailfathom.jobs.worker.completer.Completer` thread,
beside the claims. A slot that frees starts the next job claimed ahead at once.
A :class:`~mailfathom.jobs.worker.heartbeat.Heartbeat` thread renews the leases it holds;
a watcher thread wakes the loop when jobs arrive (PostgreSQL ``NOTIFY``; SQLite's
``data_version``); every worker also runs the
:class:`~mailfathom.jobs.schedules.schedules.Scheduler`.

The worker is a composition of small parts, each testable alone:
:class:`~mailfathom.jobs.flow.pacing.ClaimPacer` (when and how much to claim),
:class:`~mailfathom.jobs.worker.claim_ahead.ReadyJobs` (jobs claimed ahead),
:class:`~mailfathom.jobs.worker.recorder.OutcomeRecorder` (recording outcomes, one by one
when a batch fails, backing off during outages), the
:class:`~mailfathom.jobs.worker.watcher.Watcher`, the runner and the heartbeat.
Its :class:`~mailfathom.jobs.worker.testsignal.WorkerSignals` (``worker.signals``) let
tests wait on what it does. Its base class,
:class:`~mailfathom.jobs.worker.handover.HandOver`, starts and ends the attempts in its
slots and hands a freed slot to the next job claimed ahead.

A job claimed ahead that has not started soon after its claim (a long job holds
the slot it waited for) is released: Pending again at once, its attempt not
counted, for an idle worker to take.

Stopping: the first SIGTERM/SIGINT (or :meth:`Worker.stop`) stops claiming,
releases the jobs claimed ahead that never started (no outcome, no attempt spent)
and waits up to ``shutdown_timeout`` for running jobs; what still runs then is
recorded as ``ShutdownTimeout`` and released at once (claimable immediately).
A second signal exits at once. When the database fails, the worker logs it,
backs off and retries, keeping every outcome it could not record yet.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import timedelta

from mailfathom.errors import InvalidInput, StoreError
from mailfathom.jobs.worker.worker import readiness
from mailfathom.jobs.worker.aborts import flag_aborted, stop_aborted
from mailfathom.jobs.worker.claim_ahead import ReadyJobs
from mailfathom.jobs.worker.completer import Completer
from mailfathom.jobs.worker.execute import aborted, shutdown_timed_out
from mailfathom.jobs.worker.handover import HandOver
from mailfathom.jobs.worker.heartbeat import Heartbeat
from mailfathom.jobs.worker.interruptions import mark_lost, mark_overruns, report_overruns, stop_lost
from mailfathom.jobs.flow.limits import free_slots, resolve_slots
from mailfathom.jobs.flow.limits_admin import Limits
from mailfathom.jobs.model import Job
from mailfathom.jobs.worker.observed import Observed
from mailfathom.jobs.worker.outcomes import Outage
from mailfathom.jobs.flow.pacing import ClaimPacer, Load
from mailfathom.jobs.pruner import PeriodicPruner
from mailfathom.jobs.queue import JobQueue
from mailfathom.jobs.worker.recorder import Claim, OutcomeRecorder
from mailfathom.jobs.registry import check_name
from mailfathom.jobs.worker.runner import Runner, Running
from mailfathom.jobs.schedules.schedules import Scheduler, ScheduleSpec
from mailfathom.jobs.worker.signals import HardStop, StopSignals
from mailfathom.jobs.worker.testsignal import WorkerSignals
from mailfathom.jobs.worker.watcher import MAX_BACKOFF, Watcher
from mailfathom.observability.logs import log_fields
from mailfathom.store.base import WorkerRegistration
from mailfathom.validate import check_seconds

__all__ = ["Worker"]

logger = logging.getLogger(__name__)

_PRUNE_AFTER = timedelta(days=1)  # registry rows of workers silent this long are deleted


class Worker(HandOver):
    """Runs due jobs of this app's kinds from ``queues`` (all when None), ``concurrency``
    at a time, under leases of ``lease`` seconds renewed by a heartbeat.

    ``queues`` may map each queue to its own slots (``{"mail": 5, "default": 20}``):
    at most that many of its jobs run here at once, and ``concurrency`` is their sum.

    Create one with ``mf.worker(...)`` and call :meth:`run` once.
    """

    def __init__(
        self,
        queue: JobQueue,
        *,
        concurrency: int | None = None,
        queues: Sequence[str] | Mapping[str, int] | None = None,
        lease: float | timedelta = 30.0,
        shutdown_timeout: float = 30.0,
        poll_interval: float = 1.0,
        schedules: Sequence[ScheduleSpec] = (),
        pruner: PeriodicPruner | None = None,
        limits: Limits | None = None,
    ) -> None:
        concurrency, queues, self.slots = resolve_slots(concurrency, queues)
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise InvalidInput(f"concurrency must be a positive integer, not {concurrency!r}")
        if queues is not None:
            if isinstance(queues, str) or not queues:
                raise InvalidInput(
                    "queues must be a non-empty list of queue names, or None for every queue"
                )
            queues = [check_name("queue", name, longest=100) for name in queues]
        seconds = lease.total_seconds() if isinstance(lease, timedelta) else lease
        check_seconds("lease", seconds, positive=True)
        check_seconds("shutdown_timeout", shutdown_timeout, positive=False)
        check_seconds("poll_interval", poll_interval, positive=True)
        self._queue = queue
        self._store = queue.store
        self._clock = queue.clock
        self.concurrency = concurrency
        self.queues: list[str] | None = list(queues) if queues is not None else None
        self.lease = timedelta(seconds=seconds)
        self.shutdown_timeout = float(shutdown_timeout)
        self.poll_interval = float(poll_interval)
        self.id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._schedules = list(schedules)
        self._limits = limits
        self._scheduler = Scheduler(queue, self._clock)
        #: Retention's pruning thread, started with the worker (not for a burst).
        self.pruner = pruner

        #: Test signals (off unless a test calls ``worker.signals.init()``).
        self.signals = WorkerSignals()

        self._lock = threading.Lock()
        self._starting = threading.Lock()  # held by whoever starts jobs claimed ahead
        self._wake = threading.Event()
        self._running: dict[int, Running] = {}
        self._ready = ReadyJobs(concurrency)  # claimed ahead, not started (under _lock)
        self._pacer = ClaimPacer(concurrency, self.poll_interval, self._ready)
        self._ran = 0
        self._stopping = False
        self._signals = StopSignals(self._first_signal)
        self._used = False

        self._runner: Runner | None = None
        self._heartbeat: Heartbeat | None = None
        self._watcher: Watcher | None = None
        self._next_schedule_pass = 0.0
        self._outage = Outage(
            self.id, limit=min(MAX_BACKOFF, max(self.lease.total_seconds() / 2, 0.5))
        )
        self._recorder = OutcomeRecorder(queue, self.id, outage=self._outage, signals=self.signals)
        self._done = self._recorder.unrecorded
        #: Records outcomes beside the claims where the database writes in parallel.
        self._completer: Completer | None = None

    # -- public ------------------------------------------------------------------------

    def run(self, *, burst: bool = False) -> int:
        """Work until stopped (SIGTERM/SIGINT or :meth:`stop`); with ``burst=True``, until
        nothing is due. Returns how many attempts this worker ran to an end.

        A second signal while stopping raises ``SystemExit(128 + signal)`` at once.
        """
        if self._used:
            raise InvalidInput("a Worker runs once: create another with mf.worker()")
        self._used = True
        try:
            self._signals.install()  # acts on a signal held while the process started
            graceful = False
            try:
                if self._start(burst):
                    self._work(burst)
                    self._stop_completer()
                    self._recorder.drain(max(self.lease.total_seconds(), 5.0), self._wake)
                graceful = True
            finally:
                self._close(graceful)
        except HardStop as stop:
            if self._runner is not None:
                self._runner.kill_children()
            logger.warning(
                "worker=%s second %s: exiting at once; %d running and %d claimed-ahead job(s) "
                "return to the queue when their leases expire",
                self.id,
                signal.Signals(stop.signum).name,
                len(self._running),
                len(self._ready),
                extra=log_fields(
                    "worker_exit",
                    worker=self.id,
                    signal=signal.Signals(stop.signum).name,
                    running=len(self._running),
                    claimed_ahead=len(self._ready),
                ),
            )
            raise SystemExit(128 + stop.signum) from None
        finally:
            self._signals.restore()
        logger.info(
            "worker=%s stopped after %d attempt(s)",
            self.id,
            self._ran,
            extra=log_fields("worker_stopped", worker=self.id, attempts=self._ran),
        )
        self.signals.stopped.signal(self._ran)
        return self._ran

    def stop(self) -> None:
        """Stop claiming; running jobs get ``shutdown_timeout`` seconds to finish.

        Safe to call from any thread (or a signal handler).
        """
        self._stopping = True
        self._wake.set()

    # -- start and stop ----------------------------------------------------------------

    def _start(self, burst: bool) -> bool:
        if self._stopping:  # stopped before it started: register nothing, claim nothing
            return False
        registration = WorkerRegistration(
            id=self.id,
            host=socket.gethostname(),
            pid=os.getpid(),
            queues=tuple(self.queues) if self.queues is not None else None,
            kinds=tuple(self._queue.registry.names()),
            concurrency=self.concurrency,
            lease_seconds=self.lease.total_seconds(),
            started_at=self._clock.now(),
        )
        self._heartbeat = Heartbeat(
            self._store,
            self._clock,
            registration,
            lease=self.lease,
            held=self._held,
            on_lost=self._lost,
            on_abort=self._abort,
        )
        while True:
            try:
                self._heartbeat.beat()
                self._scheduler.declare(self._schedules)
                if self._limits is not None:
                    self._limits.sync()
                self._store.prune_workers(before=self._clock.now() - _PRUNE_AFTER)
                break
            except StoreError as exc:
                if burst:
                    raise
                self._outage.failed("starting", exc)
            while not self._stopping and self._outage.blocked(time.monotonic()):
                self._wake.wait(self._outage.retry_at - time.monotonic())
                self._wake.clear()
            if self._stopping:
                return False
        if self._stopping:  # stopped while registering: leave before the first claim
            return False
        self._outage.ok()
        self._heartbeat.start()
        if self.pruner is not None and not burst:
            self.pruner.start()
        self._runner = Runner(
            self._queue.registry,
            self._clock,
            size=self.concurrency,
            worker_id=self.id,
            on_done=self._finished,
            on_done_next=self._finished_next,
        )
        if self._store.parallel_writes:
            self._completer = Completer(
                self._recorder,
                self._outage,
                name=f"mailfathom-complete-{self.id}",
                on_recorded=self._wake.set,
            )
            self._completer.start()
        if not burst:
            self._watcher = Watcher(
                self._store,
                name=f"mailfathom-watch-{self.id}",
                poll_interval=self.poll_interval,
                on_wake=self._woken,
            )
            self._watcher.start()
        logger.info(
            "worker=%s started: queues=%s concurrency=%d lease=%gs kinds=%s",
            self.id,
            ",".join(self.queues) if self.queues is not None else "*",
            self.concurrency,
            self.lease.total_seconds(),
            ",".join(registration.kinds) or "-",
            extra=log_fields(
                "worker_started",
                worker=self.id,
                queues=list(self.queues) if self.queues is not None else None,
                concurrency=self.concurrency,
                lease=self.lease.total_seconds(),
                kinds=list(registration.kinds),
            ),
        )
        readiness.notify("READY=1")
        return True

    def _stop_completer(self) -> None:
        """Stop the completer thread: what it has not recorded, the loop drains itself."""
        if self._completer is not None:
            self._completer.stop(wait=max(self.lease.total_seconds(), 5.0))

    def _close(self, graceful: bool) -> None:
        self._stop_completer()
        if self.pruner is not None:
            self.pruner.stop(wait=graceful)
        if self._watcher is not None:
            self._watcher.stop(wait=False)
        if self._runner is not None:
            self._runner.kill_children()
            self._runner.close(wait=1.0 if graceful else 0.0)
        if self._heartbeat is not None:
            self._heartbeat.stop(wait=graceful)
            if graceful:
                try:
                    self._store.deregister_worker(self.id)
                except StoreError as exc:
                    logger.warning(
                        "worker=%s could not deregister (%s)",
                        self.id,
                        exc,
                        extra=log_fields("deregister_failed", worker=self.id, error=str(exc)),
                    )
        if self._watcher is not None:
            self._watcher.stop(wait=graceful)

    # -- the main loop -----------------------------------------------------------------

    def _work(self, burst: bool) -> None:
        shutdown_at: float | None = None
        while True:
            self._wake.clear()
            now = time.monotonic()
            self._warn_overruns(now)
            if self._stopping:
                if shutdown_at is None:
                    shutdown_at = now + self.shutdown_timeout
                    readiness.notify("STOPPING=1")
                    logger.info(
                        "worker=%s stopping: no new claims; waiting up to %gs for %d running "
                        "job(s) (signal again to exit at once)",
                        self.id,
                        self.shutdown_timeout,
                        len(self._running),
                        extra=log_fields(
                            "worker_stopping",
                            worker=self.id,
                            shutdown_timeout=self.shutdown_timeout,
                            running=len(self._running),
                        ),
                    )
                if not self._outage.blocked(now):  # again while the database fails
                    self._release_unstarted(self._take_ready(), "the worker is stopping")
                self._recorder.flush()
                if not self._running and not self._ready:
                    return
                if now >= shutdown_at:
                    self._release_running()
                    self._leave_ready()
                    return
                self._wake.wait(min(shutdown_at - now, self.poll_interval))
                continue
            if self._completer is not None and self._done:
                self._completer.notify()  # outcomes added off the hot path (aborts, stops)
            self._release_late(now)
            self._start_ready()
            # A burst ends at an empty claim made while nothing ran or waited to be
            # recorded: an outcome committed during the claim (by the completer) may make
            # a job due again (a snooze, a retry due at once) that the claim did not see,
            # and our own running jobs may hold a queue's slots or a flow-control limit
            # that due jobs wait for.
            idle = burst and self._idle()
            claimed = self._schedule_and_claim(now, burst)
            if self._pacer.should_flush(time.monotonic(), self._load()):
                self._recorder.flush()
            if burst and claimed == 0 and self._idle():
                if idle:
                    return
                continue  # idle only since that claim began: one more claim decides
            load = self._load()
            wait = self._wait_time(time.monotonic(), load)
            self.signals.loop_waits.signal(load)
            self._wake.wait(wait)

    def _load(self) -> Load:
        with self._lock:
            running, ready = len(self._running), len(self._ready)
        if self._completer is not None:  # it records them: the loop need not wake for them
            return Load(running=running, ready=ready, unrecorded=0, unrecorded_age=0.0)
        return Load(
            running=running,
            ready=ready,
            unrecorded=len(self._done),
            unrecorded_age=self._done.age(time.monotonic()),
        )

    def _schedule_and_claim(self, now: float, burst: bool) -> int | None:
        """Run the scheduler when due, then claim for the free slots, recording what
        finished in the same transaction. Returns how many were claimed (None: not tried)."""
        if self._outage.blocked(now):
            return None
        if now >= self._next_schedule_pass:
            try:
                created, wait = self._scheduler.run_due()
            except StoreError as exc:
                self._outage.failed("enqueueing scheduled jobs", exc)
                return None
            # a burst fires what is due when it starts, then only drains
            self._next_schedule_pass = float("inf") if burst else time.monotonic() + wait
            self._pacer.woken = self._pacer.woken or created > 0
        load = self._load()
        wanted = self._pacer.wanted(now, load, burst=burst)
        if wanted <= 0:
            return None
        reap = self._pacer.reap_due(now)
        free = self._free_slots()
        if free is not None:
            wanted = sum(free.values())
            if wanted <= 0:
                return None
        # What this worker holds and renews is never reaped by itself, whatever its clock.
        live = [(job.id, job.attempts) for job in self._held()] if reap else []
        jobs = self._recorder.record_and_claim(
            Claim(
                limit=wanted,
                lease=self.lease,
                queues=self.queues,
                reap=reap,
                queue_limits=free,
                live=live,
            ),
            carry=self._completer is None,
        )
        if jobs is None:
            return None
        flow = getattr(self._store, "flow", None)
        held_back = flow is not None and flow.held_back
        self._pacer.claimed(now, wanted, len(jobs), reaped=reap, held_back=held_back)
        with self._lock:
            self._ready.add(jobs, time.monotonic())
        self._start_ready()
        return len(jobs)

    def _free_slots(self) -> dict[str, int] | None:
        """Per-queue slots not taken by a running or claimed job (None: no slots)."""
        if self.slots is None:
            return None
        with self._lock:
            taken = [r.job.queue for r in self._running.values()]
            taken.extend(job.queue for job in self._ready)
        return free_slots(self.slots, taken)

    def _wait_time(self, now: float, load: Load) -> float:
        wake_by = self._next_schedule_pass
        with self._lock:
            deadlines = [
                r.deadline
                for r in self._running.values()
                if r.mode == "thread" and r.deadline is not None and not r.overran
            ]
            late_at = None if self._outage.blocked(now) else self._ready.late_at()
        for instant in (*deadlines, late_at):
            if instant is not None:
                wake_by = min(wake_by, instant)
        not_before = self._outage.retry_at if self._outage.blocked(now) else None
        return self._pacer.wait_time(now, load, not_before=not_before, wake_by=wake_by)

    @property
    def unrecorded(self) -> int:
        """How many finished attempts wait for their outcome to be recorded (diagnostics)."""
        return len(self._done.waiting())

    def _idle(self) -> bool:
        with self._lock:
            return not self._running and not self._ready and self._done.empty()

    def _held(self) -> list[Job]:
        """Every job whose lease the heartbeat must renew."""
        with self._lock:
            running = [r.job for r in self._running.values() if not r.lost and not r.abandoned]
            running.extend(self._ready)
        return running + self._done.jobs()

    def _lost(self, lost: set[tuple[int, int]]) -> None:
        """The heartbeat found these leases gone: stop what can be stopped."""
        self.signals.lease_lost.signal(lost)
        with self._lock:
            victims, gone = mark_lost(self._running.values(), self._ready, lost)
        stop_lost(victims, gone)

    def _abort(self, aborts: dict[int, str]) -> None:
        """Operators asked to abort these jobs (the heartbeat learnt it): see ``aborts``."""
        with self._lock:
            victims, unstarted = flag_aborted(self._running.values(), self._ready, aborts)
        for job in unstarted:  # claimed ahead, never started: Aborted without running
            self._done.add(aborted(job, aborts[job.id], self._clock.now(), None))
        stop_aborted(victims, unstarted, aborts, self.signals)
        if unstarted:
            self._wake.set()

    def _warn_overruns(self, now: float) -> None:
        with self._lock:
            late = mark_overruns(self._running.values(), now)
        report_overruns(late)

    def _release_running(self) -> None:
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
                    running.job, running.started_at, self.shutdown_timeout, how
                )
                # counted and its span ended once the ShutdownTimeout is recorded
                self._done.add(
                    replace(timed_out, observer=Observed(running, self.id, time.monotonic()))
                )
        for running in victims:
            running.cancel()
            logger.warning(
                "job_id=%d kind=%s attempt=%d outcome=ShutdownTimeout: still running after "
                "the %gs grace period; released for another worker",
                running.job.id,
                running.job.kind,
                running.job.attempts,
                self.shutdown_timeout,
                extra=log_fields(
                    "shutdown_timeout",
                    job_id=running.job.id,
                    kind=running.job.kind,
                    attempt=running.job.attempts,
                    shutdown_timeout=self.shutdown_timeout,
                ),
            )

    # -- wake-ups and signals ----------------------------------------------------------

    def _woken(self) -> None:
        """Jobs may have arrived (called by the watcher's thread)."""
        self._pacer.woken = True
        self._wake.set()

    def _first_signal(self, signum: int) -> None:
        logger.warning(
            "worker=%s %s received: stopping gracefully (up to %gs); send it again to exit at once",
            self.id,
            signal.Signals(signum).name,
            self.shutdown_timeout,
            extra=log_fields(
                "worker_signal",
                worker=self.id,
                signal=signal.Signals(signum).name,
                shutdown_timeout=self.shutdown_timeout,
            ),
        )
        self.stop()
