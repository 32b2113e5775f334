"""``mf.outbox.record``: validated, frozen to exact CRLF bytes, written with its delivery job."""

from __future__ import annotations

import base64
import email
import email.policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any, cast

import dkim
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from mailfathom import (
    ConfigurationError,
    FakeClock,
    InvalidInput,
    InvalidMessage,
    JobState,
    MailFathom,
    NotFound,
    OutgoingEmailStage,
    StoreError,
)
from raw_database import raw_transaction


def message(**headers: str) -> EmailMessage:
    """A small text message; ``Reply_To=`` style keywords become ``Reply-To`` headers."""
    msg = EmailMessage()
    fields = {"From": "Alice <alice@example.com>", "To": "bob@example.com", "Subject": "Hi"}
    fields.update({name.replace("_", "-"): value for name, value in headers.items()})
    for name, value in fields.items():
        if value:
            msg[name] = value
    msg.set_content("Hello Bob,\n.a line starting with a dot\n")
    return msg


def _nothing_recorded(mf: MailFathom) -> bool:
    return mf.outbox.list() == [] and sum(mf.jobs.counts().values()) == 0


def test_record_freezes_bytes_and_writes_its_delivery_job(mf: MailFathom, clock: FakeClock) -> None:
    msg = message(Cc="carol@example.com", Bcc="dave@example.org")
    recorded = mf.outbox.record(msg, idempotency_key="welcome:1")
    assert recorded.created
    assert recorded.stage is OutgoingEmailStage.RECORDED
    assert recorded.sender == "alice@example.com"
    assert [r.address for r in recorded.recipients] == [
        "bob@example.com",
        "carol@example.com",
        "dave@example.org",
    ]
    assert all(r.reply_code is None for r in recorded.recipients)
    data = mf.outbox.message_bytes(recorded.id)
    assert len(data) == recorded.size
    assert data.replace(b"\r\n", b"").count(b"\n") == 0, "bare LF in frozen bytes"
    assert b"\r" not in data.replace(b"\r\n", b"")
    parsed = email.message_from_bytes(data, policy=email.policy.default)
    assert parsed["Bcc"] is None and b"dave@example.org" not in data
    assert parsed["Message-ID"] == recorded.message_id
    assert recorded.message_id.endswith("@example.com>")
    assert parsed["Date"].datetime == clock.now()
    assert "Hello Bob" in parsed.get_content()
    job = mf.jobs.get(recorded.job_id or 0)
    assert (job.kind, job.queue, job.state) == ("mailfathom.deliver", "mail", JobState.PENDING)
    assert job.payload == {"email_id": recorded.id}
    assert msg["Bcc"] == "dave@example.org", "the caller's message was modified"


def test_existing_message_id_and_date_are_kept(mf: MailFathom) -> None:
    msg = message(Message_ID="<fixed@example.com>", Date="Mon, 20 Nov 2023 10:00:00 +0000")
    recorded = mf.outbox.record(msg)
    data = mf.outbox.message_bytes(recorded.id)
    assert recorded.message_id == "<fixed@example.com>"
    assert data.count(b"Message-ID:") == 1 and b"Date: Mon, 20 Nov 2023 10:00:00 +0000" in data


def test_an_idempotency_key_records_once(mf: MailFathom) -> None:
    first = mf.outbox.record(message(), idempotency_key="order:7")
    again = mf.outbox.record(message(Subject="different"), idempotency_key="order:7")
    assert first.created and not again.created
    assert again.id == first.id and again.subject == "Hi"
    assert [r.address for r in again.recipients] == ["bob@example.com"]
    assert len(mf.outbox.list()) == 1
    assert sum(mf.jobs.counts().values()) == 1


@pytest.mark.parametrize(
    ("headers", "envelope"),
    [
        ({"To": "not an address"}, {}),
        ({"To": "bob@localhost"}, {}),
        ({"Cc": "carol@@example.com"}, {}),
        ({"Bcc": "dave@example..org"}, {}),
        ({"From": "alice@-bad-.example"}, {}),
        ({}, {"sender": "nobody"}),
        ({}, {"recipients": ["ok@example.com", "broken"]}),
        ({}, {"recipients": ["bob@example.com\r\nRCPT TO:<evil@example.com>"]}),
    ],
)
def test_a_bad_address_is_refused_and_nothing_is_recorded(
    mf: MailFathom, headers: dict[str, str], envelope: dict[str, object]
) -> None:
    with pytest.raises(InvalidMessage, match=r"address|line break"):
        mf.outbox.record(message(**headers), **envelope)  # type: ignore[arg-type]
    assert _nothing_recorded(mf)


@pytest.mark.parametrize("value", ["Hi\r\nBcc: evil@example.com", "Hi\nX-Evil: 1", "Hi\r"])
def test_header_injection_is_refused(mf: MailFathom, value: str) -> None:
    msg = message()
    del msg["Subject"]
    # What a hand-built or legacy message can hold (the policy's own check is bypassed).
    cast(Any, msg)._headers.append(("Subject", value))
    with pytest.raises(InvalidMessage, match="line break"):
        mf.outbox.record(msg)
    assert _nothing_recorded(mf)


def test_header_injection_through_the_policy_is_refused_by_the_email_package() -> None:
    msg = message()
    with pytest.raises(ValueError, match="linefeed or carriage return"):
        msg["X-Note"] = "a\r\nBcc: evil@example.com"


def test_no_recipients_is_refused(mf: MailFathom) -> None:
    with pytest.raises(InvalidMessage, match="no recipients"):
        mf.outbox.record(message(To=""))
    raw = b"From: a@example.com\r\nSubject: x\r\n\r\nbody\r\n"
    with pytest.raises(InvalidMessage, match="empty"):
        mf.outbox.record(raw, sender="a@example.com", recipients=[])
    with pytest.raises(InvalidMessage, match="envelope"):
        mf.outbox.record(raw)
    with pytest.raises(InvalidMessage, match="list of addresses"):
        mf.outbox.record(raw, sender="a@example.com", recipients="b@example.com")
    assert _nothing_recorded(mf)


def test_bytes_are_normalised_to_crlf_and_keep_their_envelope(mf: MailFathom) -> None:
    raw = (
        b"From: a@example.com\nTo: b@example.com\nBcc: c@example.com,\n hidden@example.com\n"
        b"Subject: raw\n\nline one\n.line two\n"
    )
    recorded = mf.outbox.record(
        raw, sender="bounce@example.com", recipients=["b@example.com", "c@example.com"]
    )
    data = mf.outbox.message_bytes(recorded.id)
    assert recorded.sender == "bounce@example.com"
    assert [r.address for r in recorded.recipients] == ["b@example.com", "c@example.com"]
    assert data.endswith(b"\r\n\r\nline one\r\n.line two\r\n")
    assert b"Bcc" not in data and b"hidden@example.com" not in data
    assert data.startswith(b"Message-ID: <") and b"\r\nDate: " in data
    assert recorded.subject == "raw"


def test_bytes_must_be_a_message(mf: MailFathom) -> None:
    with pytest.raises(InvalidMessage, match="not a header field"):
        mf.outbox.record(b"hello there\r\n\r\nbody", sender="a@example.com", recipients=["b@x.org"])
    with pytest.raises(InvalidMessage, match="no From"):
        mf.outbox.record(b"To: b@x.org\r\n\r\nbody", sender="a@example.com", recipients=["b@x.org"])
    long_line = b"From: a@example.com\r\n\r\n" + b"x" * 1200 + b"\r\n"
    with pytest.raises(InvalidMessage, match="998"):
        mf.outbox.record(long_line, sender="a@example.com", recipients=["b@x.org"])
    with pytest.raises(InvalidMessage, match="EmailMessage or bytes"):
        mf.outbox.record("From: a@example.com\r\n\r\nx", sender="a@x.org", recipients=["b@x.org"])  # type: ignore[arg-type]
    assert _nothing_recorded(mf)


def test_internationalised_domains_are_written_in_idna_form(mf: MailFathom) -> None:
    """CPython gh-83938: policy.SMTP would write b@=?utf-8?q?b=C3=BCcher?=.example."""
    recorded = mf.outbox.record(message(From="Jörg <j@bücher.example>", To="b@müller.example"))
    data = mf.outbox.message_bytes(recorded.id)
    assert recorded.sender == "j@xn--bcher-kva.example"
    assert [r.address for r in recorded.recipients] == ["b@xn--mller-kva.example"]
    assert b"To: b@xn--mller-kva.example\r\n" in data
    assert b"<j@xn--bcher-kva.example>" in data
    assert b"=?utf-8?q?b=C3=BCcher?=" not in data
    assert not recorded.smtputf8 and data.isascii()


def test_a_non_ascii_local_part_needs_smtputf8(mf: MailFathom) -> None:
    recorded = mf.outbox.record(message(To="jürgen@example.com"))
    data = mf.outbox.message_bytes(recorded.id)
    assert recorded.smtputf8
    assert [r.address for r in recorded.recipients] == ["jürgen@example.com"]
    assert "To: jürgen@example.com\r\n".encode() in data


def test_an_oversized_message_is_refused(database_url: str, clock: FakeClock) -> None:
    with MailFathom(database_url, clock=clock, max_message_bytes=2000) as app:
        app.migrate()
        big = message()
        big.set_content("x" * 3000)
        with pytest.raises(InvalidMessage, match="over the 2000-byte limit"):
            app.outbox.record(big)
        assert _nothing_recorded(app)
        assert app.outbox.record(message()).size < 2000


def _dkim_key(tmp_path: Path) -> tuple[Path, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    path = tmp_path / "dkim.pem"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return path, b"v=DKIM1; k=rsa; p=" + base64.b64encode(public)


def test_dkim_signs_at_record_time(database_url: str, clock: FakeClock, tmp_path: Path) -> None:
    key_file, txt = _dkim_key(tmp_path)
    asked: list[bytes] = []

    def dns(name: bytes, timeout: int = 5) -> bytes:
        asked.append(name)
        return txt if name == b"mf2030._domainkey.example.com." else b""

    with MailFathom(
        database_url,
        clock=clock,
        dkim_domain="example.com",
        dkim_selector="mf2030",
        dkim_key_file=str(key_file),
    ) as app:
        app.migrate()
        recorded = app.outbox.record(message(Bcc="hidden@example.org"))
        data = app.outbox.message_bytes(recorded.id)
    assert data.startswith(b"DKIM-Signature: v=1; a=rsa-sha256;")
    assert dkim.verify(data, dnsfunc=dns)
    assert asked == [b"mf2030._domainkey.example.com."]
    assert not dkim.verify(data.replace(b"Hello Bob", b"Hello Eve"), dnsfunc=dns)
    assert not dkim.verify(data.replace(b"Subject: Hi", b"Subject: Ho"), dnsfunc=dns)


def test_dkim_settings_are_checked_at_start(tmp_path: Path, database_url: str) -> None:
    with pytest.raises(ConfigurationError, match="together"):
        MailFathom(database_url, dkim_domain="example.com")
    bad = tmp_path / "bad.pem"
    bad.write_text("not a key")
    with pytest.raises(ConfigurationError, match="not an RSA private key"):
        MailFathom(
            database_url, dkim_domain="example.com", dkim_selector="s", dkim_key_file=str(bad)
        )
    with pytest.raises(ConfigurationError, match="cannot be read"):
        MailFathom(
            database_url,
            dkim_domain="example.com",
            dkim_selector="s",
            dkim_key_file=str(tmp_path / "missing.pem"),
        )


def test_reads_and_bad_input(mf: MailFathom) -> None:
    first = mf.outbox.record(message())
    second = mf.outbox.record(message(To="carol@example.com"))
    assert [e.id for e in mf.outbox.list()] == [second.id, first.id]
    assert [e.id for e in mf.outbox.list(before_id=second.id)] == [first.id]
    assert [e.id for e in mf.outbox.list("Recorded", limit=1)] == [second.id]
    assert mf.outbox.list(OutgoingEmailStage.SENT) == []
    assert mf.outbox.counts()[OutgoingEmailStage.RECORDED] == 2
    assert mf.outbox.get(first.id).recipients[0].address == "bob@example.com"
    with pytest.raises(NotFound):
        mf.outbox.get(999)
    with pytest.raises(InvalidInput, match="stage"):
        mf.outbox.list("Delivered")
    with pytest.raises(InvalidInput, match="positive integer"):
        mf.outbox.get(0)
    with pytest.raises(InvalidInput, match="idempotency_key"):
        mf.outbox.record(message(), idempotency_key="")


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE mf_outbox SET stage = 'Delivered'",
        "UPDATE mf_outbox SET stage = 'Sent', finished_at = created_at, "
        "transmission_begun_at = created_at",  # Sent only from TransmissionBegun
        "UPDATE mf_outbox SET stage = 'TransmissionBegun'",  # without its instant
        "UPDATE mf_outbox SET stage = 'Refused', finished_at = created_at",  # without a reason
        "UPDATE mf_outbox SET finished_at = created_at",  # finished but Recorded
        "UPDATE mf_outbox SET size = size + 1",
    ],
)
def test_the_schema_refuses_illegal_records(mf: MailFathom, sql: str) -> None:
    recorded = mf.outbox.record(message())
    with pytest.raises(StoreError), raw_transaction(mf) as cur:
        cur.execute(sql)
    assert mf.outbox.get(recorded.id).stage is OutgoingEmailStage.RECORDED


def test_the_schema_allows_only_the_stage_machine_moves(mf: MailFathom) -> None:
    recorded = mf.outbox.record(message())
    with raw_transaction(mf) as cur:
        cur.execute(
            "UPDATE mf_outbox SET stage = 'Cancelled', finished_at = created_at, reason = 'x'"
        )
    with pytest.raises(StoreError), raw_transaction(mf) as cur:
        cur.execute("UPDATE mf_outbox SET stage = 'Recorded', finished_at = NULL")
    assert mf.outbox.get(recorded.id).stage is OutgoingEmailStage.CANCELLED


@pytest.mark.parametrize("message_id", ["", " ", "a", "ab", " ab "])
def test_a_message_id_too_short_to_be_one_is_refused_up_front(
    mf: MailFathom, message_id: str
) -> None:
    msg = message()
    msg["Message-ID"] = message_id
    with pytest.raises(InvalidMessage, match=r"Message-ID .* is not a message identifier"):
        mf.outbox.record(msg)
    raw = f"From: a@example.com\r\nMessage-ID: {message_id}\r\n\r\nbody\r\n".encode()
    with pytest.raises(InvalidMessage, match=r"Message-ID .* is not a message identifier"):
        mf.outbox.record(raw, sender="a@example.com", recipients=["b@example.org"])
    assert _nothing_recorded(mf)
    assert mf.outbox.record(message(Message_ID="<a@b>")).message_id == "<a@b>"
