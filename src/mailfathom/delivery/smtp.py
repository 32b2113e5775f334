"""The staged SMTP submission: one session, and one mail transaction at a time on it.

Internal. smtplib's low-level calls, so that the submitter always knows its
phase (smtplib raises the same ``SMTPServerDisconnected`` before any command and
after the body). The DATA phase is split by hand: ``DATA`` → 354 → the caller
commits TransmissionBegun (``begin``) → only then the body → the reply to the
end of data, awaited for ``data_timeout`` (RFC 5321 §4.5.3.2: 10 minutes).

What each answer means is decided here and returned as an :class:`Outcome`;
the caller writes it (see DESIGN.md §2 and docs/outbox.md for the table).
"""

from __future__ import annotations

import contextlib
import re
import smtplib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from mailfathom.clock import Clock
from mailfathom.delivery import pipelining
from mailfathom.delivery.phases import PhaseHook, no_phase_hook
from mailfathom.delivery.smtp_url import SmtpTarget
from mailfathom.store.outbox.rows import RecipientReply

__all__ = ["Outcome", "Phase", "Reply", "SessionFailure", "SmtpSession"]

_ENHANCED = re.compile(r"^([245]\.\d{1,3}\.\d{1,3})\b")


class Phase(StrEnum):
    """Where in the submission a session is; decides what a lost connection means."""

    CONNECT = "connect"
    GREETING = "greeting"
    EHLO = "EHLO"
    STARTTLS = "STARTTLS"
    AUTH = "AUTH"
    MAIL = "MAIL FROM"
    RCPT = "RCPT TO"
    DATA = "DATA"
    BODY = "the body"
    REPLY = "the reply to the end of data"


@dataclass(frozen=True, slots=True)
class Reply:
    """One SMTP reply: code (None when malformed), enhanced status code, text."""

    code: int | None
    enhanced_status: str | None
    text: str

    @classmethod
    def of(cls, code: int, message: bytes | str) -> Reply:
        """From smtplib's ``(code, message)``; smtplib reports a malformed code as -1."""
        text = message.decode("utf-8", "replace") if isinstance(message, bytes) else message
        text = " ".join(text.split("\n"))[:2000]
        match = _ENHANCED.match(text)
        return cls(
            code=code if 100 <= code <= 599 else None,
            enhanced_status=match.group(1) if match else None,
            text=text,
        )

    @property
    def positive(self) -> bool:
        """A 2xx reply."""
        return self.code is not None and 200 <= self.code < 300

    @property
    def permanent(self) -> bool:
        """A 5xx reply: the server will never accept this as it stands."""
        return self.code is not None and 500 <= self.code < 600

    def __str__(self) -> str:
        return f"{self.code if self.code is not None else '???'} {self.text}".strip()


class SessionFailure(Exception):
    """No usable session (connect, greeting, EHLO, STARTTLS, AUTH): not a message refusal."""

    def __init__(self, phase: Phase, reason: str, reply: Reply | None = None) -> None:
        super().__init__(f"SMTP session failed at {phase}: {reason}")
        self.phase = phase
        self.reply = reply


OutcomeKind = Literal["sent", "retry", "refused", "unknown", "withdrawn"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one mail transaction ended, before anything is written.

    ``sent``: 2xx after the body; ``retry``: nothing was delivered, try later;
    ``refused``: the server refused the message for good; ``unknown``: the body
    went out and no reply came; ``withdrawn``: the record moved on (a cancel)
    between 354 and the body, so the body was never sent.
    """

    kind: OutcomeKind
    reason: str
    phase: Phase
    reply: Reply | None = None
    recipients: list[RecipientReply] = field(default_factory=list)
    #: Recipient positions that got 4xx while others were accepted (to split off).
    deferred: list[int] = field(default_factory=list)
    #: Seconds the server or provider asked to wait before the next try (HTTP
    #: ``Retry-After``); None: the delivery backoff decides.
    retry_after: float | None = None
    #: What to fix in the transport's configuration when this answer says it cannot
    #: deliver anything as configured (an API key the provider refuses): delivery
    #: pauses without spending the message's attempts (:mod:`mailfathom.delivery.deliver`).
    configuration: str | None = None


class SmtpSession:
    """One SMTP connection, set up and ready for mail transactions, one after another.

    A transaction that reached the server's final answer leaves the session clean
    (RFC 5321 §4.1.1.4: the end of data clears the transaction), so the next one
    starts at once; one that stopped earlier leaves it to be RSET first.
    """

    def __init__(
        self, smtp: smtplib.SMTP, target: SmtpTarget, *, timeout: float, data_timeout: float
    ) -> None:
        self._smtp = smtp
        self.target = target
        self.timeout = timeout
        self.data_timeout = data_timeout
        self.usable = True
        #: True once a transaction ended before the server's final answer: RSET first.
        self.needs_reset = False
        #: True when the pool handed out this session for a second (or later) message.
        self.reused = False

    # -- set-up ------------------------------------------------------------------------

    @classmethod
    def open(cls, target: SmtpTarget, *, timeout: float, data_timeout: float) -> SmtpSession:
        """Connect, read the greeting, EHLO, STARTTLS, AUTH; :class:`SessionFailure` if not."""
        smtp = _connect(target, timeout)
        phase = Phase.EHLO
        try:
            _hello(smtp)
            encrypted = target.implicit_tls
            if not encrypted and target.starttls != "off":
                if smtp.has_extn("starttls"):
                    phase = Phase.STARTTLS
                    smtp.starttls(context=target.tls_context())
                    encrypted = True
                    phase = Phase.EHLO
                    _hello(smtp)
                elif target.starttls == "require":
                    raise SessionFailure(
                        Phase.STARTTLS, "the server does not offer STARTTLS (starttls=require)"
                    )
            if target.username is not None:
                phase = Phase.AUTH
                _login(smtp, target, encrypted)
        except SessionFailure:
            _close(smtp, polite=True)
            raise
        except OSError as exc:  # smtplib's errors, socket errors, TLS errors, timeouts
            _close(smtp, polite=False)
            raise SessionFailure(phase, _describe(exc), _reply_of(exc)) from exc
        except BaseException:
            _close(smtp, polite=False)
            raise
        return cls(smtp, target, timeout=timeout, data_timeout=data_timeout)

    def reset(self) -> bool:
        """RSET before reusing the session for another message; False if it is no longer good."""
        try:
            code, _ = self._smtp.rset()
        except OSError:
            self.abort()
            return False
        if code != 250:
            self.close()
            return False
        self.needs_reset = False
        return True

    def probe_sender(self) -> Reply | None:
        """``MAIL FROM:<>`` then ``RSET``, no recipient and no message: the answer tells
        whether the server takes mail from this client at all (530: authenticate first).
        None when the connection failed."""
        try:
            reply = Reply.of(*self._command("mail", "FROM:<>"))
            self._smtp.rset()
        except OSError:
            self.abort()
            return None
        return reply

    def close(self) -> None:
        """QUIT politely and close."""
        self.usable = False
        _close(self._smtp, polite=True)

    def abort(self) -> None:
        """Drop the connection at once (mid-DATA this discards the message on the server)."""
        self.usable = False
        _close(self._smtp, polite=False)

    # -- one mail transaction ----------------------------------------------------------

    def transact(
        self,
        *,
        sender: str,
        recipients: Sequence[tuple[int, str]],
        data: bytes,
        smtputf8: bool,
        eightbit: bool,
        begin: Callable[[], bool],
        clock: Clock,
        on_phase: PhaseHook = no_phase_hook,
    ) -> Outcome:
        """Offer one message; ``begin()`` must durably record TransmissionBegun (True) or
        report that the record moved on (False), and is called between 354 and the body.
        ``on_phase`` is told each point reached (:mod:`mailfathom.delivery.phases`)."""
        phase = Phase.MAIL
        replies: list[RecipientReply] = []
        try:
            options = self._mail_options(len(data), smtputf8=smtputf8, eightbit=eightbit)
            if isinstance(options, Outcome):
                return options
            self.needs_reset = True  # until the final answer clears the transaction
            self._smtp.command_encoding = "utf-8" if smtputf8 else "ascii"
            # RFC 2920: MAIL, every RCPT and DATA go out in one write; the replies are
            # read in the order of the commands, so each one is attributed exactly.
            pipelined = pipelining.usable(self._smtp, len(recipients))
            if pipelined:
                self._smtp.send(pipelining.envelope(sender, options, recipients, smtputf8))
            mail = Reply.of(
                *(
                    self._smtp.getreply()
                    if pipelined
                    else self._command("mail", f"FROM:<{sender}>", options)
                )
            )
            if not mail.positive:
                if pipelined and mail.code != 421:
                    self._drain(len(recipients) + 1)  # the RCPTs' and DATA's refusals
                return self._failed(phase, mail, f"MAIL FROM was answered {mail}")
            on_phase("before_rcpt")
            phase = Phase.RCPT
            for position, address in recipients:
                reply = Reply.of(
                    *(
                        self._smtp.getreply()
                        if pipelined
                        else self._command("rcpt", f"TO:<{address}>")
                    )
                )
                replies.append(_recipient(position, reply, clock))
                if reply.code == 421:
                    return self._failed(phase, reply, f"RCPT TO was answered {reply}", replies)
            accepted = [r for r in replies if r.code is not None and 200 <= r.code < 300]
            if not accepted:
                if pipelined:
                    self._drain(1)  # DATA's refusal (a 354 here is never followed by a body)
                return self._none_accepted(replies)
            phase = Phase.DATA
            if not pipelined:
                self._smtp.putcmd("data")
            data_reply = Reply.of(*self._smtp.getreply())
            if data_reply.code != 354:
                return self._failed(phase, data_reply, f"DATA was answered {data_reply}", replies)
            if not self._begin(begin, on_phase):
                return Outcome(
                    "withdrawn",
                    "the record moved on (cancelled) before the body: nothing was sent",
                    phase,
                    recipients=replies,
                )
            on_phase("after_begun")
            phase = Phase.BODY
            self._smtp.send(_dot_stuffed(data))
            on_phase("after_body")
            phase = Phase.REPLY
            final = self._final_reply()
            self.needs_reset = False
            on_phase("after_reply")
        except OSError as exc:
            self.abort()
            if phase in (Phase.BODY, Phase.REPLY):
                return Outcome(
                    "unknown",
                    f"connection lost during {phase} ({_describe(exc)})",
                    phase,
                    recipients=replies,
                )
            return Outcome(
                "retry",
                f"connection lost during {phase} ({_describe(exc)}): nothing was delivered",
                phase,
                reply=_reply_of(exc),
                recipients=replies,
            )
        return self._after_body(final, replies)

    def _command(self, verb: str, argument: str, options: Sequence[str] = ()) -> tuple[int, bytes]:
        """One command and its reply. The addresses were validated when the email was
        recorded, so they go out as they are (no re-parsing per message, as smtplib does)."""
        if options:
            argument = f"{argument} {' '.join(options)}"
        self._smtp.putcmd(verb, argument)
        return self._smtp.getreply()

    def _drain(self, count: int) -> None:
        """Read the replies to ``count`` pipelined commands that follow a refusal. If the
        last (DATA's) says 354 the server would take a body: none is sent, the connection
        is dropped instead; so is one that fails to answer."""
        try:
            for _ in range(count):
                code, _message = self._smtp.getreply()
        except OSError:
            self.abort()
            return
        if code == 354:
            self.abort()

    def _begin(self, begin: Callable[[], bool], on_phase: PhaseHook) -> bool:
        """Run the caller's commit; on any error (the hook's included) the body is never sent."""
        try:
            on_phase("after_354")
            began = begin()
        except BaseException:
            self.abort()
            raise
        if not began:
            self.abort()
        return began

    def _final_reply(self) -> Reply:
        sock = self._smtp.sock
        if sock is not None:
            sock.settimeout(self.data_timeout)
        reply = Reply.of(*self._smtp.getreply())
        if self._smtp.sock is not None:
            self._smtp.sock.settimeout(self.timeout)
        return reply

    def _mail_options(self, size: int, *, smtputf8: bool, eightbit: bool) -> list[str] | Outcome:
        smtp = self._smtp
        options: list[str] = []
        if smtp.has_extn("size"):
            limit = smtp.esmtp_features.get("size", "").strip()
            if limit.isascii() and limit.isdigit() and 0 < int(limit) < size:
                return Outcome(
                    "refused",
                    f"the message is {size} bytes and the server takes at most {limit} (SIZE)",
                    Phase.MAIL,
                )
            options.append(f"SIZE={size}")
        if smtputf8:
            if not smtp.has_extn("smtputf8"):
                return Outcome(
                    "refused",
                    "the message needs SMTPUTF8 (a non-ASCII address or header) and the server "
                    "does not offer it",
                    Phase.MAIL,
                )
            options.append("SMTPUTF8")
        if eightbit:
            if not smtp.has_extn("8bitmime"):
                return Outcome(
                    "refused",
                    "the message has 8-bit content and the server does not offer 8BITMIME: "
                    "record it with a 7-bit transfer encoding",
                    Phase.MAIL,
                )
            options.append("BODY=8BITMIME")
        return options

    def _failed(
        self,
        phase: Phase,
        reply: Reply,
        reason: str,
        replies: list[RecipientReply] | None = None,
    ) -> Outcome:
        """A negative reply before the body: 5xx refuses, anything else is retried."""
        if reply.code == 421:
            self.close()  # the server is closing the channel (RFC 5321 §3.8)
        kind: OutcomeKind = "refused" if reply.permanent else "retry"
        return Outcome(kind, reason, phase, reply=reply, recipients=replies or [])

    def _none_accepted(self, replies: list[RecipientReply]) -> Outcome:
        described = "; ".join(
            f"{r.code if r.code is not None else '???'} {r.text}" for r in replies[:5]
        )
        if all(r.code is not None and r.code >= 500 for r in replies):
            return Outcome(
                "refused", f"every recipient was refused: {described}", Phase.RCPT, None, replies
            )
        return Outcome(
            "retry", f"no recipient was accepted: {described}", Phase.RCPT, None, replies
        )

    def _after_body(self, final: Reply, replies: list[RecipientReply]) -> Outcome:
        if final.positive:
            deferred = [r.position for r in replies if r.code is None or 400 <= r.code < 500]
            return Outcome(
                "sent", f"accepted: {final}", Phase.REPLY, final, replies, deferred=deferred
            )
        if final.code is not None and 400 <= final.code < 600:
            if final.code == 421:
                self.close()
            kind: OutcomeKind = "refused" if final.permanent else "retry"
            reason = f"the end of data was answered {final}"
            return Outcome(kind, reason, Phase.REPLY, final, replies)
        self.abort()
        return Outcome(
            "unknown", f"the end of data was answered {final}", Phase.REPLY, final, replies
        )


def _connect(target: SmtpTarget, timeout: float) -> smtplib.SMTP:
    """Connect and read the greeting (smtplib refuses anything but 220 itself)."""
    try:
        if target.implicit_tls:
            return smtplib.SMTP_SSL(
                target.host,
                target.port,
                local_hostname=target.local_hostname(),
                timeout=timeout,
                context=target.tls_context(),
            )
        return smtplib.SMTP(
            target.host, target.port, local_hostname=target.local_hostname(), timeout=timeout
        )
    except smtplib.SMTPConnectError as exc:
        reply = Reply.of(exc.smtp_code, exc.smtp_error)
        raise SessionFailure(Phase.GREETING, f"the server greeted with {reply}", reply) from exc
    except OSError as exc:
        raise SessionFailure(Phase.CONNECT, _describe(exc), _reply_of(exc)) from exc


def _hello(smtp: smtplib.SMTP) -> None:
    code, message = smtp.ehlo()
    if code != 250:
        code, message = smtp.helo()
    if code != 250:
        reply = Reply.of(code, message)
        raise SessionFailure(Phase.EHLO, f"EHLO and HELO were answered {reply}", reply)


def _login(smtp: smtplib.SMTP, target: SmtpTarget, encrypted: bool) -> None:
    if not encrypted and target.starttls != "off":
        raise SessionFailure(
            Phase.AUTH,
            "refusing to send credentials over an unencrypted connection: use smtps://, a "
            "server that offers STARTTLS, or say starttls=off to allow it",
        )
    if not smtp.has_extn("auth"):
        raise SessionFailure(Phase.AUTH, "the URL has credentials but the server offers no AUTH")
    smtp.login(target.username or "", target.password or "")


def _recipient(position: int, reply: Reply, clock: Clock) -> RecipientReply:
    return RecipientReply(
        position=position,
        code=reply.code,
        enhanced_status=reply.enhanced_status,
        text=reply.text,
        at=clock.now(),
    )


def _dot_stuffed(data: bytes) -> bytes:
    """The DATA payload: leading dots doubled, then the end-of-data line."""
    stuffed = re.sub(rb"(?m)^\.", b"..", data)
    if not stuffed.endswith(b"\r\n"):
        stuffed += b"\r\n"
    return stuffed + b".\r\n"


def _reply_of(exc: BaseException) -> Reply | None:
    if isinstance(exc, smtplib.SMTPResponseException):
        return Reply.of(exc.smtp_code, exc.smtp_error)
    return None


def _describe(exc: BaseException) -> str:
    reply = _reply_of(exc)
    if reply is not None:
        return f"{type(exc).__name__}: {reply}"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _close(smtp: smtplib.SMTP, *, polite: bool) -> None:
    if polite and smtp.sock is not None:
        with contextlib.suppress(OSError):
            smtp.quit()
    with contextlib.suppress(OSError):
        smtp.close()
