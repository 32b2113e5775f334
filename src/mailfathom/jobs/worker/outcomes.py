"""Finished attempts whose outcome is not recorded yet, and how a worker rides out outages.

Internal, for :mod:`mailfathom.jobs.worker.recorder`. :class:`Unrecorded` holds results from
the moment a handler ends until the store has them: the recorder takes them in
batches, puts a batch back when the database fails, and the heartbeat keeps
renewing their leases meanwhile, so no outcome the worker could still record
is lost. :class:`Outage` is the worker's back-off while the database fails.
"""

from __future__ import annotations

import logging
import random
import threading
import time

from mailfathom.errors import StoreError
from mailfathom.jobs.model import Job
from mailfathom.jobs.queue import Finished
from mailfathom.observability.logs import log_fields

__all__ = ["Outage", "Unrecorded"]

logger = logging.getLogger(__name__)


class Unrecorded:
    """Thread-safe: results waiting to be recorded, and the batch being recorded now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: list[Finished] = []
        self._recording: list[Finished] = []
        self._since = 0.0  # monotonic instant the oldest waiting result arrived

    def add(self, result: Finished) -> None:
        """A handler ended: keep its result until it is recorded."""
        with self._lock:
            if not self._waiting:
                self._since = time.monotonic()
            self._waiting.append(result)

    def __len__(self) -> int:
        return len(self._waiting)

    def age(self, now: float) -> float:
        """Seconds the oldest waiting result has waited (0 when none waits)."""
        return now - self._since if self._waiting else 0.0

    def empty(self) -> bool:
        """Nothing waits and nothing is being recorded."""
        with self._lock:
            return not self._waiting and not self._recording

    def take(self) -> list[Finished]:
        """Every waiting result, now being recorded."""
        with self._lock:
            batch, self._waiting = self._waiting, []
            self._recording = list(batch)
        return batch

    def put_back(self, batch: list[Finished]) -> None:
        """Recording ``batch`` failed: it waits again, ahead of newer results."""
        with self._lock:
            self._waiting = batch + self._waiting
            if self._waiting:
                self._since = time.monotonic()
            self._recording = _without(self._recording, batch)

    def recorded(self, batch: list[Finished], lost: set[int]) -> None:
        """The store has ``batch``; it refused the ids in ``lost`` (their lease had moved on)."""
        with self._lock:
            self._recording = _without(self._recording, batch)
        for result in batch:
            if result.job.id in lost:
                logger.warning(
                    "job_id=%d kind=%s attempt=%d: its lease was lost before its outcome (%s) "
                    "could be recorded; the outcome is discarded and the job runs again",
                    result.job.id,
                    result.job.kind,
                    result.job.attempts,
                    result.outcome.value,
                    extra=log_fields(
                        "outcome_discarded",
                        job_id=result.job.id,
                        kind=result.job.kind,
                        attempt=result.job.attempts,
                        outcome=result.outcome.value,
                    ),
                )

    def settle(self) -> None:
        """The batch being recorded is dealt with, whatever became of each result."""
        with self._lock:
            self._recording = []

    def jobs(self) -> list[Job]:
        """The jobs whose leases must be kept until their outcome is recorded."""
        with self._lock:
            return [r.job for r in self._waiting] + [r.job for r in self._recording]

    def waiting(self) -> list[Finished]:
        """A copy of the waiting results."""
        with self._lock:
            return list(self._waiting)


def _without(recording: list[Finished], batch: list[Finished]) -> list[Finished]:
    if len(batch) >= len(recording):
        return []  # the whole batch (the hot path)
    gone = {id(result) for result in batch}
    return [result for result in recording if id(result) not in gone]


class Outage:
    """While the database fails: log, wait (0.1 s doubling, with jitter, up to ``limit``),
    try again; say so once it answers."""

    def __init__(self, worker_id: str, *, limit: float) -> None:
        self._worker_id = worker_id
        self._limit = limit
        self._backoff = 0.0
        self._failing = False
        #: monotonic instant before which the worker makes no database call
        self.retry_at = 0.0

    def blocked(self, now: float) -> bool:
        """True while the worker should leave the database alone."""
        return now < self.retry_at

    def blocked_now(self) -> bool:
        """:meth:`blocked` at this moment."""
        return time.monotonic() < self.retry_at

    def failed(self, doing: str, exc: StoreError) -> None:
        """A database call failed while ``doing`` something: log it and back off."""
        self._backoff = min(max(self._backoff * 2, 0.1), self._limit)
        pause = self._backoff * (0.5 + random.random() / 2)
        self.retry_at = time.monotonic() + pause
        logger.log(
            logging.WARNING if self._failing else logging.ERROR,
            "worker=%s database failed while %s: %s; retrying in %.1fs (running jobs go on; "
            "their outcomes are kept until they can be recorded)",
            self._worker_id,
            doing,
            exc,
            pause,
            extra=log_fields(
                "database_failed",
                worker=self._worker_id,
                doing=doing,
                error=str(exc),
                retry_in=round(pause, 3),
            ),
        )
        self._failing = True

    def ok(self) -> None:
        """A database call succeeded."""
        if self._failing:
            logger.warning(
                "worker=%s the database answers again",
                self._worker_id,
                extra=log_fields("database_recovered", worker=self._worker_id),
            )
        self._failing = False
        self._backoff = 0.0
        self.retry_at = 0.0
