"""The rows and requests that cross the outbox repositories' boundary.

Internal. Like :mod:`mailfathom.store.base`, rows cross this boundary as typed
dictionaries of plain values (stage names are strings), so the store depends on
nothing above it. Every write is one transaction and every stage change is a
conditional update on the stage it starts from: two racing writers can never
both win.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
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
    "RecipientReply",
    "RecipientRow",
    "RecordedRows",
    "SuppressedAddress",
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
    #: None: ``key_of`` gives it from the record's recipients.
    limit_key: str | None = None
    #: The limit key of a record delivering to these recipients, in envelope order (the
    #: delivery layer's throttling policy, passed in so that storage holds none); None:
    #: a job without ``limit_key`` has no limit key.
    key_of: Callable[[Iterable[str]], str | None] | None = None


#: A message's recipients at one further domain, and the delivery job that sends to them
#: (per-domain throttling records a message once per recipient domain).
DomainPart = tuple[tuple[str, ...], DeliveryJobSpec]


class SuppressedAddress(Protocol):
    """An entry of the suppression list, as a delivery attempt needs it."""

    def describe(self) -> str:
        """Why the address is left out, as the recipient's refusal says it."""
        ...


@dataclass(frozen=True, slots=True)
class AttemptStart:
    """What a delivery attempt sends: the record, its bytes, and the recipients still owed.

    ``suppressed``: the suppression list's entries among the recipients (keyed by the
    list's address key), when the claim that counted the attempt read them in its own
    transaction; None when the list is still to be read (the handler reads it then).
    """

    email: EmailRow
    message: bytes
    recipients: list[RecipientRow]
    suppressed: Mapping[str, SuppressedAddress] | None = None


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
