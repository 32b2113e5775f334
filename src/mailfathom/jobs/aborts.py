"""What a worker does with an operator's abort request for an attempt it runs.

Internal, for :mod:`mailfathom.jobs.worker`. The heartbeat's lease renewal returns
the jobs an operator asked to abort (one statement, no extra round trip); the
worker sets each attempt's :class:`~mailfathom.jobs.context.AbortFlag` and then
stops what can be stopped here: a coroutine is cancelled, an isolated child is
killed, a plain thread only sees ``ctx.abort_requested``. The attempt ends as
``Aborted`` (:func:`~mailfathom.jobs.execute.aborted`) and the job is dead-lettered.
"""

from __future__ import annotations

import logging

from mailfathom.jobs.runner import Running
from mailfathom.jobs.testsignal import WorkerSignals

__all__ = ["stop_aborted"]

logger = logging.getLogger("mailfathom.worker")


def stop_aborted(victims: list[Running], aborts: dict[int, str], signals: WorkerSignals) -> None:
    """Stop each flagged attempt where that is possible, and say so."""
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
            extra={"mailfathom": {"job_id": job.id, "action": "abort"}},
        )
        if running.mode != "thread":
            running.cancel()
        signals.abort_seen.signal(job)
