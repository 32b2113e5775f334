"""What the public API returns about outgoing email: ``OutgoingEmail``, ``RecordedEmail``,
``RecipientOutcome`` and ``OutboxEvent``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mailfathom.delivery.stage import OutgoingEmailStage
from mailfathom.store.outbox_base import EmailRow, OutboxEventRow, RecipientRow

__all__ = ["OutboxEvent", "OutgoingEmail", "RecipientOutcome", "RecordedEmail"]


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

    @property
    def ever_transmitted(self) -> bool:
        """True once a body may have gone out for this record (it can never be Cancelled)."""
        return self.body_transmissions > 0

    @classmethod
    def from_row(cls, row: EmailRow, recipients: list[RecipientRow]) -> OutgoingEmail:
        """Build from a stored record and its recipient rows."""
        return cls(**_public(row, recipients))


@dataclass(frozen=True, slots=True)
class RecordedEmail(OutgoingEmail):
    """The record ``record()`` created or found: ``created`` is False when the key existed."""

    created: bool

    @classmethod
    def from_record(
        cls, row: EmailRow, recipients: list[RecipientRow], created: bool
    ) -> RecordedEmail:
        """Build from a stored record and whether this call inserted it."""
        return cls(**_public(row, recipients), created=created)


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
