"""What a worker does with an operator's abort request for an attempt it runs.

Internal, for :mod:`mailfathom.jobs.worker.worker`. The heartbeat's lease renewal returns
the jobs an operator asked to abort (one statement, no extra round trip); the
worker sets each attempt's :class:`~mailfathom.jobs.context.AbortFlag` and then
stops what can be stopped here: a coroutine is cancelled, an isolated child is
killed, a plain thread only sees ``ctx.abort_requested``. The attempt ends as
``Aborted`` (:func:`~mailfathom.jobs.worker.execute.aborted`) and the job is dead-lettered.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from mailfathom.jobs.model import Job
from mailfathom.jobs.worker.claim_ahead import ReadyJobs
from mailfathom.jobs.worker.runner import Running
from mailfathom.jobs.worker.testsignal import WorkerSignals
from mailfathom.observability.logs import log_fields

__all__ = ["flag_aborted", "stop_aborted"]

logger = logging.getLogger(__name__)


def flag_aborted(
    running: Iterable[Running], ready: ReadyJobs, aborts: dict[int, str]
) -> tuple[list[Running], list[Job]]:
    """Under the executor's lock: flag each running attempt asked to abort (once), and take
    the jobs claimed ahead that were asked out of the ready queue (they never start)."""
    victims = [
        r for r in running if r.job.id in aborts and r.abort.reason is None and not r.abandoned
    ]
    for attempt in victims:
        attempt.abort.reason = aborts[attempt.job.id]
    unstarted = ready.drop({(job.id, job.attempts) for job in ready if job.id in aborts})
    return victims, unstarted


def stop_aborted(
    victims: list[Running], unstarted: list[Job], aborts: dict[int, str], signals: WorkerSignals
) -> None:
    """Stop each flagged attempt where that is possible, and say so."""
    for job in unstarted:
        logger.warning(
            "job_id=%d kind=%s attempt=%d: %s before it started; not started",
            job.id,
            job.kind,
            job.attempts,
            aborts[job.id],
            extra=log_fields(
                "abort",
                job_id=job.id,
                kind=job.kind,
                attempt=job.attempts,
                reason=aborts[job.id],
                started=False,
            ),
        )
        signals.abort_seen.signal(job)
    for running in victims:
        job = running.job
        how = "its handler sees ctx.abort_requested" if running.mode == "thread" else "stopping it"
        logger.warning(
            "job_id=%d kind=%s attempt=%d: %s; %s",
            job.id,
            job.kind,
            job.attempts,
            aborts[job.id],
            how,
            extra=log_fields(
                "abort",
                job_id=job.id,
                kind=job.kind,
                attempt=job.attempts,
                reason=aborts[job.id],
                started=True,
                mode=running.mode,
            ),
        )
        if running.mode != "thread":
            running.cancel()
        signals.abort_seen.signal(job)
