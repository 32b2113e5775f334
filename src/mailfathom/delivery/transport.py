"""Transports: what submits a recorded message's frozen bytes, behind one small interface.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules; it
exports :class:`Transport`, :class:`Submission` and :class:`SmtpTransport`).

The delivery stage machine (:mod:`mailfathom.delivery.deliver`) is the same whatever
carries the bytes: it counts the attempt, hands the transport a :class:`Submission`,
and writes the :class:`~mailfathom.delivery.smtp.Outcome` the transport returns. A
transport owes it one discipline: call ``submission.begin()`` — which durably commits
TransmissionBegun — after the last step that can fail without anything going out and
before the first byte of the message leaves, and never send when it returns False or
raises. Then what the outcome says is exact:

- ``sent``: the server or provider accepted the message (2xx);
- ``retry``: nothing was delivered, try later (the record returns to Recorded);
- ``refused``: refused for good, with the reason (Refused);
- ``unknown``: the bytes went out and no answer came (a timeout or a connection lost
  after the request was sent): the record stays TransmissionBegun for an operator;
- ``withdrawn``: ``begin()`` returned False (the record was cancelled or expired).

A ``retry`` whose cause is the transport's own configuration (an API key the provider
refuses) also says what to fix in ``Outcome.configuration``: delivery then pauses
without spending any message's attempts, as for SMTP's refused password
(:mod:`mailfathom.delivery.deliver`).

An outcome reached after ``begin()`` carries ``phase=Phase.REPLY`` (the answer to
what was sent); one reached before it, any earlier phase (``Phase.CONNECT`` …).
Failing to reach the server at all may also be raised as
:class:`~mailfathom.delivery.smtp.SessionFailure` (retried like ``retry``).

:class:`SmtpTransport` is the transport ``smtp_url`` configures; pass another one to
``MailFathom(transport=...)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from mailfathom.clock import Clock
from mailfathom.delivery.phases import PhaseHook, no_phase_hook
from mailfathom.delivery.pool import SessionPool
from mailfathom.delivery.smtp import Outcome, Phase, Reply, SessionFailure, SmtpSession
from mailfathom.delivery.smtp_url import SmtpTarget
from mailfathom.observability import tracing
from mailfathom.observability.hooks import submission_ended, traced_phases

__all__ = [
    "Outcome",
    "Phase",
    "Reply",
    "SessionFailure",
    "SmtpTransport",
    "Submission",
    "Transport",
]


@dataclass(frozen=True, slots=True)
class Submission:
    """One delivery attempt of one record, as a transport sees it.

    ``recipients`` are the ``(position, address)`` pairs still owed, in envelope order
    (suppressed addresses are already left out); ``data`` the exact frozen bytes.
    ``begin()`` commits TransmissionBegun and returns True, or False when the record
    moved on (then nothing may be sent); call it exactly once, right before the bytes
    leave. ``on_phase`` is the test seam of :mod:`mailfathom.delivery.phases`.
    ``answered_at`` is when a server or provider last answered for a recipient still
    owed (None: never): a transport that sends an idempotency key folds it in, so that
    a request repeated after a lost answer carries the same key, and one made after a
    definite answer (a recipient deferred) a new one.
    """

    email_id: int
    attempt: int
    message_id: str
    sender: str
    recipients: Sequence[tuple[int, str]]
    data: bytes
    smtputf8: bool
    eightbit: bool
    begin: Callable[[], bool]
    clock: Clock
    on_phase: PhaseHook = no_phase_hook
    answered_at: datetime | None = None


@runtime_checkable
class Transport(Protocol):
    """What submits the frozen bytes: SMTP, or a provider's HTTP API.

    ``name`` says which (``"smtp"``, ``"resend"`` …) in logs. ``submit`` runs one
    attempt from the delivering thread (several threads call it at once) and returns
    how it ended; ``close`` releases idle connections when the application closes.
    """

    name: str

    def submit(self, submission: Submission) -> Outcome:
        """Offer the message once; see :mod:`mailfathom.delivery.transport` for the rules."""
        ...

    def close(self) -> None:
        """Release idle connections (called when the application closes)."""
        ...


class SmtpTransport:
    """Submission to one SMTP server, on up to ``sessions`` pooled connections.

    The staged submission of :mod:`mailfathom.delivery.smtp`: TransmissionBegun is
    committed between the server's 354 and the first byte of the body.
    """

    name = "smtp"

    def __init__(
        self, target: SmtpTarget, *, timeout: float, data_timeout: float, sessions: int = 16
    ) -> None:
        #: The SMTP server deliveries go to.
        self.target = target
        self._pool = SessionPool(
            target, timeout=timeout, data_timeout=data_timeout, sessions=sessions
        )

    def close(self) -> None:
        """Close the idle SMTP connections."""
        self._pool.close()

    def submit(self, submission: Submission) -> Outcome:
        """One mail transaction on a pooled session. A reused session that turns out to
        be gone at its first command (the server hung up or said 421 while it idled)
        has sent nothing, so the message is offered once more on a new session.
        Raises :class:`SessionFailure` when no session can be set up."""
        pool = self._pool
        session = pool.acquire()
        outcome = self._offer(session, submission)
        gone = outcome.phase is Phase.MAIL and session.reused and not session.usable
        if outcome.kind == "retry" and gone:
            outcome = self._offer(pool.open(), submission)
        return outcome

    def _offer(self, session: SmtpSession, submission: Submission) -> Outcome:
        with tracing.span(
            "smtp submission",
            **{"mailfathom.email.id": submission.email_id, "mailfathom.transport": self.name},
        ) as span:
            on_phase = (
                submission.on_phase if span is None else traced_phases(span, submission.on_phase)
            )
            try:
                outcome = session.transact(
                    sender=submission.sender,
                    recipients=submission.recipients,
                    data=submission.data,
                    smtputf8=submission.smtputf8,
                    eightbit=submission.eightbit,
                    begin=submission.begin,
                    clock=submission.clock,
                    on_phase=on_phase,
                )
            finally:
                self._pool.release(session)
            submission_ended(outcome, span)
        return outcome
