"""The outgoing-email state machine: its stages and the only moves between them.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Stages are stored by name (``Recorded``, ``TransmissionBegun`` …). The one
stage that matters most is ``TransmissionBegun``: it is committed after the
server's 354 and before the first byte of the body, so a record found there
later may or may not have been delivered, and is never re-sent automatically.
See docs/outbox.md.
"""

from __future__ import annotations

from enum import StrEnum

from mailfathom.errors import IllegalTransition, InvalidInput

__all__ = ["LEGAL_SOURCES", "OutgoingEmailStage", "check_transition"]


class OutgoingEmailStage(StrEnum):
    """Where an outgoing email stands. Stored as its name."""

    #: Durable, exact bytes frozen; no body has gone out for this record's current try.
    RECORDED = "Recorded"
    #: Written after the server's 354 and before the body: the outcome is not yet known.
    TRANSMISSION_BEGUN = "TransmissionBegun"
    #: The server accepted the message (2xx after the body). Nothing more is owed.
    SENT = "Sent"
    #: Will not be offered again; the failure and per-recipient outcomes are on the record.
    REFUSED = "Refused"
    #: Withdrawn before delivery; nothing was transmitted.
    CANCELLED = "Cancelled"

    @property
    def final(self) -> bool:
        """True for Sent, Refused and Cancelled: nothing will ever move the record again."""
        return self in _FINAL

    @classmethod
    def parse(cls, name: str | OutgoingEmailStage) -> OutgoingEmailStage:
        """The stage called ``name`` (stored name or Python name), or a clear error."""
        if isinstance(name, OutgoingEmailStage):
            return name
        for stage in cls:
            if name in (stage.value, stage.name, stage.name.lower()):
                return stage
        names = ", ".join(s.value for s in cls)
        raise InvalidInput(f"unknown outgoing-email stage {name!r}: use one of {names}")


_FINAL = frozenset(
    {OutgoingEmailStage.SENT, OutgoingEmailStage.REFUSED, OutgoingEmailStage.CANCELLED}
)

_S = OutgoingEmailStage

#: Every legal move: target -> the stages it may come from.
#: Recorded <- TransmissionBegun: a 4xx after the body, or an operator's "send again".
#: Sent <- TransmissionBegun only: the 2xx after the body, or an operator's "delivered".
#: Refused <- Recorded (MAIL/RCPT/DATA 5xx, attempts exhausted) or TransmissionBegun
#: (5xx after the body, or an operator's "give up"). Cancelled <- Recorded only.
LEGAL_SOURCES: dict[OutgoingEmailStage, tuple[OutgoingEmailStage, ...]] = {
    _S.RECORDED: (_S.TRANSMISSION_BEGUN,),
    _S.TRANSMISSION_BEGUN: (_S.RECORDED,),
    _S.SENT: (_S.TRANSMISSION_BEGUN,),
    _S.REFUSED: (_S.RECORDED, _S.TRANSMISSION_BEGUN),
    _S.CANCELLED: (_S.RECORDED,),
}


def check_transition(current: OutgoingEmailStage, target: OutgoingEmailStage) -> None:
    """Raise :class:`IllegalTransition` unless ``current`` may move to ``target``."""
    sources = LEGAL_SOURCES[target]
    if current not in sources:
        raise IllegalTransition(
            current=current.value,
            target=target.value,
            allowed_from=tuple(s.value for s in sources),
        )
