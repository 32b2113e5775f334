"""Freezing a message at record time: validated envelope, exact CRLF bytes, Message-ID, Date.

Internal. Whatever a later attempt sends is decided here, once: the bytes stored
are the bytes transmitted. Addresses are checked with email-validator (syntax
only, no DNS), header fields with CR or LF outside a legal fold are refused as
header injection, Bcc is kept on the envelope only, and internationalised
domains are written in their IDNA form in the envelope and in the headers
(``email.policy.SMTP`` would otherwise mangle them: CPython gh-83938). A
message needs SMTPUTF8 only when an address has a non-ASCII local part; then it
is generated with ``policy.SMTPUTF8``, otherwise with ``policy.SMTP`` and 7-bit
transfer encodings, so it passes through any server.
"""

from __future__ import annotations

import copy
import functools
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from email import policy
from email.headerregistry import Address
from email.message import EmailMessage
from email.parser import BytesHeaderParser
from email.utils import format_datetime

from email_validator import EmailNotValidError, validate_email

from mailfathom.errors import InvalidMessage

__all__ = ["FrozenMessage", "check_address", "freeze"]

#: At most this many envelope recipients per record (RFC 5321 asks servers for 100;
#: Postfix takes 1000 by default). Deferred extras are split into linked records.
MAX_RECIPIENTS = 1000
_LONGEST_LINE = 998  # octets, without the CRLF (RFC 5321 §4.5.3.1.6)
_ADDRESS_HEADERS = ("From", "Sender", "Reply-To", "To", "Cc", "Bcc")
_FIELD_NAME = re.compile(rb"[!-9;-~]+")  # fullmatch: "$" would pass a trailing LF
_FOLD = re.compile(r"\r?\n(?=[ \t])")
_ANY_EOL = re.compile(rb"\r\n|\r|\n")
_SMTP_7BIT = policy.SMTP.clone(cte_type="7bit")


@dataclass(frozen=True, slots=True)
class FrozenMessage:
    """A message as it will be sent: exact bytes and the envelope."""

    data: bytes
    sender: str
    recipients: tuple[str, ...]
    message_id: str
    subject: str | None
    smtputf8: bool
    eightbit: bool


def check_address(value: object, what: str) -> tuple[str, bool]:
    """``value`` in its sending form and whether it needs SMTPUTF8; a clear error if unusable.

    The sending form uses the IDNA (ASCII) domain; it is the ASCII address when the
    local part is ASCII, else the UTF-8 local part at the ASCII domain.
    """
    if not isinstance(value, str):
        raise InvalidMessage(f"{what} must be an address string, not {type(value).__name__}")
    if "\r" in value or "\n" in value:
        raise InvalidMessage(
            f"{what} {value!r} contains a line break, which would inject header fields or SMTP "
            "commands: pass one plain address"
        )
    try:
        return _sending_form(value)
    except EmailNotValidError as exc:
        raise InvalidMessage(
            f"{what} {value!r} is not a valid email address ({exc}); nothing was recorded"
        ) from exc


@functools.lru_cache(maxsize=4096)
def _sending_form(value: str) -> tuple[str, bool]:
    """The syntax check of one address (no DNS, so the answer never changes): remembered,
    since a batch or a busy sender repeats the same few senders and recipients."""
    valid = validate_email(value, check_deliverability=False)
    if valid.ascii_email is not None:
        return valid.ascii_email, False
    return f"{valid.local_part}@{valid.ascii_domain}", True


def freeze(
    message: EmailMessage | bytes,
    *,
    sender: str | None,
    recipients: Sequence[str] | None,
    now: datetime,
    max_bytes: int,
) -> FrozenMessage:
    """Validate ``message`` and its envelope and return the exact bytes to send."""
    if isinstance(message, EmailMessage):
        frozen = _freeze_email(message, sender=sender, recipients=recipients, now=now)
    elif isinstance(message, (bytes, bytearray, memoryview)):
        frozen = _freeze_bytes(bytes(message), sender=sender, recipients=recipients, now=now)
    else:
        raise InvalidMessage(
            f"a message is an email.message.EmailMessage or bytes, not {type(message).__name__}"
        )
    _check_message_id(frozen.message_id)
    check_lines(frozen.data)
    if len(frozen.data) > max_bytes:
        raise InvalidMessage(
            f"the message is {len(frozen.data)} bytes, over the {max_bytes}-byte limit "
            "(max_message_bytes): link large files instead of attaching them"
        )
    return frozen


# -- EmailMessage --------------------------------------------------------------------------


def _freeze_email(
    message: EmailMessage,
    *,
    sender: str | None,
    recipients: Sequence[str] | None,
    now: datetime,
) -> FrozenMessage:
    for part in message.walk():
        for name, value in part.raw_items():
            _check_field(name, str(value))
    frozen = _header_copy(message)
    found: dict[str, list[tuple[str, bool]]] = {}
    smtputf8 = False
    for name in _ADDRESS_HEADERS:
        addresses = _header_addresses(frozen, name)
        checked = [check_address(a.addr_spec, f"{name} address") for a in addresses]
        found[name] = checked
        smtputf8 = smtputf8 or any(needs for _, needs in checked)
        specs = [spec for spec, _ in checked]
        if name != "Bcc" and specs != [a.addr_spec for a in addresses]:
            _set_addresses(frozen, name, addresses, specs)
    del frozen["Bcc"]
    if not found["From"]:
        raise InvalidMessage("the message has no From address: set message['From']")
    if sender is None:
        envelope_from = (found["Sender"] or found["From"])[0]
    else:
        envelope_from = check_address(sender, "sender")
    if recipients is None:
        chosen = [spec for name in ("To", "Cc", "Bcc") for spec in found[name]]
    else:
        chosen = _check_recipients(recipients)
    envelope_to = _dedupe(chosen)
    if not envelope_to:
        raise InvalidMessage(
            "the message has no recipients: set To, Cc or Bcc, or pass recipients=[...]"
        )
    smtputf8 = smtputf8 or envelope_from[1] or any(needs for _, needs in envelope_to)
    domain = envelope_from[0].rpartition("@")[2]
    if frozen["Message-ID"] is None:
        frozen["Message-ID"] = _new_message_id(domain)
    if frozen["Date"] is None:
        frozen["Date"] = format_datetime(now)
    data = frozen.as_bytes(policy=policy.SMTPUTF8 if smtputf8 else _SMTP_7BIT)
    subject = frozen["Subject"]
    return FrozenMessage(
        data=data,
        sender=envelope_from[0],
        recipients=tuple(spec for spec, _ in envelope_to),
        message_id=str(frozen["Message-ID"]).strip(),
        subject=None if subject is None else str(subject)[:998],
        smtputf8=smtputf8,
        eightbit=not data.isascii(),
    )


def _header_copy(message: EmailMessage) -> EmailMessage:
    """A copy whose top-level header fields can change without touching ``message``.

    The body is shared, not copied: freezing only rewrites top-level fields, and a
    deep copy of a whole message costs more than everything else in ``record``.
    """
    frozen = copy.copy(message)
    frozen._headers = list(message._headers)  # type: ignore[attr-defined]
    return frozen


def _set_addresses(
    message: EmailMessage, name: str, addresses: list[Address], specs: list[str]
) -> None:
    """Rewrite an address field with each address in its sending (IDNA) form, in place."""
    rewritten = []
    for address, spec in zip(addresses, specs, strict=True):
        local, _, domain = spec.rpartition("@")
        rewritten.append(Address(display_name=address.display_name, username=local, domain=domain))
    if len(message.get_all(name, [])) == 1:
        message.replace_header(name, rewritten)
    else:
        del message[name]
        message[name] = rewritten


def _header_addresses(message: EmailMessage, name: str) -> list[Address]:
    found: list[Address] = []
    for header in message.get_all(name, []):
        addresses = getattr(header, "addresses", None)
        if addresses is None:
            raise InvalidMessage(
                f"the {name} header is not parsed as addresses: build the message with "
                "EmailMessage() (policy=email.policy.default)"
            )
        found.extend(addresses)
    return found


# -- bytes with an explicit envelope -------------------------------------------------------


def _freeze_bytes(
    data: bytes, *, sender: str | None, recipients: Sequence[str] | None, now: datetime
) -> FrozenMessage:
    if sender is None or recipients is None:
        raise InvalidMessage(
            "a message given as bytes needs its envelope: pass sender='…' and recipients=[…]"
        )
    envelope_from = check_address(sender, "sender")
    envelope_to = _dedupe(_check_recipients(recipients))
    if not envelope_to:
        raise InvalidMessage("recipients is empty: give at least one recipient address")
    data = _ANY_EOL.sub(b"\r\n", data)
    head, separator, body = data.partition(b"\r\n\r\n")
    lines = _header_lines(head)
    names = {line.partition(b":")[0].strip().lower() for line in lines if line[:1] not in b" \t"}
    if b"from" not in names:
        raise InvalidMessage("the message has no From header field: add one")
    kept = _drop_field(lines, b"bcc")
    added: list[bytes] = []
    domain = envelope_from[0].rpartition("@")[2]
    message_id = None
    if b"message-id" not in names:
        message_id = _new_message_id(domain)
        added.append(f"Message-ID: {message_id}".encode())
    if b"date" not in names:
        added.append(f"Date: {format_datetime(now)}".encode())
    head = b"\r\n".join(added + kept)
    data = head + (separator + body if separator else b"\r\n")
    plain, subject = _plain_field(kept, b"subject")
    if message_id is None:
        plain_id, found_id = _plain_field(kept, b"message-id")
        if plain_id and found_id and _PLAIN_ID.fullmatch(found_id):
            message_id = found_id.strip()
    if not plain or message_id is None:  # what only the email parser can read
        parsed = BytesHeaderParser(policy=policy.default).parsebytes(head + b"\r\n\r\n")
        subject = parsed["Subject"]
        if message_id is None:
            message_id = str(parsed["Message-ID"] or "").strip()
    smtputf8 = envelope_from[1] or any(needs for _, needs in envelope_to) or not head.isascii()
    return FrozenMessage(
        data=data,
        sender=envelope_from[0],
        recipients=tuple(spec for spec, _ in envelope_to),
        message_id=message_id,
        subject=None if subject is None else str(subject)[:998],
        smtputf8=smtputf8,
        eightbit=not data.isascii(),
    )


def _header_lines(head: bytes) -> list[bytes]:
    lines = head.split(b"\r\n")
    for number, line in enumerate(lines, start=1):
        if line[:1] in (b" ", b"\t") and number > 1:
            continue
        name, colon, _ = line.partition(b":")
        if not colon or not _FIELD_NAME.fullmatch(name):
            raise InvalidMessage(
                f"line {number} of the message header is not a header field ({line[:60]!r}): "
                "header fields are 'Name: value', and a blank line separates the body"
            )
    return lines


_PLAIN_VALUE = re.compile(rb"[ -~\t]*")
_PLAIN_ID = re.compile(r"[ \t]*<[A-Za-z0-9!#$%&'*+/=?^_`{|}~.@-]+>[ \t]*")


def _plain_field(lines: list[bytes], name: bytes) -> tuple[bool, str | None]:
    """Whether the first ``name`` field is plain (printable ASCII without encoded words,
    or absent), and then its value as ``policy.default`` reads it (unfolded, leading
    blanks dropped; None when absent): a plain value needs no email parser, which costs
    more than the rest of freezing bytes."""
    for index, line in enumerate(lines):
        if line[:1] in (b" ", b"\t"):
            continue
        field, _, value = line.partition(b":")
        if field.lower() != name:
            continue
        folded = [value.lstrip(b" \t")]
        for more in lines[index + 1 :]:
            if more[:1] not in (b" ", b"\t"):
                break
            folded.append(more)
        unfolded = b"".join(folded)
        if b"=?" in unfolded or not _PLAIN_VALUE.fullmatch(unfolded):
            return False, None
        return True, unfolded.decode("ascii")
    return True, None


def _drop_field(lines: list[bytes], name: bytes) -> list[bytes]:
    kept: list[bytes] = []
    dropping = False
    for line in lines:
        if line[:1] in (b" ", b"\t"):
            if not dropping:
                kept.append(line)
            continue
        dropping = line.partition(b":")[0].strip().lower() == name
        if not dropping:
            kept.append(line)
    return kept


# -- shared --------------------------------------------------------------------------------


def _check_field(name: str, value: str) -> None:
    if not _FIELD_NAME.fullmatch(name.encode("ascii", "replace")):
        raise InvalidMessage(f"header field name {name!r} is not printable ASCII without ':'")
    unfolded = _FOLD.sub("", value)
    if "\r" in unfolded or "\n" in unfolded:
        raise InvalidMessage(
            f"the {name} header field contains a line break ({value[:60]!r}): that would "
            "inject header fields; remove CR and LF from header values"
        )


def _check_recipients(recipients: Sequence[str]) -> list[tuple[str, bool]]:
    if isinstance(recipients, (str, bytes)):
        raise InvalidMessage("recipients must be a list of addresses, not a single string")
    if len(recipients) > MAX_RECIPIENTS:
        raise InvalidMessage(
            f"{len(recipients)} recipients is over the {MAX_RECIPIENTS} a record may have: "
            "record the message several times with fewer recipients each"
        )
    return [check_address(address, "recipient") for address in recipients]


def _dedupe(addresses: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    seen: set[str] = set()
    unique = []
    for spec, needs in addresses:
        if spec not in seen:  # domains are normalised; local parts are case-sensitive
            seen.add(spec)
            unique.append((spec, needs))
    if len(unique) > MAX_RECIPIENTS:
        raise InvalidMessage(
            f"{len(unique)} recipients is over the {MAX_RECIPIENTS} a record may have: "
            "record the message several times with fewer recipients each"
        )
    return unique


def _check_message_id(message_id: str) -> None:
    """Refuse a Message-ID too short to identify anything (the record keeps it forever)."""
    if len(message_id) < 3:
        raise InvalidMessage(
            f"the Message-ID {message_id!r} is not a message identifier: give one like "
            "'<unique@your-domain>' (RFC 5322 §3.6.4), or leave the field out and one is added"
        )


def _new_message_id(domain: str) -> str:
    return f"<{uuid.uuid4().hex}@{domain}>"


def check_lines(data: bytes) -> None:
    """Refuse bytes that SMTP cannot carry unchanged: bare CR/LF, or lines over 998 octets."""
    for number, line in enumerate(data.split(b"\r\n"), start=1):
        if b"\r" in line or b"\n" in line:
            raise InvalidMessage(
                f"line {number} of the message holds a bare CR or LF: SMTP needs CRLF line "
                "endings (use a 7-bit or base64 transfer encoding for binary content)"
            )
        if len(line) > _LONGEST_LINE:
            raise InvalidMessage(
                f"line {number} of the message is {len(line)} octets, over SMTP's 998 "
                "(RFC 5321 §4.5.3.1.6): encode the body as quoted-printable or base64"
            )
