"""When a failed attempt runs again: exponential backoff with full jitter, capped.

Full jitter (``uniform(0, min(cap, base·2^(n-1)))``) spreads a thundering herd
of retries better than any fixed schedule; see the AWS architecture note
"Exponential Backoff And Jitter". Each job kind may bring its own ``Backoff``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

from mailfathom.errors import InvalidInput

__all__ = ["Backoff"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with full jitter.

    ``base`` is the ceiling of the first retry's delay, doubling each attempt up
    to ``cap``. The defaults (1 s, 1 h) retry fast first and never wait longer
    than an hour, so 20 attempts span roughly half a day.
    """

    base: timedelta = timedelta(seconds=1)
    cap: timedelta = timedelta(hours=1)

    def __post_init__(self) -> None:
        if self.base <= timedelta(0) or self.cap < self.base:
            raise InvalidInput("Backoff needs 0 < base <= cap")

    def ceiling(self, attempt: int) -> timedelta:
        """The longest delay after failed attempt number ``attempt`` (1-based)."""
        exponent = min(max(attempt - 1, 0), 62)
        seconds = min(self.cap.total_seconds(), self.base.total_seconds() * 2.0**exponent)
        return timedelta(seconds=seconds)

    def delay(self, attempt: int, rng: random.Random | None = None) -> timedelta:
        """A random delay in ``[0, ceiling(attempt)]``."""
        source = rng if rng is not None else random
        return self.ceiling(attempt) * source.random()
