"""Any Django email backend as a mailfathom transport: ``DjangoBackendTransport(path)``.

Internal: not part of the public API (:mod:`mailfathom.contrib.django` exports
:class:`DjangoBackendTransport`).

Each attempt opens the backend (``get_connection(path, fail_silently=False, **kwargs)``
then ``open()``: SMTP's connect, EHLO, STARTTLS and login; an API backend's HTTP
session), commits TransmissionBegun (``submission.begin()``), and only then calls
``send_messages([message])``. What the backend did after its request or its commands
went out cannot be seen from outside it, so the rule is: an exception is an **unknown
outcome** (the record stays TransmissionBegun for an operator), except where the
exception itself proves that nothing was accepted:

================================================  =========================================
the frozen message cannot be read into a Django   Refused (nothing was sent; the same bytes
message (e.g. an unknown charset)                 would fail every time)
``open()`` or building the backend raised         retry (nothing was sent); a refused SMTP
                                                  login or a misconfigured backend
                                                  (``ImproperlyConfigured``) pauses delivery
``send_messages`` returned 1                      Sent; the provider's message id kept
                                                  (anymail's ``anymail_status.message_id``)
``send_messages`` returned 0                      Refused: the backend declined the message
                                                  (an anymail ``pre_send`` cancel)
anymail ``AnymailAPIError``, HTTP 429 or 5xx      retry (also 408, 409), after the
                                                  provider's ``Retry-After`` if it gave one
anymail ``AnymailAPIError``, HTTP 401 or 403      delivery pauses (the API key, the account)
anymail ``AnymailAPIError``, another HTTP 4xx     Refused, with the provider's answer
anymail ``AnymailRecipientsRefused``              Refused (every recipient rejected)
anymail ``AnymailInvalidAddress``,                Refused (raised while anymail builds the
``AnymailUnsupportedFeature``                     request, before it is sent)
anymail: the TCP connection could not be made     retry (urllib3's ``NewConnectionError`` or
                                                  ``ConnectTimeoutError`` behind it)
SMTP ``SMTPSenderRefused``                        4xx retry, 5xx Refused (MAIL FROM refused)
SMTP ``SMTPRecipientsRefused``                    any 4xx retry, all 5xx Refused (no RCPT
                                                  accepted, no DATA sent), per recipient
SMTP ``SMTPDataError``                            4xx retry, 5xx Refused (DATA refused, or
                                                  the server's answer to the end of data)
anything else (a connection lost, a timeout,      unknown outcome: stays TransmissionBegun
an AnymailAPIError without a status, …)
================================================  =========================================

Those retries and refusals come after ``begin()``: the record passed through
TransmissionBegun, so it counts a transmission (it can be given up, no longer
cancelled), although nothing was delivered.

What goes out. The message handed to the backend is a :class:`FrozenEmailMessage`:

- ``message()`` returns the frozen message; its ``as_bytes()`` are **the exact frozen
  bytes** (while nobody edited it), so a backend that serialises ``message()`` — Django's
  SMTP, console and file backends, anymail's raw-MIME ones — sends them byte for byte;
  its envelope is the record's sender and the recipients still owed;
- for an API backend that reads attributes instead (anymail's), ``subject``, ``body``
  (the text part), ``alternatives`` (the HTML part), ``attachments`` (inline ones keep
  their Content-ID), ``reply_to``, ``to``/``cc``/``bcc`` and the other headers
  (``extra_headers``: Message-ID, Date, List-Unsubscribe, …) are read from the frozen
  message. The provider builds its own MIME from them, so the bytes delivered differ
  from the frozen ones: MIME structure and encodings, header folding, a Message-ID or
  Date the provider replaces; the frozen DKIM-Signature is left out (it would not
  verify; the provider signs); To and Cc list only the recipients still owed (after a
  split, the record's remaining ones); an envelope sender other than the From address
  goes as anymail's ``envelope_sender``, which some providers refuse
  (``AnymailUnsupportedFeature``: Refused).

Django's SMTP backend drops the per-recipient refusals that smtplib returns when some
recipients are accepted: such a message is Sent for every recipient. It asks for no
SMTPUTF8, so a record that needs it is Refused before anything is sent: give such mail
to ``smtp_url`` instead.

Threads. The worker submits from several threads at once. Each submission gets its own
backend instance, opened before ``begin()`` and closed after the answer, so no backend
(nor its connection) is shared between threads and no lock serialises deliveries. A
connection kept open between messages would be cheaper, but one the server dropped while
idle is found only after ``begin()``, where a lost connection is indistinguishable from
one lost after the body: it would turn a harmless reconnect into an unknown outcome.
"""

from __future__ import annotations

import contextlib
import email.policy
import smtplib
from collections.abc import Iterator
from datetime import UTC
from email import encoders
from email.message import EmailMessage, Message
from email.mime.base import MIMEBase
from email.parser import BytesParser
from email.utils import formataddr, getaddresses, parseaddr, parsedate_to_datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.mail import EmailMultiAlternatives, get_connection
from django.core.mail.backends.base import BaseEmailBackend
from django.core.mail.backends.smtp import EmailBackend as SmtpEmailBackend
from django.utils.module_loading import import_string

from mailfathom.delivery.smtp import Outcome, Phase, Reply
from mailfathom.delivery.transport import Submission
from mailfathom.errors import ConfigurationError
from mailfathom.store.outbox.rows import RecipientReply

__all__ = ["DjangoBackendTransport", "FrozenEmailMessage"]

#: Headers the attributes of a Django message carry (or that the provider writes).
_OWN_HEADERS = frozenset(
    {
        "from",
        "to",
        "cc",
        "bcc",
        "reply-to",
        "subject",
        "mime-version",
        "content-type",
        "content-transfer-encoding",
        "dkim-signature",
    }
)
#: HTTP answers that are retried although they are 4xx.
_RETRIED_4XX = frozenset({408, 409, 429})
#: HTTP answers that say the backend's configuration (its API key, the account) is refused.
_CONFIGURATION = frozenset({401, 403})
#: anymail's per-recipient statuses that say the provider will not deliver to it.
_REJECTED = frozenset({"rejected", "invalid", "failed"})


class _FrozenMessage(EmailMessage):
    """The parsed frozen message; ``as_bytes()`` gives the frozen bytes exactly while
    its headers and payload are as parsed (after an edit, the edited message)."""

    _frozen: bytes
    _parsed: tuple[list[tuple[str, Any]], Any]

    def as_bytes(self, unixfrom: bool = False, policy: Any = None, **kwargs: Any) -> bytes:
        """The frozen bytes, unless someone edited the message (then it is generated)."""
        parsed = getattr(self, "_parsed", None)  # None: a part of the frozen message
        if not unixfrom and parsed is not None and (self._headers, self._payload) == parsed:  # type: ignore[attr-defined]
            return self._frozen
        return super().as_bytes(unixfrom, policy, **kwargs)


def _parse(data: bytes) -> _FrozenMessage:
    parsed = BytesParser(_FrozenMessage, policy=email.policy.SMTP).parsebytes(data)
    assert isinstance(parsed, _FrozenMessage)
    parsed._frozen = data
    parsed._parsed = (list(parsed._headers), parsed._payload)  # type: ignore[attr-defined]
    return parsed


class FrozenEmailMessage(EmailMultiAlternatives):
    """A Django email message that carries a record's frozen bytes to a Django backend.

    ``message()`` is the frozen message (its ``as_bytes()`` the exact frozen bytes);
    ``from_email`` and ``recipients()`` are the envelope (the recipients still owed);
    the other attributes are read from the frozen message for backends that build
    their own (see :mod:`mailfathom.contrib.django.transport`). ``attributes=True``
    makes ``from_email`` the From header, with a different envelope sender in
    ``envelope_sender`` (anymail's attribute), for such backends.
    """

    def __init__(self, submission: Submission, *, attributes: bool = False) -> None:
        frozen = _parse(submission.data)
        self.frozen = frozen
        owed = {address.lower(): address for _, address in submission.recipients}
        to = _owed(frozen, "To", owed)
        cc = _owed(frozen, "Cc", owed)
        named = {parseaddr(a)[1].lower() for a in (*to, *cc)}
        bcc = [a for _, a in submission.recipients if a.lower() not in named]
        author = str(frozen.get("From", "")) or submission.sender
        sender = submission.sender
        same = parseaddr(author)[1].lower() == sender.lower()
        from_email = author if attributes or same else sender
        super().__init__(
            subject=str(frozen.get("Subject", "")),
            from_email=from_email,
            to=to,
            cc=cc,
            bcc=bcc,
            reply_to=[formataddr(p) for p in getaddresses(frozen.get_all("Reply-To", []))],
            headers={
                name: str(value)
                for name, value in frozen.items()
                if name.lower() not in _OWN_HEADERS
            },
        )
        if attributes and not same:
            self.envelope_sender = sender
        _fill_content(self, frozen)

    def message(self, **kwargs: Any) -> Any:
        """The frozen message: ``as_bytes()`` gives the exact frozen bytes."""
        return self.frozen


def _owed(frozen: Message, header: str, owed: dict[str, str]) -> list[str]:
    """The header's addresses (with their names) that are still owed."""
    found = getaddresses([str(v) for v in frozen.get_all(header, [])])
    return [formataddr((name, addr)) for name, addr in found if addr.lower() in owed]


def _fill_content(target: FrozenEmailMessage, frozen: EmailMessage) -> None:
    """Text body, HTML alternative and attachments, read from the frozen message."""
    plain = frozen.get_body(("plain",))
    html = frozen.get_body(("html",))
    if plain is not None:
        target.body = _text(plain)
    if html is not None:
        if plain is None:
            target.body = _text(html)
            target.content_subtype = "html"
        else:
            target.attach_alternative(_text(html), "text/html")
    for part in _leaves(frozen):
        if part is plain or part is html:
            continue
        content = part.get_payload(decode=True)
        assert isinstance(content, bytes)
        if part["Content-ID"] is None:
            target.attach(part.get_filename(), content, part.get_content_type())
            continue
        inline = MIMEBase(part.get_content_maintype(), part.get_content_subtype())
        inline.set_payload(content)
        encoders.encode_base64(inline)
        inline["Content-ID"] = str(part["Content-ID"])
        filename = part.get_filename()
        if filename:
            inline.add_header("Content-Disposition", "inline", filename=filename)
        else:
            inline.add_header("Content-Disposition", "inline")
        target.attach(inline)


def _text(part: Message) -> str:
    """A text part's content with the wire's CRLF line ends made newlines again."""
    content = part.get_content()  # type: ignore[attr-defined]
    assert isinstance(content, str)
    return content.replace("\r\n", "\n")


def _leaves(message: Message) -> Iterator[Message]:
    for part in message.walk():
        if not part.is_multipart():
            yield part


class DjangoBackendTransport:
    """Delivers through a Django email backend: ``backend`` is its dotted path (e.g.
    ``"anymail.backends.postmark.EmailBackend"`` or
    ``"django.core.mail.backends.smtp.EmailBackend"``), ``options`` the keyword
    arguments of ``get_connection`` (``host=``, ``api_key=`` …); unset ones come from
    Django's settings as usual. ``name`` names it in logs (default: the backend's
    module, e.g. ``django:anymail.backends.postmark``).

    The table of :mod:`mailfathom.contrib.django.transport` says what each answer does;
    each submission opens its own backend instance (no sharing between threads).
    """

    def __init__(self, backend: str, *, name: str | None = None, **options: Any) -> None:
        try:
            found = import_string(backend)
        except ImportError as exc:
            raise ConfigurationError(
                f"the Django email backend {backend!r} cannot be imported ({exc}): give its "
                "dotted path, e.g. 'anymail.backends.postmark.EmailBackend'"
            ) from exc
        if not (isinstance(found, type) and issubclass(found, BaseEmailBackend)):
            raise ConfigurationError(f"{backend!r} is not a Django email backend class")
        self.backend = backend
        self.options = options
        self.name = name or f"django:{backend.rsplit('.', 1)[0]}"
        self._attributes = _reads_attributes(found)
        self._smtp = issubclass(found, SmtpEmailBackend)

    def close(self) -> None:
        """Nothing is kept open between messages."""

    def submit(self, submission: Submission) -> Outcome:
        """One ``send_messages`` call for one record; see the module docstring."""
        if submission.smtputf8 and self._smtp:
            return Outcome(
                "refused",
                "the message needs SMTPUTF8 (a non-ASCII address), which Django's SMTP "
                "backend does not ask for: nothing was sent; deliver such mail with smtp_url",
                Phase.MAIL,
            )
        try:
            message = FrozenEmailMessage(submission, attributes=self._attributes)
        except Exception as exc:  # the same bytes would fail the same way every time
            reason = f"the message could not be read for {self.name} ({_describe(exc)})"
            return Outcome("refused", f"{reason}: nothing was sent", Phase.MAIL)
        try:
            connection = get_connection(self.backend, fail_silently=False, **self.options)
        except Exception as exc:
            return self._not_opened(exc)
        try:
            try:
                connection.open()
            except Exception as exc:
                return self._not_opened(exc)
            return self._send(connection, message, submission)
        finally:
            with contextlib.suppress(Exception):  # the answer is known; closing is tidying
                connection.close()

    def _not_opened(self, exc: Exception) -> Outcome:
        said = f"{self.name} could not be opened ({_describe(exc)}): nothing was sent"
        if isinstance(exc, smtplib.SMTPAuthenticationError | ImproperlyConfigured):
            fix = f"{said}: fix the backend's settings (its credentials)"
            return Outcome("retry", fix, Phase.AUTH, configuration=fix)
        return Outcome("retry", said, Phase.CONNECT)

    def _send(
        self, connection: BaseEmailBackend, message: FrozenEmailMessage, submission: Submission
    ) -> Outcome:
        submission.on_phase("after_354")
        if not submission.begin():
            return Outcome(
                "withdrawn",
                "the record moved on (cancelled) before the backend was called: nothing sent",
                Phase.DATA,
            )
        submission.on_phase("after_begun")
        try:
            count = connection.send_messages([message])
        except Exception as exc:
            submission.on_phase("after_reply")
            return self._raised(exc, submission)
        submission.on_phase("after_reply")
        if count == 1:
            return self._sent(message, submission)
        reason = f"{self.name} declined the message (send_messages returned {count})"
        return Outcome("refused", reason, Phase.REPLY, Reply(None, None, reason))

    def _sent(self, message: FrozenEmailMessage, submission: Submission) -> Outcome:
        status = getattr(message, "anymail_status", None)
        found = getattr(status, "message_id", None)
        text = f"accepted by {self.name}" + (f", message id {found}" if found else "")
        per_recipient = getattr(status, "recipients", None) or {}
        said = {address.lower(): s for address, s in per_recipient.items()}
        now = submission.clock.now()
        replies = []
        for position, address in submission.recipients:
            state = getattr(said.get(address.lower()), "status", None)
            if state in _REJECTED:
                replies.append(RecipientReply(position, 550, None, f"{self.name}: {state}", now))
            else:
                replies.append(RecipientReply(position, 250, None, text, now))
        return Outcome("sent", text, Phase.REPLY, Reply(250, None, text), recipients=replies)

    def _raised(self, exc: Exception, submission: Submission) -> Outcome:
        said = f"{self.name} raised {_describe(exc)}"[:2000]
        code = _smtp_code(exc)
        if code is not None:
            return _answered(said, code, _smtp_recipients(exc, submission))
        anymail = _anymail_kind(exc)
        if anymail == "refused":
            return Outcome("refused", said, Phase.REPLY, Reply(None, None, said))
        status = getattr(exc, "status_code", None) if anymail == "api" else None
        if isinstance(status, int):
            reply = Reply(status, None, said)
            if status in _CONFIGURATION:
                fix = (
                    f"{said}: fix the API key given to the backend, or the account at the provider"
                )
                return Outcome("retry", fix, Phase.REPLY, reply, configuration=fix)
            if status >= 500 or status in _RETRIED_4XX:
                wait = _retry_after(exc, submission)
                return Outcome("retry", said, Phase.REPLY, reply, retry_after=wait)
            if 400 <= status < 500:
                return Outcome("refused", said, Phase.REPLY, reply)
        if anymail == "api" and _never_connected(exc):
            return Outcome("retry", f"{said}: the connection was never made", Phase.REPLY)
        return Outcome(
            "unknown",
            f"{said} after the message was handed to it: whether it went out is unknown",
            Phase.REPLY,
        )


def _answered(said: str, code: int, replies: list[RecipientReply]) -> Outcome:
    """An SMTP refusal raised before the message was accepted: 4xx retry, 5xx refused."""
    reply = Reply(code, None, said)
    if 400 <= code < 500:
        return Outcome("retry", said, Phase.REPLY, reply, recipients=replies)
    return Outcome("refused", said, Phase.REPLY, reply, recipients=replies)


def _smtp_code(exc: Exception) -> int | None:
    """The refusing reply of an smtplib exception raised before the message was accepted
    (MAIL FROM, every RCPT TO, DATA or the end of data answered 4xx/5xx); else None."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        codes = [code for code, _ in exc.recipients.values()]
        if not codes or not all(400 <= c < 600 for c in codes):
            return None
        return min(c for c in codes if c < 500) if any(c < 500 for c in codes) else max(codes)
    if isinstance(exc, smtplib.SMTPSenderRefused | smtplib.SMTPDataError):
        code = exc.smtp_code
        return code if 400 <= code < 600 else None
    return None


def _smtp_recipients(exc: Exception, submission: Submission) -> list[RecipientReply]:
    if not isinstance(exc, smtplib.SMTPRecipientsRefused):
        return []
    now = submission.clock.now()
    refused = {parseaddr(a)[1].lower(): answer for a, answer in exc.recipients.items()}
    replies = []
    for position, address in submission.recipients:
        answer = refused.get(address.lower())
        if answer is not None:
            text = answer[1].decode("utf-8", "replace")
            replies.append(RecipientReply(position, answer[0], None, text, now))
    return replies


def _anymail_kind(exc: Exception) -> str | None:
    """``api`` for an anymail API error, ``refused`` for the anymail errors that prove
    the provider will not take the message; None when anymail is not installed or the
    exception is none of those."""
    try:  # here, not at the top: anymail is optional
        from anymail import exceptions as anymail
    except ImportError:
        return None
    refusing = (
        anymail.AnymailRecipientsRefused,
        anymail.AnymailInvalidAddress,
        anymail.AnymailUnsupportedFeature,
    )
    if isinstance(exc, refusing):
        return "refused"
    if isinstance(exc, anymail.AnymailAPIError):
        return "api"
    return None


def _retry_after(exc: Exception, submission: Submission) -> float | None:
    """The ``Retry-After`` of the HTTP answer an anymail error carries, in seconds from
    now (RFC 9110 §10.2.3: seconds or an HTTP date); None when it gave none."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    value = headers.get("Retry-After") if headers is not None else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - submission.clock.now()).total_seconds(), 0.0)


def _never_connected(exc: BaseException) -> bool:
    """Whether the cause of ``exc`` is a TCP connection that could not be made (urllib3's
    ``NewConnectionError`` or ``ConnectTimeoutError``): then no request left."""
    try:  # here, not at the top: urllib3 comes only with backends that use requests
        from urllib3.exceptions import ConnectTimeoutError, NewConnectionError
    except ImportError:
        return False
    seen: set[int] = set()
    pending: list[object] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen or not isinstance(current, BaseException):
            continue
        seen.add(id(current))
        if isinstance(current, NewConnectionError | ConnectTimeoutError):
            return True
        pending += [current.__cause__, getattr(current, "reason", None), *current.args]
    return False


def _reads_attributes(backend: type) -> bool:
    """Whether the backend builds its own message from the attributes (anymail's do)."""
    try:  # here, not at the top: anymail is optional
        from anymail.backends.base import AnymailBaseBackend
    except ImportError:
        return False
    return issubclass(backend, AnymailBaseBackend)


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:1000]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
