"""What a handler receives besides its payload: the job's identity, attempt and deadline.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from mailfathom.jobs.failures import JobAborted
from mailfathom.jobs.model import Job

__all__ = ["AbortFlag", "JobContext"]


class AbortFlag:
    """Internal: set by the worker when an operator aborts the attempt (a plain attribute,
    cheaper per attempt than an Event; a thread handler polls it)."""

    __slots__ = ("reason",)

    def __init__(self) -> None:
        self.reason: str | None = None


@dataclass(frozen=True, slots=True)
class JobContext:
    """Passed as the first argument of every handler: ``def handler(ctx, **payload)``."""

    job: Job
    deadline: datetime | None
    logger: logging.Logger
    abort: AbortFlag = field(default_factory=AbortFlag, repr=False)

    @property
    def job_id(self) -> int:
        """The job's id."""
        return self.job.id

    @property
    def kind(self) -> str:
        """The job's kind."""
        return self.job.kind

    @property
    def attempt(self) -> int:
        """Which attempt this is, counting from 1 (lost attempts included)."""
        return self.job.attempts

    @property
    def abort_requested(self) -> bool:
        """True once an operator asked to abort this attempt (seen at the next heartbeat).

        A plain (thread) handler cannot be stopped from outside: a long one checks this,
        or calls :meth:`raise_if_aborted`, between steps.
        """
        return self.abort.reason is not None

    def raise_if_aborted(self) -> None:
        """Raise :class:`~mailfathom.JobAborted` if an operator asked to abort this attempt."""
        reason = self.abort.reason
        if reason is not None:
            raise JobAborted(reason)
