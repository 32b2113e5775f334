"""The outbox's protocols, one per concern: records, operator moves, delivery attempts.

Internal. Every write is one transaction and every stage change is a conditional
update on the stage it starts from: two racing writers can never both win.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Protocol

from mailfathom.store.outbox.rows import (
    AttemptEnd,
    AttemptStart,
    CancelOutcome,
    DeliveryJobSpec,
    DomainPart,
    EmailRow,
    NewEmail,
    OperatorResolve,
    OutboxEventRow,
    RecipientRow,
    RecordedRows,
)

__all__ = ["OutboxAttemptsStore", "OutboxMovesStore", "OutboxRecordsStore"]


class OutboxRecordsStore(Protocol):
    """Outgoing emails recorded (with their delivery jobs), read and listed.

    Implemented by :class:`~mailfathom.store.outbox.records.OutboxRecords`.
    """

    def insert_email(
        self,
        email: NewEmail,
        job: DeliveryJobSpec,
        *,
        now: datetime,
        connection: object | None = None,
        parts: Sequence[DomainPart] = (),
    ) -> RecordedRows:
        """Write the record, its recipients and its delivery job in one transaction.

        Returns the record, its recipients and True; an existing idempotency key
        returns that record and its recipients with False, and writes nothing (with
        the message's parts, when it has several records).
        ``parts`` are the recipients at further domains (per-domain throttling): each
        becomes a linked record (``parent_id``) with its own delivery job, in the same
        transaction, only when the first record is new.
        """
        ...

    def insert_emails(
        self,
        emails: Sequence[NewEmail],
        job: DeliveryJobSpec,
        *,
        now: datetime,
        connection: object | None = None,
        parts: Sequence[Sequence[DomainPart]] | None = None,
    ) -> list[RecordedRows]:
        """:meth:`insert_email` for every record of a batch, all in one transaction.

        Results are in the order of ``emails``; an existing idempotency key gives that
        record and False, and writes nothing for it. ``parts``, when given, holds each
        email's further domains (as for :meth:`insert_email`).
        """
        ...

    def insert_email_chunks(
        self,
        chunks: Iterable[tuple[Sequence[NewEmail], Sequence[Sequence[DomainPart]]]],
        job: DeliveryJobSpec,
        *,
        now: datetime,
        connection: object | None = None,
        done: Callable[[list[RecordedRows]], None],
    ) -> None:
        """:meth:`insert_emails` for a batch given chunk by chunk (each: its emails and
        their further parts), all in ONE transaction, handing each chunk's results to
        ``done`` in turn; an error raised by ``chunks`` itself (a bad message found late)
        rolls back every chunk before it."""
        ...

    def get_email(self, email_id: int) -> EmailRow | None:
        """The record, or None."""
        ...

    def email_message(self, email_id: int) -> bytes | None:
        """The record's frozen bytes, or None."""
        ...

    def recipients(self, email_ids: Sequence[int]) -> dict[int, list[RecipientRow]]:
        """The recipients of each record, in envelope order."""
        ...

    def list_emails(
        self, stage: str | None, *, limit: int, before_id: int | None = None
    ) -> list[EmailRow]:
        """Records newest first, ``limit`` at most, older than ``before_id`` when given."""
        ...

    def unknown_emails(
        self, *, now: datetime, limit: int, after_id: int | None = None
    ) -> list[EmailRow]:
        """TransmissionBegun records whose delivery job is not running under a live lease,
        oldest first, ``limit`` at most, newer than ``after_id`` when given."""
        ...

    def count_unknown_emails(self, *, now: datetime) -> int:
        """How many records :meth:`unknown_emails` would list in all, exactly."""
        ...

    def count_emails(self) -> dict[str, int]:
        """How many records are in each stage (stages with none are absent)."""
        ...

    def events(self, email_id: int) -> list[OutboxEventRow]:
        """The record's audit trail, oldest first."""
        ...

    def recent_events(self, *, limit: int, before_id: int | None = None) -> list[OutboxEventRow]:
        """Every record's operator actions, newest first, older than ``before_id``."""
        ...

    def message_records(self, root_ids: Sequence[int]) -> list[EmailRow]:
        """Every record of the messages rooted at ``root_ids`` (the roots and the records
        whose ``root_id`` names them), oldest first."""
        ...


class OutboxMovesStore(Protocol):
    """Operator moves on outgoing emails: cancel, resolve, record again (audited).

    Implemented by :class:`~mailfathom.store.outbox.moves.OutboxMoves`.
    """

    def cancel(
        self, email_id: int, *, actor: str, reason: str | None, now: datetime
    ) -> CancelOutcome | None:
        """Recorded → Cancelled for the record and, when it is a message's root, every
        other record of the message, each unless a delivery attempt holds a live lease on
        it or a body ever went out for it; each move audited; all in one transaction.

        None when there is no such record.
        """
        ...

    def record_again(
        self,
        email_id: int,
        job: DeliveryJobSpec,
        *,
        actor: str,
        reason: str | None,
        now: datetime,
    ) -> tuple[EmailRow | None, EmailRow | None]:
        """A new Recorded record with a Refused record's bytes and recipients; audited.

        Returns ``(new record, None)``; ``(None, current row)`` when the record is not
        Refused; ``(None, None)`` when it does not exist.
        """
        ...

    def resolve(
        self,
        email_id: int,
        decision: OperatorResolve,
        *,
        actor: str,
        reason: str | None,
        now: datetime,
    ) -> tuple[EmailRow | None, EmailRow | None, bool]:
        """Settle a TransmissionBegun record as the operator decided; audited.

        Same returns as :meth:`cancel`.
        """
        ...


class OutboxAttemptsStore(Protocol):
    """Delivery attempts: counted, begun, ended, split; expiry.

    Implemented by :class:`~mailfathom.store.outbox.attempts.OutboxAttempts`.
    """

    def expire_email(self, email_id: int, *, now: datetime) -> EmailRow | None:
        """Recorded → Refused ("expired") when past ``expires_at`` and never transmitted;
        returns the refused record, or None when nothing changed."""
        ...

    def begin_attempt(
        self, email_id: int, *, now: datetime
    ) -> tuple[AttemptStart | None, EmailRow | None]:
        """Count a new attempt on a Recorded record and return what to send.

        Returns ``(start, None)``; ``(None, current row)`` when the record is not
        Recorded; ``(None, None)`` when it does not exist.
        """
        ...

    def claimed_start(self, job_id: int, job_attempt: int) -> AttemptStart | None:
        """The attempt that the claim of delivery job ``job_id`` (its attempt
        ``job_attempt``) already counted, with what it sends; taken once. None when the
        claim counted none (then :meth:`begin_attempt` counts it)."""
        ...

    def take_back_attempt(self, email_id: int, attempt: int, *, reason: str) -> bool:
        """Uncount attempt ``attempt`` of a record still Recorded at it (an attempt that
        stopped on an SMTP configuration error), ``reason`` saying why it waits; committed."""
        ...

    def mark_transmission_begun(self, email_id: int, attempt: int, *, now: datetime) -> bool:
        """Recorded → TransmissionBegun, only if still Recorded at ``attempt``; committed."""
        ...

    def end_attempt(self, end: AttemptEnd) -> EmailRow | None:
        """Write how an attempt ended if the record is still at ``from_stage`` and ``attempt``.

        Returns the updated row, or None when the record moved on (a cancel, an
        operator's decision, or a newer attempt) and nothing was written.
        """
        ...

    def end_with_outcome(
        self, job: tuple[int, int], end: AttemptEnd, written: Callable[[EmailRow | None], None]
    ) -> bool:
        """Keep ``end`` to be written (as :meth:`end_attempt` writes it) in the transaction
        that records the outcome of attempt ``job`` (job id, attempt) of its delivery job,
        before that outcome; ``written`` is told the updated row (None: the record moved
        on) once that transaction has committed. False: this store records outcomes
        without it (nothing was kept; call :meth:`end_attempt`)."""
        ...
