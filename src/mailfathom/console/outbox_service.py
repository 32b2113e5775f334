"""The console's reads and decisions on outgoing email (``mf.outbox``).

Internal; mixed into :class:`~mailfathom.console.service.Console`. Adds what an
operator needs on top of ``mf.outbox``: a page of records, a record's detail
with its stage history (recorded, each delivery attempt, transmission begun,
operator decisions, the end), and decisions that always say why.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from typing import TYPE_CHECKING

from mailfathom.delivery.model import CancelledEmail, OutboxEvent, OutgoingEmail
from mailfathom.delivery.stage import OutgoingEmailStage
from mailfathom.errors import InvalidInput, NotFound
from mailfathom.jobs.model import Attempt
from mailfathom.jobs.state import AttemptOutcome
from mailfathom.validate import check_limit

if TYPE_CHECKING:
    from mailfathom.app import MailFathom

__all__ = ["EmailDetail", "EmailPage", "HistoryEntry", "OutboxConsole", "UnknownPage"]


@dataclass(frozen=True, slots=True)
class EmailPage:
    """One page of the outbox, newest first; ``next_before`` pages on."""

    emails: list[OutgoingEmail]
    next_before: int | None


@dataclass(frozen=True, slots=True)
class UnknownPage:
    """One page of unknown outcomes, oldest first: ``next_after`` pages on (None on the
    last page) and ``total`` counts them all, exactly."""

    emails: list[OutgoingEmail]
    next_after: int | None
    total: int


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One moment in a record's life: when, which stage (or event), and what happened."""

    at: datetime
    stage: str
    detail: str


@dataclass(frozen=True, slots=True)
class EmailDetail:
    """A record, its exact bytes, its stage history and its audit trail."""

    email: OutgoingEmail
    raw: bytes
    events: list[OutboxEvent]
    history: list[HistoryEntry]
    attempts: list[Attempt]


class OutboxConsole:
    """Outbox reads and operator decisions (needs ``self.mf``)."""

    mf: MailFathom

    def outbox(
        self, stage: str | None = None, *, before_id: int | None = None, limit: int = 50
    ) -> EmailPage:
        """Messages newest first (each with its parts), optionally those with a record in
        one stage."""
        chosen = None if not stage else OutgoingEmailStage.parse(stage)
        found = self.mf.outbox.list(chosen, limit=limit + 1, before_id=before_id)
        page = found[:limit]
        return EmailPage(page, page[-1].id if len(found) > limit and page else None)

    def outbox_counts(self) -> dict[OutgoingEmailStage, int]:
        """Records per stage."""
        return self.mf.outbox.counts()

    def unknown_outcomes(self, *, after_id: int | None = None, limit: int = 50) -> UnknownPage:
        """Records whose body went out and whose answer was never read, oldest first, one
        page at a time (``after_id``: the previous page's ``next_after``), with their count."""
        found = self.mf.outbox.unknown(limit=check_limit(limit, high=9_999) + 1, after_id=after_id)
        page = found[:limit]
        more = page[-1].id if len(found) > limit and page else None
        return UnknownPage(page, more, self.unknown_count())

    def unknown_count(self) -> int:
        """How many unknown outcomes there are, exactly."""
        return self.mf.outbox.unknown_count()

    def email(self, email_id: int) -> EmailDetail:
        """A record with its bytes, stage history and audit trail."""
        email = self.mf.outbox.get(email_id)
        events = self.mf.outbox.events(email_id)
        attempts: list[Attempt] = []
        if email.job_id is not None:
            try:
                attempts = self.mf.jobs.attempts(email.job_id)
            except NotFound:  # the delivery job was removed; the record stands on its own
                attempts = []
        return EmailDetail(
            email=email,
            raw=b"" if email.compacted else self.mf.outbox.message_bytes(email_id),
            events=events,
            history=_history(email, events, attempts),
            attempts=attempts,
        )

    def cancel_email(
        self, email_id: int, *, actor: str, reason: str | None = None
    ) -> CancelledEmail:
        """Recorded → Cancelled (never sent): every Recorded part of a message. Audited."""
        return self.mf.outbox.cancel(email_id, actor=actor, reason=_text(reason))

    def resolve_email(
        self, email_id: int, decision: str, *, actor: str, reason: str | None
    ) -> OutgoingEmail:
        """Settle an unknown outcome: delivered / send_again / give_up, with a reason."""
        why = _text(reason)
        if why is None:
            raise InvalidInput(
                "say why you decide this (what you checked: the server's log, the recipient): "
                "the reason is kept with the decision; nothing changed"
            )
        return self.mf.outbox.resolve(email_id, decision, actor=actor, reason=why)

    def record_email_again(
        self, email_id: int, *, actor: str, reason: str | None = None
    ) -> OutgoingEmail:
        """A Refused record's bytes recorded as a new message (delivered afresh). Audited."""
        return self.mf.outbox.record_again(email_id, actor=actor, reason=_text(reason))

    def send_test_email(self, *, to: str = "developer@example.com") -> OutgoingEmail:
        """Record a small test message (``mailfathom dev``'s "send a test email")."""
        message = EmailMessage()
        message["From"] = "mailfathom dev <mailfathom-dev@example.com>"
        message["To"] = to
        message["Subject"] = f"mailfathom test email, {self.mf.clock.now():%H:%M:%S} UTC"
        message.set_content(
            "This message was recorded by the mailfathom console, delivered by a worker over "
            "SMTP, and captured by the dev inbox.\n"
        )
        message.add_alternative(
            "<h1 style='color:#2d5bd2'>It works.</h1><p>Recorded by the console, delivered "
            "by a worker, captured by the dev inbox.</p>",
            subtype="html",
        )
        return self.mf.outbox.record(message)


def _history(
    email: OutgoingEmail, events: list[OutboxEvent], attempts: list[Attempt]
) -> list[HistoryEntry]:
    found = [HistoryEntry(email.created_at, "Recorded", "intent and exact bytes made durable")]
    for attempt in attempts:  # the successful one is the Sent entry below
        if attempt.finished_at is None or attempt.outcome is AttemptOutcome.SUCCEEDED:
            continue
        what = attempt.message or attempt.outcome.value
        found.append(
            HistoryEntry(
                attempt.finished_at,
                f"attempt {attempt.attempt}",
                f"{attempt.outcome.value}: {what}",
            )
        )
    if email.transmission_begun_at is not None:
        found.append(
            HistoryEntry(
                email.transmission_begun_at,
                "TransmissionBegun",
                "the server said 354; the body went out; its answer had not been read",
            )
        )
    for event in events:
        found.append(
            HistoryEntry(
                event.at,
                event.to_stage.value,
                f"{event.actor} decided: {event.action}"
                + (f": {event.reason}" if event.reason else ""),
            )
        )
    decided = any(event.to_stage is email.stage for event in events)
    final = email.stage.value in ("Sent", "Refused", "Cancelled")
    if email.finished_at is not None and final and not decided:
        reply = f"{email.reply_code} {email.reply_text or ''}".strip() if email.reply_code else ""
        found.append(
            HistoryEntry(email.finished_at, email.stage.value, reply or email.reason or "")
        )
    found.sort(key=lambda entry: entry.at)
    return found


def _text(reason: str | None) -> str | None:
    if reason is None or not reason.strip():
        return None
    if len(reason) > 2000:
        raise InvalidInput("reason must be at most 2000 characters")
    return reason.strip()
