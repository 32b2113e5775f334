"""The email ceiling: a plain smtplib loop into the sink, one connection, no durability."""

from __future__ import annotations

import smtplib
import time
from typing import Any

from bench.drivers.protocol import Spec, await_go, run_driver

SENDER = "bench@example.com"
RECIPIENT = "sink@example.com"


def subject(index: int) -> str:
    """The Subject of message ``index``: how the sink tells the messages apart."""
    return f"bench {index}"


def message(index: int, size: int = 4096) -> bytes:
    """A ``size``-byte RFC 5322 message with CRLF line endings."""
    head = (
        f"From: {SENDER}\r\nTo: {RECIPIENT}\r\nSubject: {subject(index)}\r\n"
        f"Message-ID: <bench-{index}@example.com>\r\n\r\n"
    ).encode()
    line = b"x" * 76 + b"\r\n"
    body = line * ((size - len(head)) // len(line))
    return head + body + b"y" * (size - len(head) - len(body) - 2) + b"\r\n"


def send(spec: Spec) -> dict[str, Any]:
    """``sendmail`` ``spec['n']`` messages over one session."""
    payloads = [message(i) for i in range(spec["n"])]
    client = smtplib.SMTP("127.0.0.1", spec["port"], timeout=30)
    client.ehlo()
    start = await_go()
    for payload in payloads:
        client.sendmail(SENDER, [RECIPIENT], payload)
    end = time.monotonic()
    client.quit()
    return {"start": start, "end": end, "count": spec["n"]}


if __name__ == "__main__":
    run_driver({"send": send})
