"""``EMAIL_BACKEND = "mailfathom.contrib.django.EmailBackend"``: Django's mail into the outbox.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

``send_mail``, ``send_mass_mail``, ``EmailMessage.send`` and
``EmailMultiAlternatives`` record their messages with one ``mf.outbox.record_many``
on Django's own database connection, so a message sent inside ``transaction.atomic()``
exists only if the block commits — and is then delivered by a worker, staged so
that a crash never sends it twice unnoticed. Nothing is sent over SMTP here.

On PostgreSQL a call costs one round trip: the write, in a savepoint of the
caller's transaction (so a failed call leaves that transaction usable), sent with
the savepoint and its release in one pipelined flight. Which database and schema
the connection is on is checked once per connection, not on every call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from email.utils import parseaddr
from typing import Any

from django.core.mail import EmailMessage
from django.core.mail.backends.base import BaseEmailBackend

from mailfathom.contrib.django.app import django_connection, get_app

__all__ = ["EmailBackend"]


class EmailBackend(BaseEmailBackend):
    """Records Django email messages into mailfathom's outbox, in the caller's transaction.

    A call's messages are recorded together (one ``record_many``, one savepoint): all of
    them or, on an error, none. ``fail_silently=True`` turns that error into a count of 0.
    """

    def __init__(self, fail_silently: bool = False, **kwargs: Any) -> None:
        super().__init__(fail_silently=fail_silently, **kwargs)

    def send_messages(self, email_messages: Sequence[EmailMessage]) -> int:
        """Record every message that has recipients; return how many were recorded."""
        wanted = [message for message in email_messages if message.recipients()]
        if not wanted:
            return 0
        try:
            get_app().outbox.record_many(
                [message.message().as_bytes(linesep="\r\n") for message in wanted],
                envelopes=[_envelope(message) for message in wanted],
                connection=django_connection(),
                returning="ids",  # the count is all Django asks for: no records built
            )
        except Exception:
            if not self.fail_silently:
                raise
            return 0
        return len(wanted)


def _envelope(message: EmailMessage) -> tuple[str, list[str]]:
    """The message's SMTP sender and recipients (Bcc included), as bare addresses."""
    return _bare(message.from_email), [_bare(to) for to in message.recipients()]


#: A bare ``dot-atom@dot-atom`` address, which ``parseaddr`` returns as it is.
_PLAIN = re.compile(
    r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
    r"@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*"
)


def _bare(address: str) -> str:
    """The address of ``"Name <address>"`` (or of a bare address: itself, unparsed)."""
    if _PLAIN.fullmatch(address):
        return address
    return parseaddr(address)[1] or address
