"""What a worker does when an attempt it holds is interrupted from outside: its lease
was lost, or a plain thread ran past its timeout.

Internal, for :mod:`mailfathom.jobs.worker.worker` (operator aborts are in
:mod:`~mailfathom.jobs.worker.aborts`). The ``mark_*`` functions run under the worker's
lock and only flag attempts; the ``report_*``/``stop_*`` ones log and stop outside it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from mailfathom.jobs.model import Job
from mailfathom.jobs.worker.claim_ahead import ReadyJobs
from mailfathom.jobs.worker.runner import Running
from mailfathom.observability.logs import log_fields

__all__ = ["mark_lost", "mark_overruns", "report_overruns", "stop_lost"]

logger = logging.getLogger(__name__)


def mark_lost(
    running: Iterable[Running], ready: ReadyJobs, lost: set[tuple[int, int]]
) -> tuple[list[Running], list[Job]]:
    """Under the executor's lock: flag the running attempts whose (id, attempt) lease is in
    ``lost`` (once), and take the jobs claimed ahead that lost theirs (never run here)."""
    victims = [
        r for r in running if (r.job.id, r.job.attempts) in lost and not r.lost and not r.abandoned
    ]
    for attempt in victims:
        attempt.lost = True
    return victims, ready.drop(lost)


def stop_lost(victims: list[Running], gone: list[Job]) -> None:
    """Log each lost lease and stop what can be stopped (a thread cannot be)."""
    for job in gone:
        logger.warning(
            "job_id=%d kind=%s attempt=%d lost its lease before it started here; another "
            "worker may run it now",
            job.id,
            job.kind,
            job.attempts,
            extra=log_fields(
                "lease_lost", job_id=job.id, kind=job.kind, attempt=job.attempts, started=False
            ),
        )
    for attempt in victims:
        logger.warning(
            "job_id=%d kind=%s attempt=%d lost its lease (expired while this worker could "
            "not renew it); another worker may run it now: %s",
            attempt.job.id,
            attempt.job.kind,
            attempt.job.attempts,
            "a thread cannot be stopped, its outcome will be refused"
            if attempt.mode == "thread"
            else "stopping it",
            extra=log_fields(
                "lease_lost",
                job_id=attempt.job.id,
                kind=attempt.job.kind,
                attempt=attempt.job.attempts,
                started=True,
                mode=attempt.mode,
            ),
        )
        attempt.cancel()


def mark_overruns(running: Iterable[Running], now: float) -> list[Running]:
    """Under the executor's lock: flag (once) the thread attempts past their deadline."""
    late = [
        r
        for r in running
        if r.mode == "thread" and r.deadline is not None and not r.overran and now >= r.deadline
    ]
    for attempt in late:
        attempt.overran = True
    return late


def report_overruns(late: list[Running]) -> None:
    """Say what happens to a thread past its timeout (it cannot be stopped)."""
    for attempt in late:
        kind = attempt.kind
        logger.warning(
            "job_id=%d kind=%s attempt=%d ran past its %gs timeout; a thread cannot be "
            "stopped, so it keeps its lease and its slot until the handler returns, and the "
            "attempt is then recorded as ExecutionTimeout (isolation='process' stops it hard)",
            attempt.job.id,
            attempt.job.kind,
            attempt.job.attempts,
            kind.timeout.total_seconds() if kind and kind.timeout else 0,
            extra=log_fields(
                "execution_overrun",
                job_id=attempt.job.id,
                kind=attempt.job.kind,
                attempt=attempt.job.attempts,
                timeout=kind.timeout.total_seconds() if kind and kind.timeout else 0,
            ),
        )
