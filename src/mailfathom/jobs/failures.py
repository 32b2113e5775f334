"""The exceptions a handler raises to say how its attempt failed.

Any other exception counts as transient unless the job kind lists its type as
permanent (``@mf.job(..., permanent=(ValueError,))``).
"""

from __future__ import annotations

from datetime import timedelta

__all__ = ["PermanentFailure", "TransientFailure"]


class PermanentFailure(Exception):
    """The job can never succeed as it stands: dead-letter it now, without retrying."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TransientFailure(Exception):
    """The job may succeed later: retry after backoff, or after ``retry_after`` when given."""

    def __init__(self, reason: str, retry_after: timedelta | float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        if retry_after is not None and not isinstance(retry_after, timedelta):
            retry_after = timedelta(seconds=retry_after)
        if retry_after is not None and retry_after < timedelta(0):
            raise ValueError("retry_after must not be negative")
        self.retry_after: timedelta | None = retry_after
