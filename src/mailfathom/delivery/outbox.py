"""``mf.outbox``: record outgoing email durably, and what operators read and decide about it.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

``record`` validates and freezes the message, then writes the record and its
delivery job (kind ``mailfathom.deliver``) in one transaction — the caller's
own when ``connection=`` is given. ``cancel`` and ``resolve`` are conditional on
the record's stage and audited in the same transaction; from any other stage
they are refused with :class:`~mailfathom.errors.IllegalTransition` and nothing
changes.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator, Sequence, Sized
from dataclasses import dataclass, field, replace
from datetime import datetime
from email.message import EmailMessage
from itertools import chain
from typing import Literal, overload

from mailfathom.batch_ids import BatchIds
from mailfathom.chunking import Column, split_first
from mailfathom.clock import Clock
from mailfathom.delivery.dkim import DkimSigner
from mailfathom.delivery.domains import delivery_key, domain_parts
from mailfathom.delivery.message import freeze
from mailfathom.delivery.model import CancelledEmail, OutboxEvent, OutgoingEmail, RecordedEmail
from mailfathom.delivery.parts import cancel_result, message_views, recorded_views, refusal
from mailfathom.delivery.resolution import Resolution, decision
from mailfathom.delivery.stage import OutgoingEmailStage
from mailfathom.errors import IllegalTransition, InvalidInput, NotFound
from mailfathom.observability import tracing
from mailfathom.store.outbox.protocol import OutboxMovesStore, OutboxRecordsStore
from mailfathom.store.outbox.rows import (
    DeliveryJobSpec,
    DomainPart,
    EmailRow,
    NewEmail,
    RecordedRows,
)
from mailfathom.validate import (
    available_at,
    check_actor,
    check_id,
    check_key,
    check_limit,
    check_priority,
)

__all__ = ["RECORD_CHUNK", "Outbox"]

#: The default of :attr:`Outbox.record_chunk`: few enough that a chunk of the caller's
#: ``EmailMessage`` objects (50-90 KB each in memory, for a short text message) and their
#: frozen bytes stay a few MB; the chunks of a batch share its one commit all the same.
RECORD_CHUNK = 100


class Outbox:
    """Record outgoing email, and read and settle it as an operator."""

    def __init__(
        self,
        store: OutboxRecordsStore,
        moves: OutboxMovesStore,
        clock: Clock,
        *,
        job: DeliveryJobSpec,
        signer: DkimSigner | None = None,
        max_message_bytes: int = 26_214_400,
        split_domains: bool = False,
    ) -> None:
        self._split_domains = split_domains
        self._store = store
        self._moves = moves
        self._clock = clock
        self._job = job
        self._signer = signer
        self._max_bytes = max_message_bytes
        #: Messages ``record_many`` validates, freezes and writes at a time: a larger
        #: batch is written chunk after chunk in its one transaction, so that what it
        #: holds besides what it returns stays bounded.
        self.record_chunk = RECORD_CHUNK

    # -- recording ---------------------------------------------------------------------

    def record(
        self,
        message: EmailMessage | bytes,
        *,
        idempotency_key: str | None = None,
        sender: str | None = None,
        recipients: Sequence[str] | None = None,
        run_at: datetime | None = None,
        priority: int = 0,
        expires_at: datetime | None = None,
        connection: object | None = None,
    ) -> RecordedEmail:
        """Freeze ``message`` and record it with its delivery job, in one transaction.

        ``message`` is an ``EmailMessage`` (envelope from its Sender/From and
        To/Cc/Bcc unless given) or bytes with ``sender`` and ``recipients``. Message-ID
        and Date are added when missing, Bcc is dropped from the bytes, and the bytes
        are DKIM-signed when configured. An existing ``idempotency_key`` returns that
        record (``created=False``) and records nothing. With ``connection=`` the record
        is written in the caller's open transaction and nothing is committed for it.

        ``run_at`` schedules the send (the delivery job is due then); ``priority`` orders
        deliveries among themselves (higher first, as for jobs); after ``expires_at`` a
        record whose body never went out is Refused with the reason "expired" instead
        of being sent (a record whose body may have gone out is never expired).

        Each delivery is throttled by its recipient domain when ``domain_limits`` is set;
        a message to several domains is then recorded once per domain, as **parts** of
        one message. What is returned stands for the whole message: its ``id`` (the
        first domain's record, the message's root) is the handle to ``get`` and
        ``cancel`` it, ``recipients`` lists every recipient, and ``parts`` every record
        (see :meth:`parts`). Every part keeps ``run_at``, ``priority`` and
        ``expires_at``.
        """
        key = check_key(idempotency_key)
        now = self._clock.now()
        due, expiry = _schedule(now, run_at, expires_at)
        email = self._freeze(
            message,
            key=key,
            sender=sender,
            recipients=recipients,
            now=now,
            due=due,
            expiry=expiry,
            priority=check_priority(priority),
        )
        email, others = self._split(email)
        with tracing.enqueue_span(self._job.kind, self._job.queue):
            job = self._traced_job()
            recorded = self._store.insert_email(
                email, job, now=now, connection=connection, parts=self._parts(job, others)
            )
        return recorded_views([recorded])[0]

    @overload
    def record_many(
        self,
        messages: Iterable[EmailMessage | bytes],
        *,
        idempotency_keys: Iterable[str | None] | None = None,
        sender: str | None = None,
        recipients: Sequence[str] | None = None,
        run_at: datetime | None = None,
        priority: int = 0,
        expires_at: datetime | None = None,
        connection: object | None = None,
        envelopes: Iterable[tuple[str, Sequence[str]]] | None = None,
        returning: Literal["records"] = "records",
    ) -> builtins.list[RecordedEmail]: ...

    @overload
    def record_many(
        self,
        messages: Iterable[EmailMessage | bytes],
        *,
        idempotency_keys: Iterable[str | None] | None = None,
        sender: str | None = None,
        recipients: Sequence[str] | None = None,
        run_at: datetime | None = None,
        priority: int = 0,
        expires_at: datetime | None = None,
        connection: object | None = None,
        envelopes: Iterable[tuple[str, Sequence[str]]] | None = None,
        returning: Literal["ids"],
    ) -> BatchIds: ...

    def record_many(
        self,
        messages: Iterable[EmailMessage | bytes],
        *,
        idempotency_keys: Iterable[str | None] | None = None,
        sender: str | None = None,
        recipients: Sequence[str] | None = None,
        run_at: datetime | None = None,
        priority: int = 0,
        expires_at: datetime | None = None,
        connection: object | None = None,
        envelopes: Iterable[tuple[str, Sequence[str]]] | None = None,
        returning: Literal["records", "ids"] = "records",
    ) -> builtins.list[RecordedEmail] | BatchIds:
        """:meth:`record` for a batch, in **one** transaction: any bad message raises,
        naming its index, and nothing is recorded; otherwise all records and their
        delivery jobs are written and committed together.

        Results are in the order of ``messages``. ``idempotency_keys`` gives one key (or
        None) per message; a key that already exists returns that record with
        ``created=False`` and records nothing for it, and a key given twice in one batch
        is refused. ``sender``, ``recipients``, ``run_at``, ``priority`` and
        ``expires_at`` apply to every message, as in :meth:`record`. With
        ``domain_limits``, a message to several domains is recorded once per domain, as
        by :meth:`record` (its result stands for the whole message, with its parts).
        ``envelopes`` gives each message its own ``(sender, recipients)`` instead (bytes
        of several senders, Bcc recipients that are not in the headers), one per message.

        ``messages`` (and ``idempotency_keys``, ``envelopes``) may be any iterable, read
        :attr:`record_chunk` messages at a time: up to that many are validated and frozen
        before anything is written; a larger batch is frozen and written chunk by chunk
        inside its one transaction, which a bad message in any chunk rolls back.
        ``returning="records"`` (the default) returns a list of :class:`RecordedEmail`;
        ``returning="ids"`` a :class:`BatchIds` of each message's record id, so that a
        batch of any size holds a chunk's worth of memory.
        """
        if isinstance(messages, (bytes, bytearray, str, EmailMessage)) or not isinstance(
            messages, Iterable
        ):
            raise InvalidInput(
                "messages must be a list of messages (EmailMessage or bytes), one per email; "
                "for one message use mf.outbox.record; nothing was recorded"
            )
        if returning not in ("records", "ids"):
            raise InvalidInput(f'returning must be "records" or "ids", not {returning!r}')
        total = len(messages) if isinstance(messages, Sized) else None
        _check_keys(idempotency_keys, total)
        now = self._clock.now()
        due, expiry = _schedule(now, run_at, expires_at)
        batch = _Recording(
            outbox=self,
            keys=Column("idempotency_keys", idempotency_keys, "messages", note=_NOTHING),
            envelopes=_Envelopes(envelopes, total, sender, recipients),
            now=now,
            due=due,
            expiry=expiry,
            priority=check_priority(priority),
            as_ids=returning == "ids",
        )
        first, more = split_first(messages, max(self.record_chunk, 1))
        with tracing.enqueue_span(self._job.kind, self._job.queue, total):
            job = batch.job = self._traced_job()
            if more is None:  # the common case: one chunk, written in one go
                emails, parts = batch.chunk(first, 0)
                batch.finish(len(first))
                if emails:
                    batch.done(
                        self._store.insert_emails(
                            emails, job, now=now, connection=connection, parts=parts
                        )
                    )
            else:
                self._store.insert_email_chunks(
                    batch.chunks(first, more), job, now=now, connection=connection, done=batch.done
                )
        return batch.ids if batch.as_ids else batch.recorded

    def _freeze(
        self,
        message: EmailMessage | bytes,
        *,
        key: str | None,
        sender: str | None,
        recipients: Sequence[str] | None,
        now: datetime,
        due: datetime | None,
        expiry: datetime | None,
        priority: int,
    ) -> NewEmail:
        """The validated, frozen (and signed, when configured) record of one message."""
        frozen = freeze(
            message,
            sender=sender,
            recipients=recipients,
            now=now,
            max_bytes=self._max_bytes,
        )
        data = frozen.data if self._signer is None else self._signer.sign(frozen.data)
        return NewEmail(
            idempotency_key=key,
            message_id=frozen.message_id,
            sender=frozen.sender,
            subject=frozen.subject,
            message=data,
            smtputf8=frozen.smtputf8,
            eightbit=not data.isascii(),
            recipients=frozen.recipients,
            run_at=due,
            priority=priority,
            expires_at=expiry,
        )

    def _split(self, email: NewEmail) -> tuple[NewEmail, builtins.list[tuple[str, ...]]]:
        """The record for the first recipient domain, and the recipients at each other
        domain (none unless ``domain_limits`` splits messages per domain)."""
        first, *others = domain_parts(email.recipients, split=self._split_domains)
        if not others:
            return email, []
        return replace(email, recipients=first), others

    @staticmethod
    def _parts(
        job: DeliveryJobSpec, others: Sequence[tuple[str, ...]]
    ) -> builtins.list[DomainPart]:
        """Each further domain's recipients with a delivery job keyed by that domain."""
        return [(part, replace(job, limit_key=delivery_key(part))) for part in others]

    def _traced_job(self) -> DeliveryJobSpec:
        """The delivery job spec, carrying the current trace context when tracing is on."""
        traceparent = tracing.current_traceparent()  # None unless tracing is on
        return self._job if traceparent is None else replace(self._job, trace_context=traceparent)

    # -- reads -------------------------------------------------------------------------

    def get(self, email_id: int) -> OutgoingEmail:
        """The record with ``email_id``; :class:`NotFound` if there is none.

        For a message's root (what ``record`` returned) this is the whole message: every
        recipient and every part; for one of its other parts, that part alone (its
        ``root_id`` names the message). Reading changes nothing: a record past its
        expiry is settled by the delivery worker, never by a read.
        """
        row = self._store.get_email(check_id(email_id, "an outgoing email id"))
        if row is None:
            raise NotFound(f"no outgoing email has id {email_id}: list the outbox to find it")
        return self._emails([row])[0]

    def parts(self, email_id: int) -> builtins.list[OutgoingEmail]:
        """Every record of the message ``email_id`` belongs to, its root first, each with
        its own stage and recipients: one record for a message never split; one per
        recipient domain with ``domain_limits``, and one more for each group of
        recipients a server deferred or that an operator recorded again. Given a part's
        id, the parts of its whole message."""
        row = self._store.get_email(check_id(email_id, "an outgoing email id"))
        if row is None:
            raise NotFound(f"no outgoing email has id {email_id}: list the outbox to find it")
        rows = self._store.message_records([row["root_id"] or row["id"]])
        recipients = self._store.recipients([r["id"] for r in rows])
        return [OutgoingEmail.from_row(r, recipients[r["id"]]) for r in rows]

    def message_bytes(self, email_id: int) -> bytes:
        """The exact bytes every attempt sends (DKIM signature included)."""
        data = self._store.email_message(check_id(email_id, "an outgoing email id"))
        if data is None:
            raise NotFound(f"no outgoing email has id {email_id}: list the outbox to find it")
        if not data:
            raise IllegalTransition(
                f"outgoing email {email_id} was compacted by retention: its bytes are gone "
                "(its envelope, Message-ID and replies stay; see mf.outbox.get)"
            )
        return data

    def list(
        self,
        stage: OutgoingEmailStage | str | None = None,
        *,
        limit: int = 100,
        before_id: int | None = None,
    ) -> builtins.list[OutgoingEmail]:
        """Messages newest first (a message recorded as several parts is listed once, with
        its parts), optionally only those with a record in ``stage``; page with
        ``before_id``."""
        rows = self._store.list_emails(
            None if stage is None else OutgoingEmailStage.parse(stage).value,
            limit=check_limit(limit),
            before_id=None if before_id is None else check_id(before_id, "an outgoing email id"),
        )
        return self._emails(rows)

    def counts(self) -> dict[OutgoingEmailStage, int]:
        """How many records are in each stage (every stage present, zeros included): each
        part of a message counts on its own."""
        found = self._store.count_emails()
        return {stage: found.get(stage.value, 0) for stage in OutgoingEmailStage}

    def unknown(
        self, *, limit: int = 100, after_id: int | None = None
    ) -> builtins.list[OutgoingEmail]:
        """Unknown outcomes, oldest first: TransmissionBegun records no live worker is
        delivering (each record on its own: a part of a message is resolved alone).
        Each waits for :meth:`resolve`; none is ever re-sent automatically.
        Page with ``after_id`` (the last id of the previous page); count with
        :meth:`unknown_count`."""
        rows = self._store.unknown_emails(
            now=self._clock.now(),
            limit=check_limit(limit),
            after_id=None if after_id is None else check_id(after_id, "an outgoing email id"),
        )
        recipients = self._store.recipients([row["id"] for row in rows])
        return [OutgoingEmail.from_row(row, recipients[row["id"]]) for row in rows]

    def unknown_count(self) -> int:
        """How many unknown outcomes there are, exactly (however many pages they fill)."""
        return self._store.count_unknown_emails(now=self._clock.now())

    def events(self, email_id: int) -> builtins.list[OutboxEvent]:
        """The record's audit trail (cancel, resolve), oldest first."""
        self.get(email_id)
        return [OutboxEvent.from_row(row) for row in self._store.events(email_id)]

    def audit(
        self, *, limit: int = 100, before_id: int | None = None
    ) -> builtins.list[OutboxEvent]:
        """Operator actions on every record (cancel, resolve, record again), newest first."""
        rows = self._store.recent_events(
            limit=check_limit(limit),
            before_id=None if before_id is None else check_id(before_id, "an outgoing email id"),
        )
        return [OutboxEvent.from_row(row) for row in rows]

    def _emails(self, rows: builtins.list[EmailRow]) -> builtins.list[OutgoingEmail]:
        return message_views(self._store, rows)

    # -- operator decisions ------------------------------------------------------------

    def cancel(self, email_id: int, *, actor: str, reason: str | None = None) -> CancelledEmail:
        """Recorded → Cancelled: it will never be sent. Audited.

        Given a message's root (what ``record`` returned), every part of the message that
        is still Recorded is withdrawn, in one transaction; the result lists the parts it
        ``cancelled``, those whose transmission had already ``begun`` (left alone: they
        may be delivered) and those ``finished`` before. Given one part's id, that part
        alone. A part is refused once its transmission has begun, while a worker is
        delivering it (its delivery job holds a live lease), and when its body ever went
        out (``body_transmissions`` above zero: a 4xx to the end of data, or *send
        again*), since Cancelled says nothing of it was transmitted — give that one up
        with ``resolve(id, "give_up")`` (→ Refused). When no part can be cancelled,
        :class:`IllegalTransition` says why and nothing changes.
        """
        check_actor(actor, reason)
        outcome = self._moves.cancel(
            check_id(email_id, "an outgoing email id"),
            actor=actor,
            reason=reason,
            now=self._clock.now(),
        )
        if outcome is None:
            raise NotFound(f"no outgoing email has id {email_id}: list the outbox to find it")
        if outcome.cancelled:
            return cancel_result(self._store, outcome)
        if len(outcome.refused) > 1:
            raise refusal(email_id, outcome)
        current, delivering = outcome.refused[0]
        stage = current["stage"]
        if stage == OutgoingEmailStage.RECORDED and current["body_transmissions"] > 0:
            raise IllegalTransition(
                f"cannot cancel outgoing email {email_id}: its body already went out "
                f"{_times(current['body_transmissions'])} (the server answered the end of data "
                "with 4xx, or an operator chose send_again), and Cancelled means nothing was "
                f"transmitted; to stop it, give it up: mf.outbox.resolve({email_id}, "
                "'give_up', actor=..., reason=...) makes it Refused; nothing changed",
                current=stage,
                target=OutgoingEmailStage.CANCELLED.value,
                allowed_from=(OutgoingEmailStage.RECORDED.value,),
            )
        if stage == OutgoingEmailStage.RECORDED and delivering:
            raise IllegalTransition(
                f"cannot cancel outgoing email {email_id}: a worker is delivering it right now "
                f"(job {current['job_id']}); try again when the attempt has ended — if it "
                "fails, it returns to Recorded and can be cancelled; nothing changed",
                current=stage,
                target=OutgoingEmailStage.CANCELLED.value,
                allowed_from=(OutgoingEmailStage.RECORDED.value,),
            )
        raise IllegalTransition(
            f"cannot cancel outgoing email {email_id}: it is {stage}, and only Recorded email "
            "can be cancelled (once transmission has begun it may already be delivered); "
            "nothing changed",
            current=stage,
            target=OutgoingEmailStage.CANCELLED.value,
            allowed_from=(OutgoingEmailStage.RECORDED.value,),
        )

    def record_again(
        self, email_id: int, *, actor: str, reason: str | None = None
    ) -> OutgoingEmail:
        """Record a Refused email's exact bytes and recipients as a new message. Audited.

        Refused is final for a record; this is how an operator tries again (for example
        after fixing the relay's configuration): a new Recorded record with the same
        bytes and Message-ID, ``parent_id`` pointing at the old one, delivered afresh. It
        is a part of the same message (listed in :meth:`parts`), with the message's
        priority and queue but no expiry (the operator chose to send it now).
        """
        check_actor(actor, reason)
        created, current = self._moves.record_again(
            check_id(email_id, "an outgoing email id"),
            self._job,
            actor=actor,
            reason=reason,
            now=self._clock.now(),
        )
        if created is not None:
            return self._emails([created])[0]
        if current is None:
            raise NotFound(f"no outgoing email has id {email_id}: list the outbox to find it")
        if current["compacted_at"] is not None:
            raise IllegalTransition(
                f"cannot record outgoing email {email_id} again: retention compacted it at "
                f"{current['compacted_at']:%Y-%m-%d %H:%M} UTC and its bytes are gone; record "
                "the message anew with mf.outbox.record; nothing changed"
            )
        raise IllegalTransition(
            f"cannot record outgoing email {email_id} again: it is {current['stage']}, and only "
            "Refused email is recorded again (an unknown outcome is resolved with "
            "mf.outbox.resolve); nothing changed"
        )

    def resolve(
        self,
        email_id: int,
        resolution: Resolution | str,
        *,
        actor: str,
        reason: str | None = None,
    ) -> OutgoingEmail:
        """Settle an unknown outcome: ``delivered`` (→ Sent), ``send_again`` (→ Recorded,
        one more copy is offered) or ``give_up`` (→ Refused). Audited.

        ``give_up`` also stops a Recorded record whose body already went out
        (``body_transmissions`` above zero), which can no longer be cancelled.
        """
        chosen = Resolution.parse(resolution)
        check_actor(actor, reason)
        moved, current, delivering = self._moves.resolve(
            check_id(email_id, "an outgoing email id"),
            decision(chosen, self._job),
            actor=actor,
            reason=reason,
            now=self._clock.now(),
        )
        if moved is not None:
            return self._emails([moved])[0]
        if current is None:
            raise NotFound(f"no outgoing email has id {email_id}: list the outbox to find it")
        stage = current["stage"]
        transmitted = stage == OutgoingEmailStage.RECORDED and current["body_transmissions"] > 0
        allowed: tuple[str, ...] = (OutgoingEmailStage.TRANSMISSION_BEGUN.value,)
        if chosen is Resolution.GIVE_UP and transmitted:
            allowed += (OutgoingEmailStage.RECORDED.value,)
        if delivering:
            why = (
                "a worker is delivering it right now (its delivery job holds a live lease); "
                "wait until the attempt has ended"
            )
            if stage == OutgoingEmailStage.TRANSMISSION_BEGUN:
                why = (
                    "a worker is still waiting for the server's answer (its delivery job holds "
                    "a live lease); wait until mf.outbox.unknown() lists it"
                )
        elif transmitted:
            why = (
                "its body already went out and it waits for another attempt; of the "
                "resolutions only give_up (→ Refused) applies to it"
            )
        elif stage == OutgoingEmailStage.RECORDED:
            why = (
                "no body has gone out for it, so there is nothing to resolve: cancel it "
                "instead (mf.outbox.cancel)"
            )
        else:
            why = (
                "only TransmissionBegun email (an unknown outcome) can be resolved, or given "
                "up while Recorded after its body went out"
            )
        raise IllegalTransition(
            f"cannot resolve outgoing email {email_id} as {chosen.value}: it is {stage}; "
            f"{why}; nothing changed",
            current=stage,
            target=chosen.target.value,
            allowed_from=allowed,
        )


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _schedule(
    now: datetime, run_at: datetime | None, expires_at: datetime | None
) -> tuple[datetime | None, datetime | None]:
    """The delivery's first due instant and the record's expiry, validated (UTC)."""
    due = None if run_at is None else available_at(now, delay=None, run_at=run_at, hold=False)
    if expires_at is None:
        return due, None
    try:
        expiry = available_at(now, delay=None, run_at=expires_at, hold=False)
    except InvalidInput as exc:
        raise InvalidInput(str(exc).replace("run_at", "expires_at")) from None
    assert expiry is not None
    if expiry <= (due or now):
        raise InvalidInput(
            f"expires_at {expiry.isoformat()} is not after the send "
            f"({(due or now).isoformat()}): give a later expiry, or none; nothing was recorded"
        )
    return due, expiry


#: How every refusal of a ``record_many`` batch ends.
_NOTHING = "; nothing was recorded"

#: One chunk of a ``record_many`` batch: its frozen records and each one's further parts.
_Chunk = tuple[builtins.list[NewEmail], builtins.list[builtins.list[DomainPart]]]


def _check_keys(idempotency_keys: Iterable[str | None] | None, total: int | None) -> None:
    """Refuse ``idempotency_keys`` given as a string, or (both lists) of another length."""
    if idempotency_keys is None:
        return
    if isinstance(idempotency_keys, (str, bytes)):
        count = "a string"
    elif total is not None and isinstance(idempotency_keys, Sized):
        if len(idempotency_keys) == total:
            return
        count = f"{len(idempotency_keys)} entries"
    else:
        return  # an iterator: its length is checked as it is read
    raise InvalidInput(
        f"idempotency_keys is {count} for {total} messages: give a list with one "
        "key (or None) per message; nothing was recorded"
    )


class _Envelopes(Column[tuple[str, Sequence[str]]]):
    """Each message's ``(sender, recipients)`` for :meth:`Outbox.record_many`: its own from
    ``envelopes``, else the batch's ``sender`` and ``recipients``; bad shapes refused."""

    def __init__(
        self,
        envelopes: Iterable[tuple[str, Sequence[str]]] | None,
        total: int | None,
        sender: str | None,
        recipients: Sequence[str] | None,
    ) -> None:
        super().__init__("envelopes", envelopes, "messages", note=_NOTHING)
        self.shared = (sender, recipients)
        if envelopes is None:
            return
        if sender is not None or recipients is not None:
            raise InvalidInput(
                "give envelopes= (one sender and recipients per message) or sender= and "
                "recipients= (the same for every message), not both; nothing was recorded"
            )
        if isinstance(envelopes, (str, bytes)) or (
            total is not None and isinstance(envelopes, Sized) and len(envelopes) != total
        ):
            size = (
                "a string" if isinstance(envelopes, (str, bytes)) else f"{len(envelopes)} entries"
            )
            raise InvalidInput(
                f"envelopes is {size} for {total} messages: give a list with one (sender, "
                "recipients) pair per message; nothing was recorded"
            )

    def pairs(
        self, count: int, start: int
    ) -> builtins.list[tuple[str | None, Sequence[str] | None]]:
        """The next ``count`` messages' envelopes (``start``: the first one's index)."""
        if self.items is None:
            return [self.shared] * count
        pairs: builtins.list[tuple[str | None, Sequence[str] | None]] = []
        for index, envelope in enumerate(self.take(count), start):
            if not isinstance(envelope, (tuple, list)) or len(envelope) != 2:
                raise InvalidInput(
                    f"envelope {index} is not a (sender, recipients) pair, e.g. "
                    "('shop@example.com', ['ann@example.com']); nothing was recorded"
                )
            pairs.append((envelope[0], envelope[1]))
        return pairs


@dataclass(slots=True)
class _Recording:
    """One ``record_many`` call's chunks: each validated and frozen when the store asks
    for it, and its results added to what the call returns once it is written."""

    outbox: Outbox
    keys: Column[str]
    envelopes: _Envelopes
    now: datetime
    due: datetime | None
    expiry: datetime | None
    priority: int
    as_ids: bool
    job: DeliveryJobSpec | None = None
    seen: set[str] = field(default_factory=set)
    recorded: builtins.list[RecordedEmail] = field(default_factory=builtins.list)
    ids: BatchIds = field(default_factory=BatchIds)

    def chunk(self, part: builtins.list[EmailMessage | bytes], start: int) -> _Chunk:
        """``part`` (the messages from index ``start``) validated, frozen and split per
        domain when configured; a bad one raises naming its index."""
        outbox, keys = self.outbox, self.keys.take(len(part))
        emails: builtins.list[NewEmail] = []
        for index, (message, given_key, envelope) in enumerate(
            zip(part, keys, self.envelopes.pairs(len(part), start), strict=True), start
        ):
            try:
                key = check_key(given_key)
                if key is not None and key in self.seen:
                    raise InvalidInput(f"idempotency key {key!r} appears twice in one batch")
                emails.append(
                    outbox._freeze(
                        message,
                        key=key,
                        sender=envelope[0],
                        recipients=envelope[1],
                        now=self.now,
                        due=self.due,
                        expiry=self.expiry,
                        priority=self.priority,
                    )
                )
            except InvalidInput as exc:
                raise type(exc)(
                    f"message {index} of the batch: {exc}; nothing was recorded"
                ) from exc
            if key is not None:
                self.seen.add(key)
        split = [outbox._split(email) for email in emails]
        job = self.job or outbox._job
        return [email for email, _ in split], [Outbox._parts(job, others) for _, others in split]

    def chunks(
        self,
        first: builtins.list[EmailMessage | bytes],
        more: Iterator[builtins.list[EmailMessage | bytes]],
    ) -> Iterator[_Chunk]:
        """Every chunk in turn, each read from the input only when the store asks."""
        start = 0
        for part in chain((first,), more):
            yield self.chunk(part, start)
            start += len(part)
        self.finish(start)

    def finish(self, total: int) -> None:
        """Refuse keys or envelopes left over once the ``total`` messages are read."""
        self.keys.finish(total)
        self.envelopes.finish(total)

    def done(self, rows: Sequence[RecordedRows]) -> None:
        """Add a written chunk's results to what the call returns (then drop the chunk)."""
        if not self.as_ids:
            self.recorded.extend(recorded_views(rows))
            return
        for row in rows:
            if row.created:
                self.ids.add_created((row.email["id"],))
            else:
                self.ids.add_existing(row.email["id"])
