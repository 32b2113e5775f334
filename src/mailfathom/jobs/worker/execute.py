"""Runs one claimed job's handler and says how the attempt ended, as a ``Finished``.

Internal. Three ways to run a handler, one result type:

- :func:`run_sync` runs a plain function in the calling thread (a worker's pool
  thread). A thread cannot be interrupted, so its timeout is judged when it
  returns: a handler that returns (or raises) after its deadline is recorded as
  ``ExecutionTimeout`` whatever it did.
- :func:`run_async` runs an ``async def`` handler on the worker's event loop,
  cancelled at its timeout.
- Process isolation lives in :mod:`mailfathom.jobs.worker.isolation`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime, timedelta

from mailfathom.clock import Clock
from mailfathom.jobs.context import AbortFlag, JobContext
from mailfathom.jobs.failures import ResultError, Snooze
from mailfathom.jobs.model import Job
from mailfathom.jobs.queue import Finished
from mailfathom.jobs.reasons import TRACEBACK_LIMIT, reason_of, storable, traceback_text
from mailfathom.jobs.registry import JobKind
from mailfathom.jobs.result import encode_result
from mailfathom.jobs.slots import positional_builder
from mailfathom.jobs.state import AttemptOutcome

__all__ = [
    "aborted",
    "context_for",
    "failed",
    "returned",
    "run_async",
    "run_sync",
    "shutdown_timed_out",
    "succeeded",
    "timed_out",
    "unknown_kind",
]

#: The logger handlers get as ``ctx.logger``: one name of its own, apart from the
#: worker's modules (``mailfathom.jobs.*``), so either can be filtered alone.
handler_logger = logging.getLogger("mailfathom.handlers")

#: ``JobContext(job, deadline, logger, abort)`` and ``Finished(job, outcome, error,
#: traceback, message, started_at, observer, result)``, positionally, made without ``__init__``: the
#: worker makes one of each per attempt (:mod:`mailfathom.jobs.slots`).
_context = positional_builder(JobContext)
_finished = positional_builder(Finished)
_SUCCEEDED = AttemptOutcome.SUCCEEDED


def context_for(
    kind: JobKind, job: Job, started: datetime, abort: AbortFlag | None = None
) -> JobContext:
    """The context a handler receives: the job, its deadline, a logger, its abort flag."""
    deadline = started + kind.timeout if kind.timeout is not None else None
    return _context(job, deadline, handler_logger, AbortFlag() if abort is None else abort)


def run_sync(kind: JobKind, job: Job, clock: Clock, abort: AbortFlag | None = None) -> Finished:
    """Call a plain handler here and now; never raises for what the handler does."""
    started = clock.now()
    context = context_for(kind, job, started, abort)
    began = time.monotonic()
    try:
        value = kind.handler(context, **job.payload)
    except BaseException as exc:  # a handler's SystemExit must not kill a pool thread
        if _overran(kind, began):
            return timed_out(job, kind.timeout, started, exc)
        return failed(job, exc, started)
    if kind.timeout is not None and _overran(kind, began):
        return timed_out(job, kind.timeout, started, None)
    if value is None:
        return _finished(job, _SUCCEEDED, None, None, None, started)
    return returned(kind, job, value, started)


async def run_async(
    kind: JobKind, job: Job, clock: Clock, abort: AbortFlag | None = None
) -> Finished:
    """Await an ``async def`` handler, cancelling it at its timeout; never raises for
    what the handler does.

    The handler runs in this very task (``asyncio.timeout``, not a task of its own),
    so that whatever it raises, ``SystemExit`` and ``KeyboardInterrupt`` included,
    is caught here and never reaches the event loop, which asyncio would stop. A
    ``CancelledError`` the handler raises itself is its failure; a cancellation
    from outside (shutdown, a lost lease, an abort: the task is being cancelled)
    propagates.
    """
    started = clock.now()
    context = context_for(kind, job, started, abort)
    if kind.timeout is None:  # no deadline to keep: no timeout scope to pay for
        try:
            value = await kind.handler(context, **job.payload)
        except asyncio.CancelledError as exc:
            if _cancelled_from_outside():
                raise  # the runner drops the attempt
            return failed(job, exc, started)
        except BaseException as exc:  # a handler's SystemExit must not stop the event loop
            return failed(job, exc, started)
        if value is None:
            return _finished(job, _SUCCEEDED, None, None, None, started)
        return returned(kind, job, value, started)
    deadline = asyncio.timeout(kind.timeout.total_seconds())
    try:
        async with deadline:
            value = await kind.handler(context, **job.payload)
    except TimeoutError as exc:
        if deadline.expired():
            return timed_out(job, kind.timeout, started, None)
        return failed(job, exc, started)
    except asyncio.CancelledError as exc:
        if _cancelled_from_outside():
            raise  # cancelled from outside: the runner drops the attempt
        return failed(job, exc, started)
    except BaseException as exc:  # a handler's SystemExit must not stop the event loop
        return failed(job, exc, started)
    return returned(kind, job, value, started)


def _cancelled_from_outside() -> bool:
    """The running task is being cancelled (shutdown, a lost lease, an abort), rather
    than the handler raising ``CancelledError`` of its own."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _overran(kind: JobKind, began: float) -> bool:
    return kind.timeout is not None and time.monotonic() - began >= kind.timeout.total_seconds()


def succeeded(job: Job, started: datetime, result: str | None = None) -> Finished:
    """The handler returned (``result``: what it returned, as JSON text; None: None)."""
    return _finished(job, _SUCCEEDED, None, None, None, started, None, result)


def returned(kind: JobKind, job: Job, value: object, started: datetime) -> Finished:
    """The handler returned ``value``: succeeded with it as the job's result, or failed
    (permanently) with a :class:`ResultError` when it cannot be stored as JSON."""
    try:
        text = encode_result(kind, value)
    except ResultError as exc:
        return failed(job, exc, started)
    return _finished(job, _SUCCEEDED, None, None, None, started, None, text)


def aborted(job: Job, reason: str, started: datetime | None, ended: Finished | None) -> Finished:
    """An operator aborted the attempt (``ended``: what the handler did meanwhile, if it
    ended at all). A handler that returned anyway keeps its success: the work was done."""
    if ended is not None and ended.outcome is AttemptOutcome.SUCCEEDED:
        return ended
    return Finished(
        job=job,
        outcome=AttemptOutcome.ABORTED,
        error=ended.error if ended is not None else None,
        message=reason,
        traceback=ended.traceback if ended is not None else None,
        started_at=started,
    )


def unknown_kind(job: Job, started: datetime) -> Finished:
    """No handler for the job's kind here: transient, so a rolling deploy heals itself."""
    return Finished(
        job=job,
        outcome=AttemptOutcome.UNKNOWN_KIND,
        message=f"no handler for kind {job.kind!r} is registered on this worker",
        started_at=started,
    )


def failed(job: Job, exc: BaseException, started: datetime, tb: str | None = None) -> Finished:
    """The handler raised ``exc`` (``tb``: its traceback text, when it was raised elsewhere).

    Reads the exception's reason and traceback here, on the thread that ran the
    handler, so that the worker's loop never runs the exception's own code; never
    raises, whatever ``exc`` does when printed. A :class:`Snooze` is not a failure and
    records neither (it may come on every attempt): none is read for it.
    """
    if issubclass(type(exc), Snooze):
        return Finished(job=job, outcome=AttemptOutcome.FAILED, error=exc, started_at=started)
    return Finished(
        job=job,
        outcome=AttemptOutcome.FAILED,
        error=exc,
        traceback=traceback_text(exc)
        if tb is None
        else storable(tb, TRACEBACK_LIMIT, keep_end=True),
        message=reason_of(exc),
        started_at=started,
    )


def timed_out(
    job: Job,
    timeout: timedelta | None,
    started: datetime,
    exc: BaseException | None,
    *,
    how: str = "",
) -> Finished:
    """The handler ran past its kind's timeout."""
    limit = f"{timeout.total_seconds():g} s " if timeout is not None else ""
    return Finished(
        job=job,
        outcome=AttemptOutcome.EXECUTION_TIMEOUT,
        message=f"ran past its {limit}timeout{how}",
        traceback=traceback_text(exc) if exc is not None else None,
        started_at=started,
    )


def shutdown_timed_out(job: Job, started: datetime | None, grace: float, how: str) -> Finished:
    """Still running when the worker's shutdown grace period ran out."""
    return Finished(
        job=job,
        outcome=AttemptOutcome.SHUTDOWN_TIMEOUT,
        message=f"still running when the worker's {grace:g} s shutdown grace period ran out; "
        f"released for another worker ({how})",
        started_at=started,
    )
