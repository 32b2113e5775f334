"""What an attempt's end is worth to metrics, traces and logs, told once it is committed.

Internal, for :mod:`mailfathom.jobs.worker.executor` and
:mod:`mailfathom.jobs.worker.recorder`. When an attempt ends, the worker only notes how
long it ran; the ``outcome=…`` line, the attempt counter, the duration and start-lag
histograms and the attempt's span all wait until the recorder has committed the outcome
(:class:`Observed` is the result's ``observer``). A crash before the commit, an outcome
whose write fails, or a lease that moved on (the outcome is discarded and the job runs
again) is therefore never counted or logged as an attempt that ended so: what the
metrics say happened, the database holds.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from mailfathom.jobs.queue import Finished
from mailfathom.jobs.slots import positional_builder
from mailfathom.jobs.state import AttemptOutcome
from mailfathom.jobs.worker.runner import Running, log_attempt
from mailfathom.observability.hooks import attempt_ended, attempt_stopped
from mailfathom.observability.logs import log_fields

__all__ = ["Observed", "observed"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Observed:
    """The observer of one attempt of ``running`` on worker ``worker``, which ended at
    ``ended`` (``time.monotonic()``)."""

    running: Running
    worker: str
    ended: float

    def __call__(self, result: Finished, outcome: str | None, message: str | None) -> None:
        """The store committed ``outcome`` (with ``message``) for ``result``'s attempt, or
        nothing (``outcome`` None: the lease had moved on, the outcome was discarded)."""
        running = self.running
        if outcome is None:
            attempt_stopped(running, "Discarded", "its lease had moved on; nothing recorded")
            return
        duration = self.ended - running.began
        attempt_ended(running, outcome, message, duration=duration)
        if outcome != result.outcome.value:  # the fallback was recorded instead
            result = dataclasses.replace(
                result,
                outcome=AttemptOutcome(outcome),
                message=message,
                error=None,
                traceback=None,
            )
        try:
            log_attempt(running, result, self.worker, duration=duration)
        except Exception as exc:  # a result that cannot be printed must not stop us
            job = running.job
            logger.warning(
                "job_id=%d kind=%s attempt=%d outcome=%s (its log line failed: %s)",
                job.id,
                job.kind,
                job.attempts,
                outcome,
                type(exc).__name__,
                extra=log_fields(
                    "attempt",
                    job_id=job.id,
                    kind=job.kind,
                    attempt=job.attempts,
                    outcome=outcome,
                    error=type(exc).__name__,
                ),
            )


_finished = positional_builder(Finished)
_observed = positional_builder(Observed)


def observed(result: Finished, running: Running, worker: str, ended: float) -> Finished:
    """``result`` with an :class:`Observed` of ``running`` as its observer (the attempt
    ended at ``ended``, ``time.monotonic()``). The same object ``dataclasses.replace``
    makes, built directly: the executor makes one per attempt, and ``replace`` (which
    goes through ``__init__``'s keywords and reads every field by name) costs five
    times as much."""
    return _finished(
        result.job,
        result.outcome,
        result.error,
        result.traceback,
        result.message,
        result.started_at,
        _observed(running, worker, ended),
        result.result,
    )
