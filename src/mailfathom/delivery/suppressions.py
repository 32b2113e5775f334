"""``mf.suppressions``: the addresses mailfathom never sends to again.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

An address lands here after a hard bounce or a complaint (or an operator's decision),
because a sender that keeps mailing such addresses gets its account suspended by
its provider. A delivery attempt leaves a suppressed recipient out: that recipient
is refused at once (a local ``550`` whose text starts with ``suppressed``, nothing
sent to it) and the others go on; a record all of whose recipients are suppressed
is Refused with the reason "suppressed" and sends nothing. Addresses are matched
whatever their case. Every add and lift is audited (who, when, why). A soft bounce (a
``4.x.x`` DSN, a webhook's soft bounce) is kept as an audit event of its own (action
``soft_bounce``) and counted; it never suppresses the address: a full mailbox or a
greylisting server recovers, and the delivery itself already retries.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from mailfathom.clock import Clock
from mailfathom.delivery.dsn import DsnRecipient, parse_dsn
from mailfathom.delivery.ses_notifications import parse_ses_notification
from mailfathom.errors import InvalidInput, NotFound
from mailfathom.store.database import Cursor
from mailfathom.store.suppressions.repository import (
    SuppressionEventRow,
    SuppressionRow,
    SuppressionsRepository,
)
from mailfathom.validate import check_actor, check_limit, check_text

__all__ = [
    "SUPPRESSION_REASONS",
    "DsnReport",
    "EventReport",
    "SesReport",
    "Suppression",
    "SuppressionEvent",
    "Suppressions",
    "address_key",
    "normalise",
]

#: Why an address is suppressed: a permanent delivery failure, a spam complaint, or an
#: operator's decision.
SUPPRESSION_REASONS = ("hard_bounce", "complaint", "manual")


@dataclass(frozen=True, slots=True)
class Suppression:
    """One suppressed address: why (``reason``), where that came from (``source``, e.g.
    ``operator``, ``dsn``, ``ses``), the evidence (``detail``), when and by whom."""

    address: str
    reason: str
    source: str
    detail: str | None
    created_at: datetime
    actor: str

    @classmethod
    def from_row(cls, row: SuppressionRow) -> Suppression:
        """Build from a stored row."""
        return cls(**row)

    def describe(self) -> str:
        """One line for a recipient's outcome: ``suppressed: hard_bounce (dsn) since …``."""
        return (
            f"suppressed: {self.reason} ({self.source}) since "
            f"{self.created_at.isoformat(timespec='seconds')}; nothing was sent to this address"
        )


@dataclass(frozen=True, slots=True)
class SuppressionEvent:
    """One audited event of the list: an add or lift of a suppression (``action``
    ``add``, ``lift``), or a soft bounce of the address (``soft_bounce``: kept and
    counted, suppressing nothing)."""

    id: int
    address: str
    at: datetime
    actor: str
    action: str
    reason: str
    source: str
    detail: str | None

    @classmethod
    def from_row(cls, row: SuppressionEventRow) -> SuppressionEvent:
        """Build from a stored audit row."""
        return cls(**row)


@dataclass(frozen=True, slots=True)
class DsnReport:
    """What :meth:`Suppressions.ingest_dsn` found in one delivery status notification:
    the hard bounces (each address now suppressed), the soft bounces (each kept as a
    ``soft_bounce`` event, never suppressed) and the other recipients it named
    (delivered, relayed …)."""

    hard: tuple[DsnRecipient, ...]
    soft: tuple[DsnRecipient, ...]
    other: tuple[DsnRecipient, ...]


@dataclass(frozen=True, slots=True)
class EventReport:
    """What :meth:`Suppressions.ingest_events` did: the entries of the addresses the
    events suppress (hard bounces and complaints, new or already there) and the
    addresses that bounced soft (each kept as a ``soft_bounce`` event, never suppressed)."""

    suppressed: tuple[Suppression, ...]
    soft: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SesReport:
    """What :meth:`Suppressions.ingest_ses` did with one SES notification: its type, the
    entries of the addresses it suppresses (new or already there), the addresses that
    bounced soft, and whether it had been applied before (``duplicate``: nothing done)."""

    notification_type: str
    suppressed: tuple[Suppression, ...]
    soft: tuple[str, ...]
    duplicate: bool


#: The fields an event of :meth:`Suppressions.ingest_events` may carry.
_EVENT_FIELDS = frozenset({"event", "bounce", "address", "detail", "source"})


def _event(index: int, event: object) -> tuple[str, str, str | None, str]:
    """(address, kind: hard_bounce | complaint | soft, detail, source) of one event."""
    where = f"event {index}"
    if not isinstance(event, Mapping):
        raise InvalidInput(f"{where} must be an object, not {type(event).__name__}")
    unknown = sorted(set(event) - _EVENT_FIELDS)
    if unknown:
        raise InvalidInput(f"{where} has unknown fields {unknown}: use {sorted(_EVENT_FIELDS)}")
    kind = event.get("event")
    bounce = event.get("bounce")
    if kind == "complaint":
        found = "complaint"
    elif kind == "bounce" and bounce in ("hard", "soft"):
        found = "hard_bounce" if bounce == "hard" else "soft"
    else:
        raise InvalidInput(
            f'{where}: give "event": "complaint", or "event": "bounce" with '
            f'"bounce": "hard" or "soft" (got event={kind!r}, bounce={bounce!r})'
        )
    detail = event.get("detail")
    if detail is not None:
        detail = check_text(f"{where}: detail", detail)
    source = event.get("source", "webhook")
    source = check_text(f"{where}: source", source).strip()
    if not 1 <= len(source) <= 100:
        raise InvalidInput(f"{where}: source must be 1-100 characters, e.g. 'webhook'")
    try:
        address = normalise(event.get("address"))
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc}") from None
    return address, found, detail, source


def address_key(address: str) -> str:
    """The form the list matches an address by (trimmed, lower-cased): the one rule for
    storing an entry and for looking a recipient up."""
    return address.strip().lower()


def normalise(address: object) -> str:
    """``address`` as the list stores it (:func:`address_key`), or a clear error."""
    text = check_text("address", address).strip()
    local, at, domain = text.rpartition("@")
    if not at or not local or not domain or len(text) > 320 or any(c.isspace() for c in text):
        raise InvalidInput(
            f"address {address!r} is not an email address: give one like 'user@example.com'; "
            "nothing was changed"
        )
    return address_key(text)


class Suppressions:
    """Add, lift, look up and list suppressed addresses (every change audited)."""

    def __init__(self, store: SuppressionsRepository, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    def add(
        self,
        address: str,
        *,
        actor: str,
        reason: str = "manual",
        source: str = "operator",
        detail: str | None = None,
    ) -> Suppression:
        """Suppress ``address``: no delivery sends to it from now on. ``reason`` is one of
        ``hard_bounce``, ``complaint``, ``manual``; ``source`` says where the evidence came
        from; ``detail`` holds it (e.g. the bounce's diagnostic). An address already on
        the list keeps its entry, which is returned; nothing is written then."""
        check_actor(actor, None)
        if detail is not None:
            check_text("detail", detail)
        if reason not in SUPPRESSION_REASONS:
            raise InvalidInput(
                f"reason {reason!r} is not a suppression reason: use one of "
                f"{', '.join(SUPPRESSION_REASONS)}; nothing was changed"
            )
        source = check_text("source", source).strip()
        if not 1 <= len(source) <= 100:
            raise InvalidInput("source must be 1-100 characters, e.g. 'operator'")
        row, _ = self._store.add(
            normalise(address),
            reason=reason,
            source=source,
            detail=detail,
            actor=actor,
            now=self._clock.now(),
        )
        return Suppression.from_row(row)

    def lift(self, address: str, *, actor: str, reason: str | None = None) -> Suppression:
        """Take ``address`` off the list (deliveries send to it again); returns the entry
        lifted. :class:`~mailfathom.NotFound` when it was not suppressed."""
        check_actor(actor, reason)
        key = normalise(address)
        row = self._store.lift(key, actor=actor, detail=reason, now=self._clock.now())
        if row is None:
            raise NotFound(f"{key} is not on the suppression list: nothing to lift")
        return Suppression.from_row(row)

    def get(self, address: str) -> Suppression | None:
        """The entry of ``address``, or None when it is not suppressed."""
        row = self._store.get(normalise(address))
        return None if row is None else Suppression.from_row(row)

    def is_suppressed(self, address: str) -> bool:
        """Whether deliveries leave ``address`` out."""
        return self.get(address) is not None

    def list(
        self, *, search: str | None = None, limit: int = 100, after: str | None = None
    ) -> builtins.list[Suppression]:
        """Entries by address, ``limit`` at most; ``search`` keeps those whose address
        contains it (case-insensitive); ``after`` pages on (the last address seen)."""
        check_limit(limit)
        if search is not None:
            search = check_text("search", search).lower()
        if after is not None:
            after = check_text("after", after).lower()
        rows = self._store.entries(search=search, limit=limit, after=after)
        return [Suppression.from_row(row) for row in rows]

    def counts(self) -> dict[str, int]:
        """How many addresses are suppressed, by reason."""
        return self._store.counts()

    def ingest_dsn(self, data: bytes, *, actor: str = "dsn") -> DsnReport:
        """Read a delivery status notification (RFC 3464, the bounce an SMTP server sends
        back, as bytes: from a mailbox you fetch, or a webhook) and suppress every
        recipient that bounced hard (``Action: failed``, status ``5.x.x``) with reason
        ``hard_bounce``, source ``dsn`` and the status and diagnostic as detail. Soft
        bounces (``delayed``, ``4.x.x``) are kept as ``soft_bounce`` events and never
        suppress. A message that is no DSN raises :class:`~mailfathom.InvalidInput` and
        changes nothing."""
        check_actor(actor, None)
        found = parse_dsn(data)
        hard = tuple(r for r in found if r.hard)
        for recipient in found:  # every address checked before any is written
            if recipient.hard or recipient.soft:
                normalise(recipient.address)
        for recipient in hard:
            detail = " ".join(filter(None, [recipient.status, recipient.diagnostic]))
            self.add(
                recipient.address,
                actor=actor,
                reason="hard_bounce",
                source="dsn",
                detail=detail or None,
            )
        soft = tuple(r for r in found if r.soft)
        for recipient in soft:
            detail = " ".join(filter(None, [recipient.status, recipient.diagnostic]))
            self._soft_bounce(recipient.address, source="dsn", detail=detail or None, actor=actor)
        other = tuple(r for r in found if not r.hard and not r.soft)
        return DsnReport(hard=hard, soft=soft, other=other)

    def ingest_events(
        self, events: Sequence[Mapping[str, object]], *, actor: str = "webhook"
    ) -> EventReport:
        """Apply bounce and complaint events, e.g. from a provider's webhook mapped to this
        form: ``{"event": "bounce", "bounce": "hard" | "soft", "address": …}`` or
        ``{"event": "complaint", "address": …}``, each with an optional ``detail`` and
        ``source`` (default ``webhook``). A hard bounce or a complaint suppresses the
        address; a soft bounce is kept as a ``soft_bounce`` event and never suppresses.
        Every event is checked before any is applied: one bad event raises
        :class:`~mailfathom.InvalidInput` naming it, and nothing changes."""
        check_actor(actor, None)
        if isinstance(events, (str, bytes, Mapping)) or not isinstance(events, Sequence):
            raise InvalidInput("events must be a list of event objects; nothing was changed")
        parsed = [_event(index, event) for index, event in enumerate(events)]
        suppressed: builtins.list[Suppression] = []
        soft: builtins.list[str] = []
        for address, kind, detail, source in parsed:
            if kind == "soft":
                self._soft_bounce(address, source=source, detail=detail, actor=actor)
                soft.append(address)
                continue
            suppressed.append(
                self.add(address, actor=actor, reason=kind, source=source, detail=detail)
            )
        return EventReport(suppressed=tuple(suppressed), soft=tuple(soft))

    def ingest_ses(
        self, notification: str, *, receipt: str, actor: str = "sns", source: str = "ses"
    ) -> SesReport:
        """Apply one Amazon SES notification (the JSON text SNS delivers as ``Message``):
        a permanent bounce or a complaint suppresses each recipient it names (reason
        ``hard_bounce`` or ``complaint``, the status and diagnostic as detail); a
        transient or undetermined bounce is kept as a ``soft_bounce`` event and never
        suppresses; any other type (``Delivery`` …) changes nothing. ``receipt`` (the SNS
        ``MessageId``) makes it idempotent: a notification delivered again changes nothing
        and reports ``duplicate``. Every address is checked before anything is written:
        a bad one raises :class:`~mailfathom.InvalidInput` and changes nothing."""
        check_actor(actor, None)
        receipt = check_text("receipt", receipt).strip()
        if not 1 <= len(receipt) <= 300:
            raise InvalidInput("receipt must be 1-300 characters: the notification's id")
        kind, events = parse_ses_notification(notification)
        checked = [(normalise(e.address), e) for e in events]
        adds = [(key, e.kind, e.detail) for key, e in checked if e.kind != "soft"]
        softs = [(key, e.detail) for key, e in checked if e.kind == "soft"]
        if not events:
            return SesReport(kind, (), (), duplicate=False)
        rows = self._store.ingest_once(
            receipt, adds, softs, source=source, actor=actor, now=self._clock.now()
        )
        if rows is None:
            return SesReport(kind, (), (), duplicate=True)
        entries = tuple(Suppression.from_row(row) for row in rows)
        return SesReport(kind, entries, tuple(key for key, _ in softs), duplicate=False)

    def events(self, address: str) -> builtins.list[SuppressionEvent]:
        """Who added and lifted ``address``, when and why, and its soft bounces (action
        ``soft_bounce``), oldest first."""
        return [SuppressionEvent.from_row(row) for row in self._store.events(normalise(address))]

    def soft_bounces(
        self, *, limit: int = 100, before_id: int | None = None
    ) -> builtins.list[SuppressionEvent]:
        """The soft bounces recorded, newest first, ``limit`` at most; ``before_id`` pages
        on (the id of the last one seen). They suppress nothing: an operator reads them
        to spot an address or a domain that keeps deferring."""
        check_limit(limit)
        if before_id is not None and (
            isinstance(before_id, bool) or not isinstance(before_id, int)
        ):
            raise InvalidInput(f"before_id must be an event id (an integer), not {before_id!r}")
        rows = self._store.recent_events("soft_bounce", limit=limit, before_id=before_id)
        return [SuppressionEvent.from_row(row) for row in rows]

    def event_counts(self) -> dict[str, int]:
        """How many audit events are stored, by action: ``add``, ``lift``, ``soft_bounce``."""
        return self._store.event_counts()

    def _soft_bounce(self, address: str, *, source: str, detail: str | None, actor: str) -> None:
        """Keep a soft bounce as an audit event: counted and shown, never a suppression."""
        self._store.soft_bounce(
            normalise(address), source=source, detail=detail, actor=actor, now=self._clock.now()
        )

    def among(
        self, addresses: Sequence[str], *, cursor: Cursor | None = None
    ) -> dict[str, Suppression]:
        """The entries of those of ``addresses`` that are suppressed, by
        :func:`address_key`: read on ``cursor`` when given (a claim that counts delivery
        attempts reads the list in its own transaction, as the attempts start)."""
        rows = self._store.among([address_key(a) for a in addresses], cursor=cursor)
        return {key: Suppression.from_row(row) for key, row in rows.items()}
