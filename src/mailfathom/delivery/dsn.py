"""Delivery status notifications (RFC 3464): which recipients bounced, hard or soft.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

A DSN is a ``multipart/report; report-type=delivery-status`` message whose
``message/delivery-status`` part holds one block of fields per recipient:
``Final-Recipient: rfc822; user@example.com``, ``Action`` (``failed``, ``delayed``,
``delivered``, ``relayed``, ``expanded``) and ``Status`` (RFC 3463: ``5.1.1``).
A recipient with ``Action: failed`` and a ``5.x.x`` status is a **hard** bounce;
``delayed``, or a ``4.x.x`` status, is a **soft** one (worth counting, never a reason
to suppress on its own).
"""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import dataclass
from email.message import Message

from mailfathom.errors import InvalidInput

__all__ = ["DsnRecipient", "parse_dsn"]

_STATUS = re.compile(r"^\s*([245])\.(\d{1,3})\.(\d{1,3})\b")


@dataclass(frozen=True, slots=True)
class DsnRecipient:
    """One recipient of a DSN: its address, the action, the status and the diagnostic."""

    address: str
    action: str
    status: str | None
    diagnostic: str | None

    @property
    def hard(self) -> bool:
        """A permanent failure (``Action: failed``, status ``5.x.x``): suppress."""
        return self.action == "failed" and (self.status or "").startswith("5")

    @property
    def soft(self) -> bool:
        """A temporary failure (``delayed``, or a ``4.x.x`` status): count, never suppress."""
        return self.action == "delayed" or (
            self.action == "failed" and (self.status or "").startswith("4")
        )


def parse_dsn(data: bytes) -> list[DsnRecipient]:
    """The recipients a DSN reports on, in its order; :class:`InvalidInput` when ``data``
    is no delivery status notification."""
    if not isinstance(data, (bytes, bytearray)):
        raise InvalidInput(f"a DSN is the message's bytes, not {type(data).__name__}")
    message = email.message_from_bytes(bytes(data), policy=email.policy.compat32)
    status_part = next(
        (p for p in message.walk() if p.get_content_type() == "message/delivery-status"), None
    )
    if status_part is None:
        raise InvalidInput(
            "this message is not a delivery status notification (RFC 3464: a "
            "multipart/report with a message/delivery-status part); nothing was changed"
        )
    blocks = status_part.get_payload()
    found: list[DsnRecipient] = []
    for block in blocks[1:] if isinstance(blocks, list) else []:  # [0]: per-message fields
        recipient = _recipient(block) if isinstance(block, Message) else None
        if recipient is not None:
            found.append(recipient)
    return found


def _recipient(block: Message) -> DsnRecipient | None:
    final = block.get("Final-Recipient") or block.get("Original-Recipient")
    if final is None:
        return None
    kind, _, address = str(final).partition(";")
    address = (address if address else kind).strip().strip("<>")
    if "@" not in address:
        return None
    status = block.get("Status")
    matched = _STATUS.match(str(status)) if status is not None else None
    diagnostic = block.get("Diagnostic-Code")
    return DsnRecipient(
        address=address,
        action=str(block.get("Action", "")).strip().lower(),
        status=".".join(matched.groups()) if matched else None,
        diagnostic=" ".join(str(diagnostic).split())[:1000] if diagnostic else None,
    )
