"""The ``OutboxStore`` protocol: everything the outbox asks of a database.

Internal. Like :mod:`mailfathom.store.base`, rows cross this boundary as typed
dictionaries of plain values (stage names are strings), so the store depends on
nothing above it. Every write is one transaction and every stage change is a
conditional update on the stage it starts from: two racing writers can never
both win.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypedDict

__all__ = [
    "AttemptEnd",
    "AttemptStart",
    "CancelOutcome",
    "DeliveryJobSpec",
    "DomainPart",
    "EmailRow",
    "NewEmail",
    "OperatorResolve",
    "OutboxEventRow",
    "OutboxStore",
    "RecipientReply",
    "RecipientRow",
    "RecordedRows",
]


class EmailRow(TypedDict):
    """One outgoing email as stored, without its bytes."""

    id: int
    stage: str
    idempotency_key: str | None
    parent_id: int | None
    job_id: int | None
    message_id: str
    sender: str
    subject: str | None
    size: int
    smtputf8: bool
    eightbit: bool
    attempts: int
    last_attempt_at: datetime | None
    created_at: datetime
    transmission_begun_at: datetime | None
    #: How many times TransmissionBegun was written: bodies that may have gone out. Never
    #: lowered (the database refuses it); a record above zero can never be Cancelled.
    body_transmissions: int
    #: When retention compacted the record (its bytes and subject are gone); None: whole.
    compacted_at: datetime | None
    finished_at: datetime | None
    reply_code: int | None
    reply_text: str | None
    reason: str | None
    expires_at: datetime | None
    #: The message's first record, when this record was split off it (a recipient
    #: domain's part, recipients a server deferred, a record recorded again); None: this
    #: record is the message's root.
    root_id: int | None
    #: What the message was recorded with, inherited by every record derived from it:
    #: its deliveries' priority and queue (None: the configured delivery queue).
    priority: int
    queue: str | None


class RecipientRow(TypedDict):
    """One envelope recipient and the server's last reply to its RCPT TO."""

    email_id: int
    position: int
    address: str
    reply_code: int | None
    enhanced_status: str | None
    reply_text: str | None
    replied_at: datetime | None


class OutboxEventRow(TypedDict):
    """One operator action on an outgoing email."""

    id: int
    email_id: int
    at: datetime
    actor: str
    action: str
    from_stage: str
    to_stage: str
    reason: str | None


@dataclass(frozen=True, slots=True)
class NewEmail:
    """A frozen message to record: exact bytes and envelope, already validated."""

    idempotency_key: str | None
    message_id: str
    sender: str
    subject: str | None
    message: bytes
    smtputf8: bool
    eightbit: bool
    recipients: tuple[str, ...]
    #: When the delivery job is first due (None: at once), and its priority.
    run_at: datetime | None = None
    priority: int = 0
    #: After this instant a record whose body never went out is Refused ("expired").
    expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class RecordedRows:
    """What recording one message wrote or found, read in its own transaction: the
    message's root record and its recipients, whether this call created it, and — for a
    message of several records — every record with its recipients, root first."""

    email: EmailRow
    recipients: list[RecipientRow]
    created: bool
    parts: list[tuple[EmailRow, list[RecipientRow]]]


@dataclass(frozen=True, slots=True)
class DeliveryJobSpec:
    """The delivery job written with each record; its payload is ``{"email_id": id}``."""

    kind: str
    queue: str
    max_attempts: int
    #: The W3C traceparent the delivery job carries (OpenTelemetry), if any.
    trace_context: str | None = None
    #: The job's flow-control limit key: the recipient domain (mailfathom.delivery.domains).
    #: None: the store derives it from the record's first recipient.
    limit_key: str | None = None


#: A message's recipients at one further domain, and the delivery job that sends to them
#: (per-domain throttling records a message once per recipient domain).
DomainPart = tuple[tuple[str, ...], DeliveryJobSpec]


@dataclass(frozen=True, slots=True)
class AttemptStart:
    """What a delivery attempt sends: the record, its bytes, and the recipients still owed."""

    email: EmailRow
    message: bytes
    recipients: list[RecipientRow]


@dataclass(frozen=True, slots=True)
class RecipientReply:
    """The server's reply to one RCPT TO (``code`` None: the reply was malformed)."""

    position: int
    code: int | None
    enhanced_status: str | None
    text: str
    at: datetime


@dataclass(frozen=True, slots=True)
class AttemptEnd:
    """How a delivery attempt ended, to be written only if the record is still where it was.

    ``from_stage`` is Recorded (the body never went out) or TransmissionBegun (the
    server answered the end of data). ``split`` names recipient positions to move to a
    new linked Recorded record (same bytes and Message-ID), due at ``split_due``.
    """

    email_id: int
    attempt: int
    from_stage: str
    to_stage: str
    now: datetime
    reason: str | None
    reply_code: int | None = None
    reply_text: str | None = None
    recipients: Sequence[RecipientReply] = ()
    split: Sequence[int] = ()
    split_due: datetime | None = None
    split_job: DeliveryJobSpec | None = None


@dataclass(frozen=True, slots=True)
class CancelOutcome:
    """What a cancel did to each record of a message, in one transaction.

    ``record`` is the record asked for as it is now; ``cancelled`` the records moved to
    Cancelled; ``refused`` the others, each with whether a delivery held a live lease on
    it (its row as found).
    """

    record: EmailRow
    cancelled: list[EmailRow]
    refused: list[tuple[EmailRow, bool]]


@dataclass(frozen=True, slots=True)
class OperatorResolve:
    """An operator's decision on a TransmissionBegun record, as store work."""

    action: str
    to_stage: str
    #: True: the record's delivery must run again (requeue or a fresh job).
    deliver_again: bool
    job: DeliveryJobSpec


class OutboxStore(Protocol):
    """A database holding the outbox. Every write is one transaction."""

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
