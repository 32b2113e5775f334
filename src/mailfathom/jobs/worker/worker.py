"""The worker: a producer that claims, an executor that runs, a completer that records.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

One synchronous main loop per worker, and three parts with small interfaces (as
River has them):

- the :class:`~mailfathom.jobs.worker.producer.Producer` claims as many due jobs as
  the executor has free slots (``concurrency`` in all) — and, while jobs are short, a
  few more that wait for a slot (:mod:`~mailfathom.jobs.worker.claim_ahead`) — paced
  by the :class:`~mailfathom.jobs.worker.pacing.ClaimPacer`, and runs the
  :class:`~mailfathom.jobs.schedules.schedules.Scheduler` every worker runs;
- the :class:`~mailfathom.jobs.worker.executor.Executor` runs them in its slots on
  the :class:`~mailfathom.jobs.worker.runner.Runner` (a thread pool for plain
  handlers, an event loop for ``async def`` ones, child processes for
  ``isolation="process"``); a slot that frees starts the next job claimed ahead at
  once;
- the :class:`~mailfathom.jobs.worker.completer.Completer` records finished attempts
  in one transaction per batch — on SQLite in the same transaction as the next claim
  when it is busy; on PostgreSQL on a thread of its own, beside the claims.

The worker wires them, and owns what spans them: start-up (registration, schedules,
flow limits), a :class:`~mailfathom.jobs.worker.heartbeat.Heartbeat` thread that
renews the leases of what the executor and the completer hold (and tells the
executor of lost leases and aborts), a :class:`~mailfathom.jobs.worker.watcher.Watcher`
thread that wakes the producer when jobs arrive (PostgreSQL ``NOTIFY``; SQLite's
``data_version``), signals, readiness, and shutdown. Its
:class:`~mailfathom.jobs.worker.testsignal.WorkerSignals` (``worker.signals``) let
tests wait on what it does.

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

import gc
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import timedelta

from mailfathom.errors import InvalidInput, StoreError
from mailfathom.jobs.admin.limits import Limits
from mailfathom.jobs.flow.limits import resolve_slots
from mailfathom.jobs.model import Job
from mailfathom.jobs.pruner import PeriodicPruner
from mailfathom.jobs.queue import JobQueue
from mailfathom.jobs.registry import check_name
from mailfathom.jobs.schedules.schedules import Scheduler, ScheduleSpec
from mailfathom.jobs.signals import HardStop, StopSignals
from mailfathom.jobs.worker import readiness
from mailfathom.jobs.worker.claim_ahead import ReadyJobs
from mailfathom.jobs.worker.completer import Completer
from mailfathom.jobs.worker.executor import Executor
from mailfathom.jobs.worker.heartbeat import Heartbeat
from mailfathom.jobs.worker.outcomes import Outage
from mailfathom.jobs.worker.pacing import ClaimPacer
from mailfathom.jobs.worker.producer import Producer
from mailfathom.jobs.worker.recorder import OutcomeRecorder
from mailfathom.jobs.worker.testsignal import WorkerSignals
from mailfathom.jobs.worker.watcher import MAX_BACKOFF, Watcher
from mailfathom.observability.logs import log_fields
from mailfathom.store.base import WorkerRegistration
from mailfathom.validate import check_seconds

__all__ = ["Worker"]

logger = logging.getLogger(__name__)

#: Threads of the worker's own that use the database beside its job threads: the
#: producer (claims), the completer (outcomes), the heartbeat and the pruner.
OWN_THREADS = 4
_PRUNE_AFTER = timedelta(days=1)  # registry rows of workers silent this long are deleted


class Worker:
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
        self._limits = limits
        #: Retention's pruning thread, started with the worker (not for a burst).
        self.pruner = pruner

        #: Test signals (off unless a test calls ``worker.signals.init()``).
        self.signals = WorkerSignals()

        self._wake = threading.Event()
        self._signals = StopSignals(self._first_signal)
        self._used = False
        self._heartbeat: Heartbeat | None = None
        self._watcher: Watcher | None = None
        self._outage = Outage(
            self.id, limit=min(MAX_BACKOFF, max(self.lease.total_seconds() / 2, 0.5))
        )

        # The three parts, and what they share: the jobs claimed ahead (the executor's,
        # under its lock; the pacer sizes claims from them), the outage, the wake event.
        ready = ReadyJobs(concurrency)
        self._completer = Completer(
            OutcomeRecorder(queue, self.id, outage=self._outage, signals=self.signals),
            self._outage,
            name=f"mailfathom-complete-{self.id}",
            on_recorded=self._wake.set,
            threaded=self._store.parallel_writes,
        )
        self._executor = Executor(
            worker_id=self.id,
            concurrency=concurrency,
            clock=self._clock,
            ready=ready,
            add_outcome=self._completer.add,
            wake=self._wake,
            signals=self.signals,
        )
        self._producer = Producer(
            worker_id=self.id,
            store=self._store,
            clock=self._clock,
            lease=self.lease,
            queues=self.queues,
            slots=self.slots,
            executor=self._executor,
            completer=self._completer,
            pacer=ClaimPacer(concurrency, self.poll_interval, ready),
            scheduler=Scheduler(queue, self._clock),
            schedules=schedules,
            outage=self._outage,
            wake=self._wake,
            signals=self.signals,
        )

    # -- public ------------------------------------------------------------------------

    def run(self, *, burst: bool = False) -> int:
        """Work until stopped (SIGTERM/SIGINT or :meth:`stop`); with ``burst=True``, until
        nothing is due. Returns how many attempts this worker ran to an end.

        A second signal while stopping raises ``SystemExit(128 + signal)`` at once.
        """
        if self._used:
            raise InvalidInput("a Worker runs once: create another with mf.worker()")
        self._used = True
        executor = self._executor
        try:
            self._signals.install()  # acts on a signal held while the process started
            graceful = False
            try:
                if self._start(burst):
                    with _start_up_heap_frozen():
                        self._work(burst)
                    self._stop_completer()
                    self._completer.drain(max(self.lease.total_seconds(), 5.0), self._wake)
                graceful = True
            finally:
                self._close(graceful)
        except HardStop as stop:
            executor.kill_children()
            running, ready = executor.counts()
            logger.warning(
                "worker=%s second %s: exiting at once; %d running and %d claimed-ahead job(s) "
                "return to the queue when their leases expire",
                self.id,
                signal.Signals(stop.signum).name,
                running,
                ready,
                extra=log_fields(
                    "worker_exit",
                    worker=self.id,
                    signal=signal.Signals(stop.signum).name,
                    running=running,
                    claimed_ahead=ready,
                ),
            )
            raise SystemExit(128 + stop.signum) from None
        finally:
            self._signals.restore()
        logger.info(
            "worker=%s stopped after %d attempt(s)",
            self.id,
            executor.ran,
            extra=log_fields("worker_stopped", worker=self.id, attempts=executor.ran),
        )
        self.signals.stopped.signal(executor.ran)
        return executor.ran

    def stop(self) -> None:
        """Stop claiming; running jobs get ``shutdown_timeout`` seconds to finish.

        Safe to call from any thread (or a signal handler).
        """
        self._executor.stopping = True
        self._wake.set()

    @property
    def unrecorded(self) -> int:
        """How many finished attempts wait for their outcome to be recorded (diagnostics)."""
        return self._completer.waiting()

    # -- start and stop ----------------------------------------------------------------

    def _start(self, burst: bool) -> bool:
        executor = self._executor
        if executor.stopping:  # stopped before it started: register nothing, claim nothing
            return False
        self._producer.check_schedules()  # a refused schedule: nothing registered
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
            on_lost=executor.lost,
            on_abort=executor.abort,
        )
        while True:
            try:
                self._heartbeat.beat()
                self._producer.declare()
                if self._limits is not None:
                    self._limits.sync()
                self._store.workers.prune_workers(before=self._clock.now() - _PRUNE_AFTER)
                break
            except StoreError as exc:
                if burst:
                    raise
                self._outage.failed("starting", exc)
            while not executor.stopping and self._outage.blocked(time.monotonic()):
                self._wake.wait(self._outage.retry_at - time.monotonic())
                self._wake.clear()
            if executor.stopping:
                return False
        if executor.stopping:  # stopped while registering: leave before the first claim
            return False
        self._outage.ok()
        # A connection for every job thread and every thread of the worker's own, so a
        # job never waits for the pool while the others hold their connections.
        self._store.reserve_connections(self.concurrency + OWN_THREADS)
        self._producer.kinds = registration.kinds  # it claims only the kinds it runs
        self._heartbeat.start()
        if self.pruner is not None and not burst:
            self.pruner.start()
        executor.open(self._queue.registry)
        self._completer.start()
        if not burst:
            self._watcher = Watcher(
                self._store,
                name=f"mailfathom-watch-{self.id}",
                poll_interval=self.poll_interval,
                on_wake=self._producer.woken,
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

    def _held(self) -> list[Job]:
        """Every job whose lease the heartbeat must renew: running or claimed ahead (the
        executor's), or finished with its outcome not recorded yet (the completer's)."""
        return self._executor.held() + self._completer.jobs()

    def _stop_completer(self) -> None:
        """Stop the completer's thread: what it has not recorded, the worker drains itself."""
        self._completer.stop(wait=max(self.lease.total_seconds(), 5.0))

    def _close(self, graceful: bool) -> None:
        self._stop_completer()
        if self.pruner is not None:
            self.pruner.stop(wait=graceful)
        if self._watcher is not None:
            self._watcher.stop(wait=False)
        self._executor.kill_children()
        self._executor.close(wait=1.0 if graceful else 0.0)
        if self._heartbeat is not None:
            self._heartbeat.stop(wait=graceful)
            if graceful:
                try:
                    self._store.workers.deregister_worker(self.id)
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
        """The loop: the producer's passes while running, then the drain of shutdown."""
        executor = self._executor
        shutdown_at: float | None = None
        while True:
            self._wake.clear()
            now = time.monotonic()
            executor.warn_overruns(now)
            if not executor.stopping:
                if self._producer.step(now, burst):
                    return
                continue
            running, _ = executor.counts()
            if shutdown_at is None:
                shutdown_at = now + self.shutdown_timeout
                readiness.notify("STOPPING=1")
                logger.info(
                    "worker=%s stopping: no new claims; waiting up to %gs for %d running "
                    "job(s) (signal again to exit at once)",
                    self.id,
                    self.shutdown_timeout,
                    running,
                    extra=log_fields(
                        "worker_stopping",
                        worker=self.id,
                        shutdown_timeout=self.shutdown_timeout,
                        running=running,
                    ),
                )
            self._producer.give_back(now)
            self._completer.flush()
            if executor.idle():
                return
            if now >= shutdown_at:
                executor.release_running(self.shutdown_timeout)
                self._producer.leave_ready()
                return
            self._wake.wait(min(shutdown_at - now, self.poll_interval))

    # -- signals -----------------------------------------------------------------------

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


@contextmanager
def _start_up_heap_frozen() -> Iterator[None]:
    """While the worker works, the objects that exist once it has started (modules,
    the app, its handlers: most of the heap, and alive for good) are left out of the
    garbage collector's full collections (``gc.freeze``), which then look only at what
    the work itself allocates: a full collection otherwise walks the whole heap and
    pauses every thread for milliseconds, which an idle worker's wake-up pays when it
    lands on one. Given back to the collector when the work ends."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
