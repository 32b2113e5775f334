"""Amazon SES bounce and complaint notifications, read into suppression events.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

SES publishes a JSON notification (``notificationType``, or ``eventType`` for a
configuration set's event publishing) for each bounce, complaint and delivery:

* ``Bounce`` with ``bounceType`` ``Permanent``: each of ``bouncedRecipients`` is a hard
  bounce (suppressed, its status and ``diagnosticCode`` kept as detail);
* ``Bounce`` with ``bounceType`` ``Transient`` or ``Undetermined``: each recipient is a
  soft bounce (kept and counted, never suppressed: a full mailbox recovers);
* ``Complaint``: each of ``complainedRecipients`` is suppressed as a complaint;
* anything else (``Delivery``, ``Send``, ``Open`` …) changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mailfathom.errors import InvalidInput

__all__ = ["SesEvent", "parse_ses_notification"]

_BOUNCE_TYPES = ("Permanent", "Transient", "Undetermined")


@dataclass(frozen=True, slots=True)
class SesEvent:
    """One recipient of a notification: ``kind`` is ``hard_bounce``, ``complaint`` or
    ``soft``; ``detail`` the evidence SES gave."""

    address: str
    kind: str
    detail: str | None


def parse_ses_notification(text: str) -> tuple[str, tuple[SesEvent, ...]]:
    """The notification type and the events of the SES notification ``text`` (JSON); a
    type other than Bounce or Complaint has none. InvalidInput for anything else."""
    try:
        data: Any = json.loads(text)
    except (ValueError, RecursionError):
        raise InvalidInput(
            "the SNS Message is not an SES notification (JSON): subscribe the topic to SES "
            "bounce and complaint notifications only"
        ) from None
    if not isinstance(data, Mapping):
        raise InvalidInput("the SNS Message is not an SES notification (a JSON object)")
    kind = data.get("notificationType", data.get("eventType"))
    if not isinstance(kind, str):
        raise InvalidInput(
            "the SNS Message has no notificationType (nor eventType): it is not an SES "
            "notification; subscribe the topic to SES notifications only"
        )
    if kind == "Bounce":
        return kind, _bounce(_section(data, "bounce"))
    if kind == "Complaint":
        complaint = _section(data, "complaint")
        feedback = complaint.get("complaintFeedbackType")
        detail = f"complaint: {feedback}" if isinstance(feedback, str) else "complaint"
        addresses = _recipients(complaint, "complainedRecipients")
        return kind, tuple(SesEvent(a, "complaint", detail) for a, _ in addresses)
    return kind, ()


def _bounce(bounce: Mapping[str, Any]) -> tuple[SesEvent, ...]:
    bounce_type = bounce.get("bounceType")
    if bounce_type not in _BOUNCE_TYPES:
        raise InvalidInput(
            f"bounce.bounceType {str(bounce_type)[:40]!r} is not one of {list(_BOUNCE_TYPES)}"
        )
    subtype = bounce.get("bounceSubType")
    kind = "hard_bounce" if bounce_type == "Permanent" else "soft"
    events = []
    for address, recipient in _recipients(bounce, "bouncedRecipients"):
        parts = [recipient.get("status"), recipient.get("diagnosticCode")]
        words = [str(p) for p in parts if isinstance(p, str) and p]
        label = f"{bounce_type}/{subtype}" if isinstance(subtype, str) else str(bounce_type)
        events.append(SesEvent(address, kind, " ".join([*words, f"({label})"])))
    return tuple(events)


def _section(data: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    section = data.get(name)
    if not isinstance(section, Mapping):
        raise InvalidInput(f"the SES notification has no {name!r} object")
    return section


def _recipients(section: Mapping[str, Any], name: str) -> list[tuple[str, Mapping[str, Any]]]:
    found = section.get(name)
    if not isinstance(found, list) or not found:
        raise InvalidInput(f"the SES notification's {name} must be a non-empty list")
    out = []
    for index, recipient in enumerate(found):
        address = recipient.get("emailAddress") if isinstance(recipient, Mapping) else None
        if not isinstance(address, str):
            raise InvalidInput(f"{name}[{index}] has no emailAddress")
        out.append((address, recipient))
    return out
