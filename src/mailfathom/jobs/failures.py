"""The exceptions a handler raises to say how its attempt failed.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Any other exception counts as transient unless the job kind lists its type as
permanent (``@mf.job(..., permanent=(ValueError,))``).
"""

from __future__ import annotations

from datetime import timedelta

__all__ = ["JobAborted", "PermanentFailure", "ResultError", "Snooze", "TransientFailure"]


class PermanentFailure(Exception):
    """The job can never succeed as it stands: dead-letter it now, without retrying."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ResultError(PermanentFailure):
    """The handler returned a value that cannot be stored as its job's result: not JSON
    that reads back as the same value (a ``datetime``, a ``set``, a ``tuple``...), or
    larger than ``max_payload_bytes``. The worker records the attempt as failed with
    this error, permanently: the job is dead-lettered, as Django's task backends fail a
    task whose return value is not JSON. The handler's work was done: fix what it
    returns before requeueing the job (which runs it again)."""


class TransientFailure(Exception):
    """The job may succeed later: retry after backoff, or after ``retry_after`` when given.

    ``retry_after`` is a :class:`~datetime.timedelta` or a number of seconds. A
    number is kept as a timedelta; what cannot be one (a negative delay, NaN,
    infinity, a value past a timedelta's range, another type) is kept as given,
    and the worker then decides and says so in the attempt's reason: a delay over
    a year waits a year, anything else that is not a delay retries after the
    kind's backoff. Raising it never fails on its ``retry_after``.
    """

    def __init__(self, reason: str, retry_after: timedelta | float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after: timedelta | float | None = _as_delay(retry_after)


_LONGEST_SECONDS = timedelta.max.total_seconds() // 2


def _as_delay(given: timedelta | float | None) -> timedelta | float | None:
    """A number of seconds as a timedelta when it can be one; anything else as given."""
    if isinstance(given, bool) or not isinstance(given, (int, float)):
        return given
    try:
        if 0 <= given <= _LONGEST_SECONDS:
            return timedelta(seconds=given)
    except Exception:  # a number subclass that misbehaves: the worker says so
        return given
    return given


class Snooze(Exception):
    """Put the job back for ``seconds`` without spending an attempt: ``raise Snooze(60)``.

    For a handler that finds it is too early (a resource not ready, a rate limit): the
    job returns to Pending at now + ``seconds``, the attempt is recorded as ``Snoozed``
    and is not counted against ``max_attempts``. After the ``snooze_limit`` setting's
    number of snoozes (default 100) a snooze counts as a transient failure instead, so a
    handler that snoozes forever still ends in the dead letters.
    """

    def __init__(self, seconds: timedelta | float) -> None:
        if isinstance(seconds, timedelta):
            seconds = seconds.total_seconds()
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, (int, float))
            or not 0 <= seconds <= 366 * 86400
        ):
            raise ValueError(f"Snooze takes 0 to 31622400 seconds (a year), not {seconds!r}")
        super().__init__(float(seconds))  # args: what pickling needs to rebuild it
        self.seconds = float(seconds)

    def __str__(self) -> str:
        return f"snoozed for {self.seconds:g} s"


class JobAborted(Exception):
    """An operator aborted this attempt: raised by ``ctx.raise_if_aborted()``.

    Let it propagate: the attempt is recorded as ``Aborted`` and the job dead-lettered
    as permanent, with the operator's name and reason.
    """

    def __init__(self, reason: str = "aborted by an operator") -> None:
        super().__init__(reason)
        self.reason = reason
