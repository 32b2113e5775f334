"""SMTP PIPELINING (RFC 2920): a mail transaction's envelope commands in one write.

Internal. When the server advertises PIPELINING, MAIL FROM, every RCPT TO and DATA
are sent together and their replies read back in the same order, which saves two
or more round trips per message. The body is never pipelined: it goes out only
after DATA's 354 was read and TransmissionBegun committed, exactly as without
PIPELINING. A transaction with more than :data:`MAX_PIPELINED_RECIPIENTS`
recipients is not pipelined (its replies could fill the socket buffers of a server
that writes them before reading on), and neither is any transaction when the
server does not offer the extension.
"""

from __future__ import annotations

import smtplib
from collections.abc import Sequence

__all__ = ["MAX_PIPELINED_RECIPIENTS", "envelope", "usable"]

#: The most RCPT TO commands sent in one pipelined write (RFC 5321 §4.5.3.1.8: every
#: server takes at least 100 recipients per transaction).
MAX_PIPELINED_RECIPIENTS = 100


def usable(smtp: smtplib.SMTP, recipients: int) -> bool:
    """Whether this transaction's envelope goes out pipelined on ``smtp``."""
    return recipients <= MAX_PIPELINED_RECIPIENTS and smtp.has_extn("pipelining")


def envelope(
    sender: str, options: Sequence[str], recipients: Sequence[tuple[int, str]], smtputf8: bool
) -> bytes:
    """MAIL FROM (with its options), one RCPT TO per recipient in order, and DATA.

    The addresses were validated when the email was recorded (no CR or LF can be in
    them), so they go out as they are, as the unpipelined commands do.
    """
    mail = " ".join([f"mail FROM:<{sender}>", *options])
    lines = [mail, *(f"rcpt TO:<{address}>" for _, address in recipients), "data"]
    return "".join(f"{line}\r\n" for line in lines).encode("utf-8" if smtputf8 else "ascii")
