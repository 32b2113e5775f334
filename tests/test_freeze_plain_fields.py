"""Freezing bytes reads Subject and Message-ID without the email parser when they are
plain, and gets what the parser (``policy.default``) gets: checked on generated
header fields, plain and not (folds, blanks, encoded words, 8-bit bytes, odd ids)."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email import policy
from email.parser import BytesHeaderParser

from mailfathom.delivery.message import freeze
from mailfathom.errors import InvalidMessage

PIECES = [
    b"<abc.12@x-y.z>",
    b"<a@b>",
    b"Order",
    b" ",
    b"  ",
    b"\t",
    b"x",
    b"=",
    b"?",
    b"(c)",
    b'"q"',
    b";",
    b",",
    b"\\",
    b"~",
    b"[1]",
    b":",
    b"\xc3\xa9",
    b"=?utf-8?q?caf=C3=A9?=",
    b"\x7f",
]


def _headers(rng: random.Random) -> list[bytes]:
    fields = [[b"From: shop@example.com"], [b"To: ann@example.com"]]
    for name in (b"Subject", b"Message-ID"):
        if rng.random() < 0.1:
            continue  # absent (a Message-ID is then added)
        spelled = rng.choice([name, name.lower(), name.upper()])
        value = b"".join(rng.choice(PIECES) for _ in range(rng.randint(0, 5)))
        field = [spelled + rng.choice([b": ", b":", b":\t", b":  "]) + value]
        if rng.random() < 0.3:  # folded
            more = b"".join(rng.choice(PIECES) for _ in range(rng.randint(1, 3)))
            field.append(rng.choice([b" ", b"\t"]) + more)
        fields.append(field)
        if rng.random() < 0.2:  # given twice: the first one counts
            fields.append([name + b": second <second@example.com>"])
    rng.shuffle(fields)
    return [line for field in fields for line in field]


def test_subject_and_message_id_are_what_the_email_parser_reads() -> None:
    rng = random.Random(20261207)
    checked = 0
    for _ in range(2000):
        lines = _headers(rng)
        head = b"\r\n".join(lines)
        try:
            frozen = freeze(
                head + b"\r\n\r\nBody.\r\n",
                sender="shop@example.com",
                recipients=["ann@example.com"],
                now=datetime(2026, 12, 7, tzinfo=UTC),
                max_bytes=1_000_000,
            )
        except InvalidMessage as exc:  # refused: an id too short to identify anything
            assert "is not a message identifier" in str(exc)
            given = BytesHeaderParser(policy=policy.default).parsebytes(head + b"\r\n\r\n")
            assert len(str(given["Message-ID"]).strip()) < 3, lines
            continue
        parsed = BytesHeaderParser(policy=policy.default).parsebytes(frozen.data)
        subject = parsed["Subject"]
        assert frozen.subject == (None if subject is None else str(subject)[:998]), lines
        assert frozen.message_id == str(parsed["Message-ID"]).strip(), lines
        checked += 1
    assert checked > 1300  # most are frozen, not refused
