"""The capture SMTP server of ``mailfathom dev``, and the inbox it fills.

Every message a local program submits (the dev worker, delivering the outbox)
is accepted and kept — never relayed — so a developer sees exactly what would
have gone out. Messages are stored as a **Maildir** folder (the standard
one-file-per-message layout, written atomically: ``tmp/`` then a rename into
``new/``), with the SMTP envelope prepended as ``Return-Path`` and one
``Delivered-To`` per recipient, as a delivering MTA does.

Why files and not a table: captured mail is development data that must not
mix with the production schema (no migration for a dev-only table); the web
console and the capture server may be different processes, and a Maildir is
safe to write and read concurrently without locks; it survives restarts; and
any mail tool (mutt -f, a script with :mod:`mailbox`) can read it.
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import mailbox
import re
import socket
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from email.parser import BytesHeaderParser
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

from mailfathom.errors import ConfigurationError, NotFound

__all__ = ["CaptureServer", "Inbox", "InboxMessage"]

_KEY = re.compile(r"[A-Za-z0-9._,:=-]{1,200}")  # fullmatch: "$" would pass a trailing LF


@dataclass(frozen=True, slots=True)
class InboxMessage:
    """One captured message: its key in the Maildir, envelope, headers and raw bytes.

    A message listed by :meth:`Inbox.messages` holds its **headers only**
    (``headers_only``: ``raw`` is the head, ``size`` the whole file): a check on its
    body would pass wrongly, so :meth:`parsed` refuses it. :meth:`Inbox.get` (or the
    ``mailfathom_mail`` fixture's ``messages``) gives the whole message.
    """

    key: str
    received_at: datetime
    mail_from: str
    rcpt_to: list[str]
    subject: str
    sender: str
    to: str
    size: int
    raw: bytes
    #: True when ``raw`` is the head only (a listing): read it whole with ``Inbox.get``.
    headers_only: bool = False

    def parsed(self) -> EmailMessage:
        """The whole message parsed with the modern email policy; :class:`ValueError` for
        a message listed with its headers only (its body would look empty)."""
        if self.headers_only:
            raise ValueError(
                f"message {self.key} was listed with its headers only (Inbox.messages()): "
                "read it whole with inbox.get(message.key) before looking at its body"
            )
        message = email.message_from_bytes(self.raw, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        return message


class Inbox:
    """The captured messages in a Maildir folder, newest first."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        try:
            self.folder.parent.mkdir(parents=True, exist_ok=True)
            self._box = mailbox.Maildir(self.folder, create=True)
        except OSError as exc:
            raise ConfigurationError(
                f"cannot use {self.folder} as the capture inbox ({exc}): choose a writable "
                "folder with --inbox"
            ) from exc

    def add(self, mail_from: str, rcpt_to: list[str], data: bytes) -> str:
        """Store one delivery (atomically); returns its key."""
        trace = f"Return-Path: <{mail_from}>\r\n" + "".join(
            f"Delivered-To: {rcpt}\r\n" for rcpt in rcpt_to
        )
        return self._box.add(trace.encode("utf-8") + data)

    def count(self) -> int:
        """How many messages are captured (a directory listing; nothing is read)."""
        return len(self._box)

    def messages(self, limit: int = 200) -> list[InboxMessage]:
        """The newest ``limit`` messages, **headers only** (``raw`` is the head, ``size``
        the whole, ``headers_only`` True): envelope, subject, sender and recipients. For
        the body, read one whole with :meth:`get` (``inbox.get(message.key)``).

        Only those ``limit`` files are opened, and only their heads are read and parsed
        (newest first by the delivery time in the Maildir file name), so a large or
        hostile inbox costs the same as a small one; a message whose head cannot be
        parsed is listed with a note instead of breaking the page.
        """
        keys = sorted(self._box.iterkeys(), key=_arrival, reverse=True)
        found: list[InboxMessage] = []
        for key in keys[:limit]:
            try:
                found.append(self._read(key, head_only=True))
            except KeyError:  # cleared meanwhile
                continue
        return found

    def get(self, key: str) -> InboxMessage:
        """The message stored under ``key``; :class:`NotFound` if there is none."""
        if not _KEY.fullmatch(key):
            raise NotFound(f"no captured message has key {key!r}: open one from the inbox list")
        try:
            return self._read(key)
        except KeyError:
            raise NotFound(
                f"no captured message has key {key!r}: it may have been cleared"
            ) from None

    def clear(self) -> int:
        """Delete every captured message (none is read); returns how many there were."""
        keys = list(self._box.iterkeys())
        for key in keys:
            self._box.discard(key)
        return len(keys)

    def _read(self, key: str, *, head_only: bool = False) -> InboxMessage:
        with self._box.get_file(key) as file:
            raw = _head(file) if head_only else file.read()
            file.seek(0, 2)
            size = file.tell()
        seconds, micros = _arrival(key)[:2]
        try:
            head = BytesHeaderParser(policy=email.policy.default).parsebytes(raw)
            mail_from = str(head.get("Return-Path", "")).strip().strip("<>")
            rcpt_to = [str(value) for value in head.get_all("Delivered-To", [])]
            subject, sender, to = (str(head.get(name, "")) for name in ("Subject", "From", "To"))
        except Exception as exc:  # one hostile message must not hide the rest
            mail_from, rcpt_to, sender, to = "", [], "", ""
            subject = f"(its headers cannot be read: {type(exc).__name__})"
        return InboxMessage(
            key=key,
            received_at=datetime.fromtimestamp(seconds + micros / 1e6, UTC),
            mail_from=mail_from,
            rcpt_to=rcpt_to,
            subject=subject,
            sender=sender,
            to=to,
            size=size,
            raw=raw,
            headers_only=head_only,
        )


_HEAD_LIMIT = 256 * 1024  # a longer head is cut here for the list


def _head(file: Iterable[bytes]) -> bytes:
    """The header block of a message file (up to the first empty line), at most 256 KiB."""
    lines: list[bytes] = []
    read = 0
    for line in file:
        if line in (b"\r\n", b"\n") or read > _HEAD_LIMIT:
            break
        lines.append(line)
        read += len(line)
    return b"".join(lines) + b"\r\n"


def _arrival(key: str) -> tuple[int, int, str]:
    """When a message arrived, from its Maildir name (``<seconds>.M<micros>P<pid>…``)."""
    seconds, _, rest = key.partition(".")
    micros = re.match(r"M(\d{1,6})", rest)
    if not seconds.isdigit():
        return (0, 0, key)
    return (int(seconds), int(micros.group(1)) if micros else 0, key)


class _Capture:
    """The aiosmtpd handler: accept every message and keep it in the inbox."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:  # noqa: N802
        data = envelope.original_content or b""
        self.inbox.add(str(envelope.mail_from or ""), [str(r) for r in envelope.rcpt_tos], data)
        return "250 2.0.0 OK: captured, not relayed"


class _Controller(Controller):
    """aiosmtpd's controller, closing every open session when it stops (so no transport
    is left for the garbage collector to complain about)."""

    def __init__(self, handler: Any, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self._sessions: weakref.WeakSet[SMTP] = weakref.WeakSet()

    def factory(self) -> SMTP:
        smtp: SMTP = super().factory()  # type: ignore[no-untyped-call]
        self._sessions.add(smtp)
        return smtp

    def stop(self, no_assert: bool = False) -> None:
        if self.loop.is_running():
            closing = asyncio.run_coroutine_threadsafe(self._close_sessions(), self.loop)
            closing.result(timeout=5)
        super().stop(no_assert)

    async def _close_sessions(self) -> None:
        for smtp in list(self._sessions):
            transport = smtp.transport
            if transport is not None and not transport.is_closing():
                transport.close()
        await asyncio.sleep(0.01)  # let connection_lost run for each


class CaptureServer:
    """A local SMTP server (no TLS, no auth, loopback only) that captures into an inbox."""

    def __init__(self, inbox: Inbox, *, host: str = "127.0.0.1", port: int = 1025) -> None:
        self.inbox = inbox
        self.host = host
        self.port = port
        self._controller: _Controller | None = None

    @property
    def url(self) -> str:
        """The ``smtp_url`` that delivers here."""
        return f"smtp://{self.host}:{self.port}?starttls=off"

    def start(self) -> None:
        """Listen (in a thread of its own); a port already taken is a clear error."""
        with socket.socket() as probe:
            if probe.connect_ex((self.host, self.port)) == 0:
                raise ConfigurationError(
                    f"port {self.port} on {self.host} is taken: stop what listens there or "
                    "choose another with --smtp-port"
                )
        self._controller = _Controller(
            _Capture(self.inbox),
            hostname=self.host,
            port=self.port,
            decode_data=False,
            server_hostname="mailfathom-dev",
            ready_timeout=10.0,
        )
        self._controller.start()

    def stop(self) -> None:
        """Stop listening."""
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    def __enter__(self) -> CaptureServer:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
