"""Back-off for failed logins and bearer tokens, per client address, and the security log.

Internal. After :data:`FREE_FAILURES` failures from one address, each further
failure closes that address for twice as long as the one before (1 s, 2 s, 4 s
… up to :data:`LONGEST_BLOCK`); while it is closed every wrong attempt from it
is answered 429 with ``Retry-After``. The callers check the right token first
(in constant time), so it always gets in: a guesser sharing the owner's address
(a proxy, the same machine) cannot lock the owner out. A success clears the
address's record. The defence against guessing is the token's strength
(:mod:`mailfathom.web.tokens`); this is the brake and the log.

The counts live in the process's memory: each console process keeps its own
(a restart forgets them). Behind a reverse proxy every request seems to come
from the proxy's address; throttle there too (see docs/console.md).

Every refusal is logged by :func:`log_refusal` on the ``mailfathom.web.security``
logger at WARNING, with structured ``extra`` fields (``security_event``,
``client``, ``method``, ``path`` and the details) for a log shipper.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from starlette.requests import HTTPConnection

__all__ = ["FREE_FAILURES", "LONGEST_BLOCK", "Throttle", "client_address", "log_refusal"]

FREE_FAILURES = 5
LONGEST_BLOCK = timedelta(minutes=15)
#: Addresses remembered at most (the oldest are forgotten first).
_REMEMBERED = 10_000

security_log = logging.getLogger("mailfathom.web.security")


@dataclass(slots=True)
class _Record:
    failures: int
    blocked_until: datetime | None


class Throttle:
    """Failed authentication attempts per client address, with a time source."""

    def __init__(self, now: Callable[[], datetime]) -> None:
        self._now = now
        self._records: OrderedDict[str, _Record] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after(self, address: str) -> int | None:
        """Whole seconds until ``address`` may try again, or None if it may now."""
        with self._lock:
            record = self._records.get(address)
            if record is None or record.blocked_until is None:
                return None
            left = (record.blocked_until - self._now()).total_seconds()
        return math.ceil(left) if left > 0 else None

    def failed(self, address: str) -> None:
        """Count a failed attempt; past the free ones, close the address for a while."""
        with self._lock:
            record = self._records.pop(address, None) or _Record(0, None)
            record.failures += 1
            if record.failures >= FREE_FAILURES:
                seconds = 2 ** min(record.failures - FREE_FAILURES, 20)
                block = min(timedelta(seconds=seconds), LONGEST_BLOCK)
                record.blocked_until = self._now() + block
            self._records[address] = record
            while len(self._records) > _REMEMBERED:
                self._records.popitem(last=False)

    def succeeded(self, address: str) -> None:
        """Forget ``address``'s failures."""
        with self._lock:
            self._records.pop(address, None)


def client_address(connection: HTTPConnection) -> str:
    """The peer's address as the server saw it (not any forwarded-for header)."""
    return connection.client.host if connection.client else "unknown"


def log_refusal(connection: HTTPConnection, event: str, message: str, **details: Any) -> None:
    """Log one refused request: what was refused, from where, and why."""
    fields = {
        "security_event": event,
        "client": client_address(connection),
        "method": connection.scope.get("method", ""),
        "path": connection.url.path[:200],
        **details,
    }
    security_log.warning(
        "console refused %s from %s: %s", event, fields["client"], message, extra=fields
    )
