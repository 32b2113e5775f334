"""Runs one claimed job's handler in the calling thread and says how the attempt ended.

Internal. ``async def`` handlers run on an event loop with their timeout
enforced by cancellation; a sync handler in a thread cannot be interrupted, so
its timeout is checked when it returns (a kind needing a hard stop uses process
isolation, run by the worker).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import traceback
from datetime import datetime, timedelta

from mailfathom.clock import Clock
from mailfathom.jobs.context import JobContext
from mailfathom.jobs.model import Job
from mailfathom.jobs.queue import Finished
from mailfathom.jobs.registry import JobKind
from mailfathom.jobs.state import AttemptOutcome

__all__ = ["execute"]

logger = logging.getLogger("mailfathom.jobs")


def execute(
    kind: JobKind | None,
    job: Job,
    clock: Clock,
    *,
    loop: asyncio.AbstractEventLoop | None = None,
) -> Finished:
    """Run ``job`` with ``kind``'s handler; never raises for what the handler does."""
    started = clock.now()
    if kind is None:
        return Finished(
            job=job,
            outcome=AttemptOutcome.UNKNOWN_KIND,
            message=f"no handler for kind {job.kind!r} is registered on this worker",
            started_at=started,
        )
    deadline = started + kind.timeout if kind.timeout is not None else None
    context = JobContext(job=job, deadline=deadline, logger=logger)
    began = time.monotonic()
    try:
        if inspect.iscoroutinefunction(kind.handler):
            _run_async(kind, context, job, loop)
        else:
            kind.handler(context, **job.payload)
    except TimeoutError as exc:
        if kind.timeout is not None and time.monotonic() - began >= kind.timeout.total_seconds():
            return _timed_out(job, kind.timeout, started, exc)
        return _failed(job, exc, started)
    except Exception as exc:
        return _failed(job, exc, started)
    if kind.timeout is not None and time.monotonic() - began > kind.timeout.total_seconds():
        return _timed_out(job, kind.timeout, started, None)
    return Finished(job=job, outcome=AttemptOutcome.SUCCEEDED, started_at=started)


def _run_async(
    kind: JobKind, context: JobContext, job: Job, loop: asyncio.AbstractEventLoop | None
) -> None:
    seconds = kind.timeout.total_seconds() if kind.timeout is not None else None
    coroutine = asyncio.wait_for(kind.handler(context, **job.payload), seconds)
    if loop is None:
        asyncio.run(coroutine)
    else:
        asyncio.run_coroutine_threadsafe(coroutine, loop).result()


def _failed(job: Job, exc: BaseException, started: datetime) -> Finished:
    return Finished(
        job=job,
        outcome=AttemptOutcome.FAILED,
        error=exc,
        traceback="".join(traceback.format_exception(exc)),
        started_at=started,
    )


def _timed_out(
    job: Job, timeout: timedelta, started: datetime, exc: BaseException | None
) -> Finished:
    return Finished(
        job=job,
        outcome=AttemptOutcome.EXECUTION_TIMEOUT,
        message=f"ran past its {timeout.total_seconds():g} s timeout",
        traceback="".join(traceback.format_exception(exc)) if exc is not None else None,
        started_at=started,
    )
