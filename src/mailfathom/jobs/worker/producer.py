"""The producer: claims due jobs for the worker's free slots, and a few ahead of them.

Internal, one of the worker's three parts (with the
:class:`~mailfathom.jobs.worker.executor.Executor` that runs attempts in the slots
and the :class:`~mailfathom.jobs.worker.completer.Completer` that records outcomes).
Each pass of the worker's loop, while it is not stopping, is the producer's
:meth:`Producer.step`: fire the schedules that are due
(:class:`~mailfathom.jobs.schedules.schedules.Scheduler`), then — when the
:class:`~mailfathom.jobs.worker.pacing.ClaimPacer` says so — claim as many jobs as the
executor has free slots (per queue, when the worker has queue slots), plus those the
executor may claim ahead while jobs are short
(:mod:`~mailfathom.jobs.worker.claim_ahead`), and hand them to the executor. On
SQLite the claim carries the outcomes waiting in the completer (one transaction for
both). Jobs claimed ahead that do not start soon, or that never start because the
worker stops, are given back here: Pending again at once, their attempt not counted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Protocol

from mailfathom.clock import Clock
from mailfathom.errors import StoreError
from mailfathom.jobs.flow.limits import free_slots
from mailfathom.jobs.model import Job
from mailfathom.jobs.schedules.schedules import Scheduler, ScheduleSpec
from mailfathom.jobs.worker.outcomes import Outage
from mailfathom.jobs.worker.pacing import ClaimPacer, Load
from mailfathom.jobs.worker.recorder import Claim
from mailfathom.jobs.worker.testsignal import WorkerSignals
from mailfathom.observability.logs import log_fields
from mailfathom.store.protocol import Store

__all__ = ["Completions", "Producer", "Slots"]

logger = logging.getLogger(__name__)


class Slots(Protocol):
    """What the producer needs of the executor
    (:class:`~mailfathom.jobs.worker.executor.Executor`)."""

    def accept(self, jobs: list[Job], now: float) -> None:
        """Jobs just claimed: they start while slots are free, and wait otherwise."""

    def start_ready(self) -> None:
        """Start jobs claimed ahead while slots are free."""

    def counts(self) -> tuple[int, int]:
        """How many attempts run and how many jobs claimed ahead wait."""

    def idle(self) -> bool:
        """Nothing runs and nothing waits for a slot."""

    def queues_taken(self) -> list[str]:
        """The queue of every job running or claimed ahead."""

    def held(self) -> list[Job]:
        """The jobs running or claimed ahead whose leases are renewed."""

    def wake_by(self, *, late: bool) -> list[float]:
        """Instants the loop must look again (timeouts; ``late``: a job claimed ahead)."""

    def late(self, now: float) -> list[Job]:
        """Take the jobs claimed ahead that have not started by ``now``."""

    def take_ready(self) -> list[Job]:
        """Take every job claimed ahead and not started."""

    def put_back(self, jobs: list[Job], now: float) -> None:
        """Jobs that could not be given back wait again."""


class Completions(Protocol):
    """What the producer needs of the completer
    (:class:`~mailfathom.jobs.worker.completer.Completer`)."""

    threaded: bool

    def claim(self, claim: Claim) -> list[Job] | None:
        """Make ``claim`` (carrying the waiting outcomes unless ``threaded``)."""

    def flush(self) -> None:
        """Record the waiting outcomes now."""

    def notify(self) -> None:
        """Outcomes wait (the completer's thread records them)."""

    def __len__(self) -> int:
        """How many outcomes wait."""

    def age(self, now: float) -> float:
        """Seconds the oldest waiting outcome has waited."""

    def empty(self) -> bool:
        """Nothing waits, nothing is being recorded."""

    def jobs(self) -> list[Job]:
        """The jobs whose outcomes wait (still leased)."""


class Producer:
    """Claims for worker ``worker_id`` under leases of ``lease``, from ``queues`` (all
    when None), at most ``slots[queue]`` running per queue when ``slots`` is given.

    Gives: :meth:`step` (one pass of the loop while the worker runs),
    :meth:`woken`, and the give-backs the worker's shutdown uses
    (:meth:`give_back`, :meth:`leave_ready`). Needs: the executor (:class:`Slots`),
    the completer (:class:`Completions`), the pacer (sharing the executor's jobs
    claimed ahead), the scheduler, the store (to give jobs back), and the worker's
    ``outage`` and ``wake`` event.
    """

    def __init__(
        self,
        *,
        worker_id: str,
        store: Store,
        clock: Clock,
        lease: timedelta,
        queues: Sequence[str] | None,
        slots: Mapping[str, int] | None,
        executor: Slots,
        completer: Completions,
        pacer: ClaimPacer,
        scheduler: Scheduler,
        schedules: Sequence[ScheduleSpec],
        outage: Outage,
        wake: threading.Event,
        signals: WorkerSignals,
    ) -> None:
        self._worker_id = worker_id
        self._store = store
        self._clock = clock
        self._lease = lease
        self._queues = queues
        self._slots = slots
        self._executor = executor
        self._completer = completer
        self._pacer = pacer
        self._scheduler = scheduler
        self._schedules = list(schedules)
        self._outage = outage
        self._wake = wake
        self._signals = signals
        self._next_schedule_pass = 0.0
        #: The kinds this worker claims: set when it starts (its registered kinds), so a
        #: job of a kind it has no handler for waits, Pending, for a worker that has one.
        self.kinds: Sequence[str] | None = None

    def check_schedules(self) -> None:
        """Refuse a schedule of a kind this app may not enqueue (raises ``InvalidInput``)."""
        self._scheduler.check(self._schedules)

    def declare(self) -> None:
        """Declare the worker's schedules (at start-up; raises ``StoreError``)."""
        self._scheduler.declare(self._schedules)

    def woken(self) -> None:
        """Jobs may have arrived (called by the watcher's thread)."""
        self._pacer.woken = True
        self._wake.set()

    # -- one pass of the loop ----------------------------------------------------------

    def step(self, now: float, burst: bool) -> bool:
        """One pass of the worker's loop while it runs: give back late jobs, start what
        fits, claim when due, record outcomes when no claim carries them soon, then wait
        for a wake-up. Returns True when a ``burst`` is over (nothing is due, nothing
        runs or waits)."""
        if self._completer.threaded and len(self._completer):
            self._completer.notify()  # outcomes added off the hot path (aborts, stops)
        self._release_late(now)
        self._executor.start_ready()
        # A burst ends at an empty claim made while nothing ran or waited to be
        # recorded: an outcome committed during the claim (by the completer) may make
        # a job due again (a snooze, a retry due at once) that the claim did not see,
        # and our own running jobs may hold a queue's slots or a flow-control limit
        # that due jobs wait for.
        idle = burst and self._idle()
        claimed = self._schedule_and_claim(now, burst)
        if self._pacer.should_flush(time.monotonic(), self._load()):
            self._completer.flush()
        if burst and claimed == 0 and self._idle():
            return idle  # idle only since that claim began: one more claim decides
        load = self._load()
        wait = self._wait_time(time.monotonic(), load)
        self._signals.loop_waits.signal(load)
        self._wake.wait(wait)
        return False

    def _idle(self) -> bool:
        return self._executor.idle() and self._completer.empty()

    def _load(self) -> Load:
        running, ready = self._executor.counts()
        if self._completer.threaded:  # it records them: the loop need not wake for them
            return Load(running=running, ready=ready, unrecorded=0, unrecorded_age=0.0)
        return Load(
            running=running,
            ready=ready,
            unrecorded=len(self._completer),
            unrecorded_age=self._completer.age(time.monotonic()),
        )

    def _held(self) -> list[Job]:
        """Every job whose lease this worker renews."""
        return self._executor.held() + self._completer.jobs()

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
        jobs = self._completer.claim(
            Claim(
                limit=wanted,
                lease=self._lease,
                queues=self._queues,
                reap=reap,
                queue_limits=free,
                live=live,
                kinds=self.kinds,
            )
        )
        if jobs is None:
            return None
        flow = getattr(self._store, "flow", None)
        held_back = flow is not None and flow.held_back
        self._pacer.claimed(now, wanted, len(jobs), reaped=reap, held_back=held_back)
        self._executor.accept(jobs, time.monotonic())
        return len(jobs)

    def _free_slots(self) -> dict[str, int] | None:
        """Per-queue slots not taken by a running or claimed job (None: no slots)."""
        if self._slots is None:
            return None
        return free_slots(self._slots, self._executor.queues_taken())

    def _wait_time(self, now: float, load: Load) -> float:
        blocked = self._outage.blocked(now)
        wake_by = self._next_schedule_pass
        for instant in self._executor.wake_by(late=not blocked):
            wake_by = min(wake_by, instant)
        not_before = self._outage.retry_at if blocked else None
        return self._pacer.wait_time(now, load, not_before=not_before, wake_by=wake_by)

    # -- jobs claimed ahead that go back -----------------------------------------------

    def _release_late(self, now: float) -> None:
        """Jobs claimed ahead that have not started by now go back to the queue."""
        if self._outage.blocked(now):  # kept meanwhile: started when a slot frees
            return
        late = self._executor.late(now)
        if late:
            self._release_unstarted(late, "a long job holds the slot it waited for")

    def give_back(self, now: float) -> None:
        """The worker is stopping: every job claimed ahead goes back (while the database
        answers; kept and tried again otherwise)."""
        if not self._outage.blocked(now):  # again while the database fails
            self._release_unstarted(self._executor.take_ready(), "the worker is stopping")

    def _release_unstarted(self, jobs: list[Job], why: str) -> None:
        """Give back jobs claimed ahead that never started: Pending, no attempt spent.

        When the database fails they are kept, their leases renewed, until a later try
        (or, while running on, until a slot frees and they start).
        """
        if not jobs:
            return
        try:
            released = self._store.claims.release_unstarted(
                owner=self._worker_id,
                held=[(job.id, job.attempts) for job in jobs],
                now=self._clock.now(),
            )
        except StoreError as exc:
            self._executor.put_back(jobs, time.monotonic())
            self._outage.failed("releasing jobs claimed ahead", exc)
            return
        back = [job for job in jobs if job.id in released]
        logger.info(
            "worker=%s released %d job(s) claimed ahead that had not started (%s): %s",
            self._worker_id,
            len(back),
            why,
            ", ".join(str(job.id) for job in back) or "-",
            extra=log_fields(
                "release_unstarted",
                worker=self._worker_id,
                reason=why,
                job_ids=[job.id for job in back],
            ),
        )
        self._signals.released.signal(back)

    def leave_ready(self) -> None:
        """The grace period ran out with the database still failing: what was claimed
        ahead stays with its lease, which the reaper returns (its attempt then counts)."""
        gone = self._executor.take_ready()
        if gone:
            logger.error(
                "worker=%s leaving %d job(s) claimed ahead it could not give back (the "
                "database still fails): %s return when their leases expire",
                self._worker_id,
                len(gone),
                ", ".join(str(job.id) for job in gone),
                extra=log_fields(
                    "left_claimed_ahead", worker=self._worker_id, job_ids=[job.id for job in gone]
                ),
            )
