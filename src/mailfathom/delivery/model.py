"""What the public API returns about outgoing email: ``OutgoingEmail``, ``RecordedEmail``,

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
``RecipientOutcome`` and ``OutboxEvent``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mailfathom.delivery.stage import OutgoingEmailStage
from mailfathom.store.outbox.rows import EmailRow, OutboxEventRow, RecipientRow

__all__ = ["CancelledEmail", "OutboxEvent", "OutgoingEmail", "RecipientOutcome", "RecordedEmail"]


@dataclass(frozen=True, slots=True)
class RecipientOutcome:
    """One envelope recipient and the server's last reply to its RCPT TO (None: not yet)."""

    address: str
    reply_code: int | None
    enhanced_status: str | None
    reply_text: str | None
    replied_at: datetime | None

    @property
    def accepted(self) -> bool:
        """The server accepted this recipient (2xx) in the last attempt."""
        return self.reply_code is not None and 200 <= self.reply_code < 300

    @property
    def refused(self) -> bool:
        """The server refused this recipient for good (5xx); it is not offered again."""
        return self.reply_code is not None and self.reply_code >= 500

    @classmethod
    def from_row(cls, row: RecipientRow) -> RecipientOutcome:
        """Build from a stored recipient row."""
        return cls(
            address=row["address"],
            reply_code=row["reply_code"],
            enhanced_status=row["enhanced_status"],
            reply_text=row["reply_text"],
            replied_at=row["replied_at"],
        )


@dataclass(frozen=True, slots=True)
class OutgoingEmail:
    """A snapshot of one outgoing email as recorded (its bytes: ``mf.outbox.message_bytes``).

    ``reason`` says why the last attempt failed, why it was Refused or Cancelled,
    or what an operator decided; ``reply_code``/``reply_text`` hold the server's last
    deciding reply. ``parent_id`` links a record split off another one (recipients
    the server deferred while accepting others): same bytes, same Message-ID.
    Such records are **parts** of one message: the root's snapshot (what ``record``,
    ``get`` and ``list`` return) lists every recipient of the message, each with the
    reply of the part that delivers it now, and ``parts`` holds every record; ``stage``,
    ``attempts`` and the other record fields are the root record's own.
    ``body_transmissions`` counts the times the body may have gone out (each write of
    TransmissionBegun); unlike ``transmission_begun_at`` it is never cleared, so a record
    that went back to Recorded (a 4xx to the end of data, or *send again*) still shows
    it — and can no longer be cancelled (give it up with ``resolve(..., "give_up")``).
    """

    id: int
    stage: OutgoingEmailStage
    idempotency_key: str | None
    message_id: str
    sender: str
    recipients: tuple[RecipientOutcome, ...]
    subject: str | None
    size: int
    smtputf8: bool
    eightbit: bool
    attempts: int
    job_id: int | None
    parent_id: int | None
    created_at: datetime
    last_attempt_at: datetime | None
    transmission_begun_at: datetime | None
    body_transmissions: int
    finished_at: datetime | None
    reply_code: int | None
    reply_text: str | None
    reason: str | None
    #: When retention compacted this final record: its bytes and subject are gone; the
    #: envelope, Message-ID, stage, recipients' replies and failure stay.
    compacted_at: datetime | None = field(default=None, kw_only=True)

    @property
    def compacted(self) -> bool:
        """Retention has compacted this record (its message bytes are gone)."""
        return self.compacted_at is not None

    #: After this instant, a record whose body never went out is Refused ("expired").
    expires_at: datetime | None = field(default=None, kw_only=True)
    #: The message's root record when this record is one of its other parts (None: this
    #: record is the message itself).
    root_id: int | None = field(default=None, kw_only=True)
    #: What the message was recorded with, kept by every part: delivery priority and
    #: queue (None: the configured delivery queue).
    priority: int = field(default=0, kw_only=True)
    queue: str | None = field(default=None, kw_only=True)
    #: A message recorded as several records (one per recipient domain with
    #: ``domain_limits``, recipients a server deferred, a record recorded again): every
    #: record, this root first, each with its own stage and recipients. Empty for a
    #: message that is one record, and on a part itself.
    parts: tuple[OutgoingEmail, ...] = field(default=(), kw_only=True)

    @property
    def ever_transmitted(self) -> bool:
        """True once a body may have gone out for this record (it can never be Cancelled)."""
        return self.body_transmissions > 0

    @classmethod
    def from_row(
        cls,
        row: EmailRow,
        recipients: list[RecipientRow],
        parts: tuple[OutgoingEmail, ...] = (),
    ) -> OutgoingEmail:
        """Build from a stored record and its recipient rows (and, for a message's root,
        its parts and every recipient of the message)."""
        return cls(**_public(row, recipients), parts=parts)


@dataclass(frozen=True, slots=True)
class RecordedEmail(OutgoingEmail):
    """The record ``record()`` created or found: ``created`` is False when the key existed."""

    created: bool

    @classmethod
    def from_record(
        cls,
        row: EmailRow,
        recipients: list[RecipientRow],
        created: bool,
        parts: tuple[OutgoingEmail, ...] = (),
    ) -> RecordedEmail:
        """Build from a stored record and whether this call inserted it."""
        return cls(**_public(row, recipients), created=created, parts=parts)


@dataclass(frozen=True, slots=True)
class CancelledEmail(OutgoingEmail):
    """What ``cancel`` returns: the message (or part) asked for as it is now, and what the
    cancel did to each of its records.

    ``cancelled``: the records this cancel moved to Cancelled (nothing of them was ever
    transmitted). ``begun``: records it left alone because their transmission had begun
    (TransmissionBegun, Sent, a body already out, or a worker delivering it right now):
    they may be, or have been, delivered. ``finished``: records that were Refused or
    Cancelled already.
    """

    cancelled: tuple[OutgoingEmail, ...]
    begun: tuple[OutgoingEmail, ...]
    finished: tuple[OutgoingEmail, ...]


def _public(row: EmailRow, recipients: list[RecipientRow]) -> dict[str, Any]:
    fields: dict[str, Any] = dict(row)
    fields["stage"] = OutgoingEmailStage(row["stage"])
    fields["recipients"] = tuple(RecipientOutcome.from_row(r) for r in recipients)
    return fields


@dataclass(frozen=True, slots=True)
class OutboxEvent:
    """One audited operator action on an outgoing email: who, what, when, why."""

    id: int
    email_id: int
    at: datetime
    actor: str
    action: str
    from_stage: OutgoingEmailStage
    to_stage: OutgoingEmailStage
    reason: str | None

    @classmethod
    def from_row(cls, row: OutboxEventRow) -> OutboxEvent:
        """Build from a stored audit row."""
        return cls(
            id=row["id"],
            email_id=row["email_id"],
            at=row["at"],
            actor=row["actor"],
            action=row["action"],
            from_stage=OutgoingEmailStage(row["from_stage"]),
            to_stage=OutgoingEmailStage(row["to_stage"]),
            reason=row["reason"],
        )
