"""Every error mailfathom raises, under one root.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Catch :class:`MailFathomError` to catch them all. Each class's docstring is its
default message, and every message says what to do next.

::

    MailFathomError
    ├── ConfigurationError        a setting is missing or malformed
    ├── StoreError                the database failed (wraps sqlite3 / psycopg errors)
    ├── NotFound                  no job, record or schedule has that id or name
    ├── IllegalTransition         the state machine refuses the change
    ├── InvalidInput              a value given to the API is unusable
    │   ├── PayloadError          a job payload is not a small JSON object
    │   └── InvalidMessage        an email cannot be recorded as given (address, header, size)
    └── LeaseLost                 a worker no longer holds the lease it acts under
"""

from __future__ import annotations

from mailfathom.redact import redact

__all__ = [
    "ConfigurationError",
    "IllegalTransition",
    "InvalidInput",
    "InvalidMessage",
    "LeaseLost",
    "MailFathomError",
    "NotFound",
    "PayloadError",
    "StoreError",
]


class MailFathomError(Exception):
    """mailfathom failed; the message says why and what to do."""

    # A message never shows a password: any connection string in it (a URL, a libpq
    # keyword string, a driver's text quoting one) is masked here, once for every error.
    def __init__(self, message: str | None = None) -> None:
        super().__init__(redact(message or (type(self).__doc__ or type(self).__name__).strip()))


class ConfigurationError(MailFathomError):
    """A setting is missing or malformed: fix the named setting and start again."""


class StoreError(MailFathomError):
    """The database failed: check that it is reachable and writable, then retry."""

    def __init__(self, message: str | None = None, *, refused: bool = False) -> None:
        """``refused``: the database turned the write down for what was in it (a CHECK, a
        type, a range, a trigger), so the same write fails however often it is retried;
        False (the default) is an outage or a conflict, which a retry can cure."""
        super().__init__(message)
        self.refused = refused


class NotFound(MailFathomError):
    """Nothing has that id or name: list what exists and use one of those."""


class IllegalTransition(MailFathomError):
    """The state machine refuses this change: nothing was modified."""

    def __init__(
        self,
        message: str | None = None,
        *,
        current: str | None = None,
        target: str | None = None,
        allowed_from: tuple[str, ...] = (),
    ) -> None:
        if message is None and current is not None and target is not None:
            allowed = ", ".join(allowed_from) or "no state"
            message = (
                f"cannot move from {current} to {target}: only {allowed} may move to {target}; "
                "nothing was modified"
            )
        super().__init__(message)
        self.current = current
        self.target = target
        self.allowed_from = allowed_from


class InvalidInput(MailFathomError, ValueError):
    """A value given to mailfathom is unusable: correct it and call again; nothing changed."""


class PayloadError(InvalidInput):
    """A job payload must be a JSON object of at most the configured size; nothing changed."""


class InvalidMessage(InvalidInput):
    """This email cannot be recorded as given (address, header or size): fix it; nothing changed."""


class LeaseLost(MailFathomError):
    """This worker's lease on the job has expired or moved on: its result was discarded."""
