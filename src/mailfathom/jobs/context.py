"""What a handler receives besides its payload: the job's identity, attempt and deadline."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from mailfathom.jobs.model import Job

__all__ = ["JobContext"]


@dataclass(frozen=True, slots=True)
class JobContext:
    """Passed as the first argument of every handler: ``def handler(ctx, **payload)``."""

    job: Job
    deadline: datetime | None
    logger: logging.Logger

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
