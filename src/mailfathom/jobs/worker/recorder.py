"""Outcome recording: turns finished attempts into store writes, in batches, and never
lets a failure to record escape into the worker's loop.

Internal, the :class:`~mailfathom.jobs.worker.completer.Completer`'s. Finished attempts
wait in :class:`~mailfathom.jobs.worker.outcomes.Unrecorded` (their leases renewed by the
heartbeat) until :meth:`OutcomeRecorder.flush` records them on their own, or
:meth:`OutcomeRecorder.record_and_claim` records them in the same transaction as
the next claim. When that batch fails:

- the database is down (the batch, then the first outcome alone and its fallback,
  all raise :class:`~mailfathom.errors.StoreError`): the batch is put back and the
  worker backs off (:class:`~mailfathom.jobs.worker.outcomes.Outage`); nothing is lost;
- anything else (a row the database refuses, an outcome that cannot even be turned
  into a row, a bug): the outcomes are recorded one by one, so one job's outcome
  failing never loses its siblings'. A job whose own outcome cannot be recorded gets
  the *fallback* outcome — Failed, transient, with a reason naming what went wrong,
  retried at once while it has attempts left — and if even that fails it is left to
  its lease (the reaper returns it) and logged.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeGuard

from mailfathom.errors import StoreError
from mailfathom.jobs.model import Job
from mailfathom.jobs.queue import Finished, JobQueue, transient_attempt
from mailfathom.jobs.reasons import describe_error, storable
from mailfathom.jobs.state import AttemptOutcome
from mailfathom.jobs.worker.outcomes import Outage, Unrecorded
from mailfathom.jobs.worker.testsignal import Recorded, WorkerSignals
from mailfathom.observability.logs import log_fields
from mailfathom.store.base import FailedAttempt

__all__ = ["Claim", "OutcomeRecorder"]

logger = logging.getLogger(__name__)


Pair = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Claim:
    """A claim to make in the same transaction as the outcomes it carries."""

    limit: int
    lease: timedelta
    queues: Sequence[str] | None
    reap: bool
    #: Per-queue slots still free (``{"mail": 2}``), or None for one ``limit`` overall.
    queue_limits: Mapping[str, int] | None = None
    #: The (id, attempt) leases this worker holds and renews: its reaping leaves them.
    live: Sequence[Pair] = ()
    #: The kinds this worker has handlers for: a due job of another kind is left Pending
    #: (no attempt spent) for a worker that knows it. None claims every kind.
    kinds: Sequence[str] | None = None


class OutcomeRecorder:
    """Records the finished attempts of worker ``owner``; see the module docstring."""

    def __init__(
        self, queue: JobQueue, owner: str, *, outage: Outage, signals: WorkerSignals
    ) -> None:
        self._queue = queue
        self._store = queue.store.claims
        self._clock = queue.clock
        self._owner = owner
        self._outage = outage
        self._signals = signals
        #: Finished attempts not recorded yet (thread-safe).
        self.unrecorded = Unrecorded()
        # One batch in flight at a time: the completer thread and the worker's loop (at
        # stop) may both record, and Unrecorded tracks a single batch being recorded.
        self._writing = threading.Lock()

    # -- the two ways in ---------------------------------------------------------------

    def flush(self) -> None:
        """Record every waiting outcome in one transaction (nothing when none waits or the
        database is being left alone)."""
        if not self.unrecorded or self._outage.blocked_now():
            return
        with self._writing:
            self._flush()

    def _flush(self) -> None:
        batch = self.unrecorded.take()
        if not batch:
            return
        now = self._clock.now()
        try:
            succeeded, failed, fallbacks, results = self._rows(batch, now)
            lost = self._store.record_outcomes(
                owner=self._owner, now=now, succeeded=succeeded, failed=failed, results=results
            )
        except Exception as exc:  # whatever it is, the loop must go on
            if _outage(exc):
                self.unrecorded.put_back(batch)
                self._outage.failed("recording outcomes", exc)
            else:
                self._one_by_one(batch, now, exc, "recording outcomes")
            return
        self._outage.ok()
        self._done(batch, lost, fallbacks)

    def record_and_claim(self, claim: Claim, *, carry: bool = True) -> list[Job] | None:
        """Record every waiting outcome and make ``claim``, in one transaction. Returns the
        jobs claimed, or None when nothing could be claimed this time (the database
        failed, or the outcomes had to be recorded one by one).

        ``carry=False``: only claim, leaving the outcomes to a
        :class:`~mailfathom.jobs.worker.completer.Completer` (and not waiting for its batch).
        """
        if not carry:
            return self._claim_and_record([], claim)
        with self._writing:
            return self._claim_and_record(self.unrecorded.take(), claim)

    def _claim_and_record(self, batch: list[Finished], claim: Claim) -> list[Job] | None:
        now = self._clock.now()
        try:
            succeeded, failed, fallbacks, results = self._rows(batch, now)
            lost, rows = self._store.record_and_claim(
                owner=self._owner,
                now=now,
                succeeded=succeeded,
                failed=failed,
                results=results,
                limit=claim.limit,
                lease_until=now + claim.lease,
                queues=claim.queues,
                reap=claim.reap,
                queue_limits=claim.queue_limits,
                live=claim.live,
                kinds=claim.kinds,
            )
            jobs = [Job.from_row(row) for row in rows]
        except Exception as exc:  # whatever it is, the loop must go on
            if batch and _outage(exc):
                self.unrecorded.put_back(batch)
                self._outage.failed("claiming", exc)
            elif batch:
                self._one_by_one(batch, now, exc, "claiming")
            else:
                self._outage.failed("claiming", _as_store_error(exc))
            return None
        self._outage.ok()
        self._done(batch, lost, fallbacks)
        if jobs:
            self._signals.claimed.signal(jobs)
        return jobs

    def drain(self, give_up_after: float, wake: threading.Event) -> None:
        """Before the worker leaves: record what finished, retrying while the database
        fails for up to ``give_up_after`` seconds (``wake`` cuts a pause short), then
        name the jobs left unrecorded (they run again after their leases expire)."""
        give_up = time.monotonic() + give_up_after
        while True:
            self.flush()
            left = self.unrecorded.waiting()
            if not left:
                return
            now = time.monotonic()
            if now >= give_up:
                logger.error(
                    "worker=%s leaving with %d unrecorded outcome(s) (the database still "
                    "fails): jobs %s run again after their leases expire",
                    self._owner,
                    len(left),
                    ", ".join(str(r.job.id) for r in left),
                    extra=log_fields(
                        "left_unrecorded", worker=self._owner, job_ids=[r.job.id for r in left]
                    ),
                )
                return
            wake.clear()
            wake.wait(min(max(self._outage.retry_at - now, 0.05), give_up - now))

    # -- turning results into rows -----------------------------------------------------

    def failed_attempt(self, result: Finished, now: datetime) -> FailedAttempt:
        """The row recording a failed attempt (the queue classifies it). A ShutdownTimeout
        with attempts left is due at once: claimable immediately, not after its backoff."""
        failure = self._queue.failure(result, now)
        if result.outcome is AttemptOutcome.SHUTDOWN_TIMEOUT and failure.retry_at is not None:
            return dataclasses.replace(failure, retry_at=now)
        return failure

    def fallback(self, result: Finished, now: datetime, reason: str) -> FailedAttempt:
        """The outcome recorded when a job's own cannot be: Failed, transient, retried at
        once while attempts are left (else dead-lettered), saying why."""
        return transient_attempt(
            result.job,
            outcome=AttemptOutcome.FAILED,
            message=storable(reason),
            started_at=result.job.claimed_at,
            retry_at=now,
        )

    def _rows(
        self, batch: list[Finished], now: datetime
    ) -> tuple[list[Pair], list[FailedAttempt], list[tuple[Finished, str]], dict[int, str]]:
        """The store's arguments for ``batch``; an outcome that cannot be turned into a row
        gets its fallback row at once (and is listed in the third item). The fourth: the
        succeeded jobs' results (JSON text) by id, for those that returned one."""
        succeeded: list[Pair] = []
        failed: list[FailedAttempt] = []
        fallbacks: list[tuple[Finished, str]] = []
        results: dict[int, str] = {}
        for result in batch:
            if result.outcome is AttemptOutcome.SUCCEEDED:
                succeeded.append((result.job.id, result.job.attempts))
                if result.result is not None:
                    results[result.job.id] = result.result
                continue
            try:
                failed.append(self.failed_attempt(result, now))
            except Exception as exc:  # a poison outcome: record why instead
                reason = _reason(result, "could not be turned into a row", exc)
                failed.append(self.fallback(result, now, reason))
                fallbacks.append((result, reason))
        return succeeded, failed, fallbacks, results

    # -- after a batch -----------------------------------------------------------------

    def _done(
        self,
        batch: list[Finished],
        lost: set[int],
        fallbacks: list[tuple[Finished, str]],
    ) -> None:
        self.unrecorded.recorded(batch, lost)
        instead = {id(result): reason for result, reason in fallbacks}
        for result, reason in fallbacks:
            if result.job.id not in lost:
                _log_fallback(result, reason)
                self._signals.fallback_recorded.signal((result.job, reason))
        for result in batch:  # committed: only now counted, traced and logged
            if result.observer is not None:
                if result.job.id in lost:
                    _observe(result, None, None)
                elif id(result) in instead:
                    _observe(result, AttemptOutcome.FAILED.value, instead[id(result)])
                else:
                    _observe(result, result.outcome.value, result.message)
        if batch and self._signals.batch_recorded.on:
            self._signals.batch_recorded.signal(
                Recorded(
                    recorded=tuple(
                        (r.job.id, r.job.attempts) for r in batch if r.job.id not in lost
                    ),
                    lost=frozenset(lost),
                )
            )

    def _one_by_one(
        self, batch: list[Finished], now: datetime, error: BaseException, doing: str
    ) -> None:
        """The batch failed with ``error`` for something in it (a row the database refuses,
        an outcome that cannot be prepared): record each outcome in its own transaction,
        and a fallback for the one that cannot be.

        When the database becomes unavailable meanwhile, or nothing at all can be written
        (the first outcome, then its fallback, fail), everything not yet recorded is put
        back for the next try.
        """
        logger.log(
            logging.DEBUG if isinstance(error, StoreError) else logging.WARNING,
            "worker=%s recording %d outcome(s) in one transaction failed (%s); recording "
            "them one by one",
            self._owner,
            len(batch),
            describe_error(error),
            extra=log_fields(
                "record_one_by_one",
                worker=self._owner,
                outcomes=len(batch),
                error=describe_error(error),
            ),
        )
        wrote = False
        for position, result in enumerate(batch):
            try:
                lost = self._record_one(result, now)
            except _Unprepared as exc:
                reason = str(exc)
            except Exception as exc:  # then its fallback
                if _outage(exc):  # the database went away meanwhile: keep the rest for later
                    self.unrecorded.put_back(batch[position:])
                    self._outage.failed(doing, exc)
                    return
                reason = _reason(result, "could not be recorded", exc)
            else:
                wrote = True
                self._done([result], lost, [])
                continue
            try:
                lost = self._store.record_outcomes(
                    owner=self._owner, now=now, failed=[self.fallback(result, now, reason)]
                )
            except StoreError as exc:
                if not wrote:  # nothing can be written: the database is down
                    self.unrecorded.put_back(batch[position:])
                    self._outage.failed(doing, exc)
                    return
                self._left_to_lease(result, f"{reason}; its fallback failed too: {exc}")
                continue
            except Exception as exc:  # a bug of ours: leave it to the lease
                self._left_to_lease(
                    result, f"{reason}; its fallback failed too: {describe_error(exc)}"
                )
                continue
            wrote = True
            self._done([result], lost, [(result, reason)])
        self.unrecorded.settle()
        self._outage.ok()

    def _record_one(self, result: Finished, now: datetime) -> set[int]:
        succeeded, failed, fallbacks, results = self._rows([result], now)
        if fallbacks:
            raise _Unprepared(fallbacks[0][1])
        return self._store.record_outcomes(
            owner=self._owner, now=now, succeeded=succeeded, failed=failed, results=results
        )

    def _left_to_lease(self, result: Finished, reason: str) -> None:
        job = result.job
        _observe(result, None, None)  # nothing recorded: nothing counted
        logger.error(
            "job_id=%d kind=%s attempt=%d: %s; the job keeps its lease until it expires, "
            "then runs again",
            job.id,
            job.kind,
            job.attempts,
            reason,
            extra=log_fields(
                "left_to_lease", job_id=job.id, kind=job.kind, attempt=job.attempts, reason=reason
            ),
        )
        self._signals.left_to_lease.signal((job, reason))


class _Unprepared(Exception):
    """An outcome that could not be turned into a row (the message says why)."""


def _reason(result: Finished, what: str, error: BaseException) -> str:
    return f"its {result.outcome.value} outcome {what}: {describe_error(error)}"


def _as_store_error(error: BaseException) -> StoreError:
    if isinstance(error, StoreError):
        return error
    return StoreError(f"unexpected error: {describe_error(error)}")


def _observe(result: Finished, outcome: str | None, message: str | None) -> None:
    """Tell ``result``'s observer what became of it; an observer never hurts the worker."""
    if result.observer is None:
        return
    try:
        result.observer(result, outcome, message)
    except Exception:
        logger.debug(
            "observing a recorded outcome failed",
            exc_info=True,
            extra=log_fields("observe_failed", step="recorded", job_id=result.job.id),
        )


def _log_fallback(result: Finished, reason: str) -> None:
    job = result.job
    logger.error(
        "job_id=%d kind=%s attempt=%d: %s; recorded as a transient failure instead",
        job.id,
        job.kind,
        job.attempts,
        reason,
        extra=log_fields(
            "fallback_outcome", job_id=job.id, kind=job.kind, attempt=job.attempts, reason=reason
        ),
    )


def _outage(error: BaseException) -> TypeGuard[StoreError]:
    """The database is unavailable (not refusing one row): keep every outcome, back off.

    Recording them one by one then would record a fallback Failed for work that
    succeeded the moment the database answered again, and leave the rest to their leases.
    """
    return isinstance(error, StoreError) and not error.refused
