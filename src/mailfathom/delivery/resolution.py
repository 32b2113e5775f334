"""An operator's decision on an unknown outcome, and what it does.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

A record left in TransmissionBegun may or may not have been delivered: the body
went out and no answer was read. Nothing decides that automatically. An
operator, having checked the server's logs or the recipient's mailbox, resolves it:

- ``delivered``: it arrived → Sent; the dead-lettered delivery job is dropped.
- ``send_again``: it did not (or a second copy is acceptable) → Recorded; the
  delivery job is requeued (or replaced), so exactly one more copy is offered.
- ``give_up``: never send it → Refused; the delivery job is dropped.

Every decision is audited (who, when, why) in the same transaction.
"""

from __future__ import annotations

from enum import StrEnum

from mailfathom.delivery.stage import OutgoingEmailStage
from mailfathom.errors import InvalidInput
from mailfathom.store.outbox.rows import DeliveryJobSpec, OperatorResolve

__all__ = ["Resolution", "decision"]


class Resolution(StrEnum):
    """What an operator decided about an unknown outcome."""

    DELIVERED = "delivered"
    SEND_AGAIN = "send_again"
    GIVE_UP = "give_up"

    @classmethod
    def parse(cls, value: str | Resolution) -> Resolution:
        """The resolution called ``value``, or a clear error naming the three."""
        if isinstance(value, Resolution):
            return value
        for resolution in cls:
            if value == resolution.value:
                return resolution
        raise InvalidInput(
            f"unknown resolution {value!r}: use 'delivered' (it arrived), 'send_again' "
            "(send one more copy) or 'give_up' (never send it)"
        )

    @property
    def target(self) -> OutgoingEmailStage:
        """The stage the record moves to."""
        return _TARGETS[self]


_TARGETS = {
    Resolution.DELIVERED: OutgoingEmailStage.SENT,
    Resolution.SEND_AGAIN: OutgoingEmailStage.RECORDED,
    Resolution.GIVE_UP: OutgoingEmailStage.REFUSED,
}


def decision(resolution: Resolution, job: DeliveryJobSpec) -> OperatorResolve:
    """The store work for ``resolution``."""
    return OperatorResolve(
        action=resolution.value,
        to_stage=resolution.target.value,
        deliver_again=resolution is Resolution.SEND_AGAIN,
        job=job,
    )
