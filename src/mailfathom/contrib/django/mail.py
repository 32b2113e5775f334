"""``EMAIL_BACKEND = "mailfathom.contrib.django.EmailBackend"``: Django's mail into the outbox.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

``send_mail``, ``send_mass_mail``, ``EmailMessage.send`` and
``EmailMultiAlternatives`` record each message with ``mf.outbox.record`` on
Django's own database connection, so a message sent inside ``transaction.atomic()``
exists only if the block commits — and is then delivered by a worker, staged so
that a crash never sends it twice unnoticed. Nothing is sent over SMTP here.
"""

from __future__ import annotations

from collections.abc import Sequence
from email.utils import parseaddr
from typing import Any

from django.core.mail import EmailMessage
from django.core.mail.backends.base import BaseEmailBackend
from django.db import transaction

from mailfathom.contrib.django.app import config, django_connection, get_app

__all__ = ["EmailBackend"]


class EmailBackend(BaseEmailBackend):
    """Records Django email messages into mailfathom's outbox, in the caller's transaction.

    A call's messages are recorded together (one savepoint): all of them or, on an
    error, none. ``fail_silently=True`` turns that error into a count of 0.
    """

    def __init__(self, fail_silently: bool = False, **kwargs: Any) -> None:
        super().__init__(fail_silently=fail_silently, **kwargs)

    def send_messages(self, email_messages: Sequence[EmailMessage]) -> int:
        """Record every message that has recipients; return how many were recorded."""
        wanted = [message for message in email_messages if message.recipients()]
        if not wanted:
            return 0
        outbox = get_app().outbox
        try:
            with transaction.atomic(using=config().alias):
                connection = django_connection()
                for message in wanted:
                    outbox.record(
                        message.message().as_bytes(linesep="\r\n"),
                        sender=parseaddr(message.from_email)[1] or message.from_email,
                        recipients=[parseaddr(to)[1] or to for to in message.recipients()],
                        connection=connection,
                    )
        except Exception:
            if not self.fail_silently:
                raise
            return 0
        return len(wanted)
