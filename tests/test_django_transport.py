"""``DjangoBackendTransport`` on every store, through the unchanged delivery stage machine,
with real backends: Django's own SMTP backend against the aiosmtpd test server (the frozen
bytes arrive byte for byte; refusals before the body are retried or refused; a lost
answer is an unknown outcome), and django-anymail's Postmark backend against a stand-in
Postmark API on loopback (200 is Sent with Postmark's MessageID; 429 and 500 are retried;
401 pauses delivery; 422 is Refused; a dropped connection is an unknown outcome; an
unreachable API is retried, nothing begun)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import django
import pytest
from django.conf import settings

from mailfathom import (
    ConfigurationError,
    JobState,
    MailFathom,
    OutgoingEmailStage,
    Transport,
)
from mailfathom.clock import FakeClock
from mailfathom.contrib.django import DjangoBackendTransport
from smtp_fixtures import FaultServer
from test_django import DOCS, Project, _docs_snippet, _env, _environ

SMTP_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
POSTMARK = "anymail.backends.postmark.EmailBackend"


@pytest.fixture(autouse=True, scope="module")
def django_settings() -> None:
    """Django configured as a project without settings of its own would be."""
    if not settings.configured:
        settings.configure()
    django.setup()


def message(*to: str, cc: str | None = None) -> EmailMessage:
    """A message with a text body, an HTML alternative and an attachment."""
    msg = EmailMessage()
    msg["From"] = "Shop <shop@example.net>"
    msg["To"] = ", ".join(to)
    if cc is not None:
        msg["Cc"] = cc
    msg["Subject"] = "Your order ünd more"
    msg["X-Order"] = "1234"
    msg.set_content("Thanks for the order.\n")
    msg.add_alternative("<p>Thanks for the <b>order</b>.</p>\n", subtype="html")
    msg.add_attachment(b"%PDF-1.4 invoice\x00\x01", "application", "pdf", filename="inv.pdf")
    return msg


# -- a stand-in Postmark API ------------------------------------------------------------


@dataclass
class Reply:
    """One scripted answer: status and JSON body, or ``drop`` (close without answering)."""

    status: int = 200
    body: dict[str, Any] | None = None
    drop: bool = False
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Postmark:
    """The stand-in's URL, script and what it read."""

    url: str
    script: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    on_request: Callable[[dict[str, Any]], None] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: int = 0


@pytest.fixture
def postmark() -> Iterator[Postmark]:
    """A Postmark-shaped API on loopback: POST /email, answered by the script (then 200)."""
    state = Postmark(url="")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen = {"path": self.path, "token": self.headers.get("X-Postmark-Server-Token")}
            seen.update(body)
            with state.lock:
                state.requests.append(seen)
                reply = state.script.pop(0) if state.script else Reply()
                if reply.status == 200 and not reply.drop:
                    state.sent += 1
                    number = state.sent
            if state.on_request is not None:
                state.on_request(seen)
            if reply.drop:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            answer = reply.body
            if answer is None:
                answer = {
                    "To": body["To"],
                    "SubmittedAt": "2026-12-07T17:00:00Z",
                    "MessageID": f"pm-{number}",
                    "ErrorCode": 0,
                    "Message": "OK",
                }
            data = json.dumps(answer).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/"
    yield state
    server.shutdown()
    server.server_close()


def _app(database_url: str, clock: FakeClock, transport: DjangoBackendTransport) -> MailFathom:
    mf = MailFathom(database_url, clock=clock, transport=transport, smtp_config_retry=60)
    mf.migrate()
    return mf


@pytest.fixture
def postmark_app(database_url: str, clock: FakeClock, postmark: Postmark) -> Iterator[MailFathom]:
    """An app delivering through anymail's Postmark backend to the stand-in."""
    transport = DjangoBackendTransport(POSTMARK, api_url=postmark.url, server_token="pm-token")
    mf = _app(database_url, clock, transport)
    yield mf
    mf.close()


@pytest.fixture
def smtp_app(database_url: str, clock: FakeClock, smtp: FaultServer) -> Iterator[MailFathom]:
    """An app delivering through Django's SMTP backend to the aiosmtpd test server."""
    transport = DjangoBackendTransport(SMTP_BACKEND, host="127.0.0.1", port=smtp.port, timeout=5)
    mf = _app(database_url, clock, transport)
    yield mf
    mf.close()


def test_the_django_backend_transport_is_a_transport() -> None:
    assert isinstance(DjangoBackendTransport(SMTP_BACKEND), Transport)


@pytest.mark.parametrize("path", ["nowhere.Backend", "django.core.mail.EmailMessage"])
def test_a_path_that_is_no_django_email_backend_is_refused_clearly(path: str) -> None:
    with pytest.raises(ConfigurationError, match="backend"):
        DjangoBackendTransport(path)


# -- Django's SMTP backend --------------------------------------------------------------


def test_djangos_smtp_backend_sends_the_frozen_bytes_unchanged(
    smtp_app: MailFathom, smtp: FaultServer
) -> None:
    msg = message("Ann <ann@example.com>", cc="cy@example.com")
    msg["Bcc"] = "hidden@example.com"
    recorded = smtp_app.outbox.record(msg, sender="bounces@example.net")
    assert smtp_app.worker().run(burst=True) == 1
    email = smtp_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.SENT
    (received,) = smtp.accepted()
    assert received.data == smtp_app.outbox.message_bytes(recorded.id)
    assert received.mail_from == "bounces@example.net"
    assert received.rcpt_tos == ["ann@example.com", "cy@example.com", "hidden@example.com"]
    assert b"hidden@example.com" not in received.data
    assert all(r.accepted for r in email.recipients)


@pytest.mark.parametrize(
    ("script", "stage", "code"),
    [
        ({"mail": "451 4.3.0 try later"}, OutgoingEmailStage.RECORDED, 451),
        ({"mail": "550 5.7.1 sender refused"}, OutgoingEmailStage.REFUSED, 550),
        ({"rcpt": {"ann@example.com": "450 4.2.1 mailbox busy"}}, OutgoingEmailStage.RECORDED, 450),
        ({"rcpt": {"ann@example.com": "550 5.1.1 no such user"}}, OutgoingEmailStage.REFUSED, 550),
        ({"data": "554 5.3.0 no data today"}, OutgoingEmailStage.REFUSED, 554),
        ({"end": "452 4.3.1 out of space"}, OutgoingEmailStage.RECORDED, 452),
        ({"end": "554 5.7.1 spam"}, OutgoingEmailStage.REFUSED, 554),
    ],
    ids=["mail-4xx", "mail-5xx", "rcpt-4xx", "rcpt-5xx", "data-5xx", "end-4xx", "end-5xx"],
)
def test_an_smtp_refusal_is_retried_or_refused_by_its_code(
    smtp_app: MailFathom,
    smtp: FaultServer,
    script: dict[str, Any],
    stage: OutgoingEmailStage,
    code: int,
) -> None:
    smtp.script(**script)
    recorded = smtp_app.outbox.record(message("ann@example.com"))
    smtp_app.worker().run(burst=True)
    email = smtp_app.outbox.get(recorded.id)
    assert email.stage is stage
    assert email.reply_code == code
    assert smtp.accepted() == []
    job = smtp_app.jobs.get(recorded.job_id or 0)
    expected = JobState.PENDING if stage is OutgoingEmailStage.RECORDED else JobState.DEAD_LETTERED
    assert job.state is expected
    if "rcpt" in script:
        (ann,) = email.recipients
        assert ann.reply_code == code


def test_an_smtp_answer_lost_after_the_body_is_an_unknown_outcome(
    smtp_app: MailFathom, smtp: FaultServer
) -> None:
    smtp.script(end="disconnect")
    recorded = smtp_app.outbox.record(message("ann@example.com"))
    smtp_app.worker().run(burst=True)
    email = smtp_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.TRANSMISSION_BEGUN
    assert "unknown" in (email.reason or "")
    assert len(smtp.received()) == 1  # the body did arrive: only an operator can tell
    assert smtp_app.jobs.get(recorded.job_id or 0).state is JobState.DEAD_LETTERED


def test_an_smtp_server_that_cannot_be_reached_sends_nothing_and_retries(
    database_url: str, clock: FakeClock
) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now: the connection is refused
    transport = DjangoBackendTransport(SMTP_BACKEND, host="127.0.0.1", port=port, timeout=5)
    mf = _app(database_url, clock, transport)
    try:
        recorded = mf.outbox.record(message("ann@example.com"))
        mf.worker().run(burst=True)
        email = mf.outbox.get(recorded.id)
        assert email.stage is OutgoingEmailStage.RECORDED
        assert email.transmission_begun_at is None and email.body_transmissions == 0
        assert "nothing was sent" in (email.reason or "")
    finally:
        mf.close()


def test_a_refused_smtp_login_pauses_delivery_without_spending_attempts(
    database_url: str, clock: FakeClock, smtp: FaultServer
) -> None:
    smtp.script(auth={"user": "app", "password": "right"})
    transport = DjangoBackendTransport(
        SMTP_BACKEND,
        host="127.0.0.1",
        port=smtp.port,
        username="app",
        password="wrong",
        timeout=5,
    )
    mf = _app(database_url, clock, transport)
    try:
        recorded = mf.outbox.record(message("ann@example.com"))
        mf.worker().run(burst=True)
        email = mf.outbox.get(recorded.id)
        assert (email.stage, email.attempts) == (OutgoingEmailStage.RECORDED, 0)
        assert email.transmission_begun_at is None
        assert "SMTPAuthenticationError" in (mf.deliverer.problem() or "")
    finally:
        mf.close()


# -- django-anymail's Postmark backend --------------------------------------------------


def test_postmark_through_anymail_is_sent_with_postmarks_message_id(
    postmark_app: MailFathom, postmark: Postmark
) -> None:
    msg = message("Ann <ann@example.com>", cc="cy@example.com")
    msg["Bcc"] = "hidden@example.com"
    recorded = postmark_app.outbox.record(msg)
    stages: list[OutgoingEmailStage] = []
    postmark.on_request = lambda _: stages.append(postmark_app.outbox.get(recorded.id).stage)
    assert postmark_app.worker().run(burst=True) == 1
    assert stages == [OutgoingEmailStage.TRANSMISSION_BEGUN]  # committed before the request
    (seen,) = postmark.requests
    assert seen["path"] == "/email" and seen["token"] == "pm-token"
    assert seen["From"] == "Shop <shop@example.net>"
    assert seen["To"] == "Ann <ann@example.com>"
    assert seen["Cc"] == "cy@example.com" and seen["Bcc"] == "hidden@example.com"
    assert seen["Subject"] == "Your order ünd more"
    assert seen["TextBody"] == "Thanks for the order.\n"
    assert seen["HtmlBody"] == "<p>Thanks for the <b>order</b>.</p>\n"
    (attachment,) = seen["Attachments"]
    assert attachment["Name"] == "inv.pdf" and attachment["ContentType"] == "application/pdf"
    headers = {h["Name"]: h["Value"] for h in seen["Headers"]}
    assert headers["X-Order"] == "1234"
    assert headers["Message-ID"] == recorded.message_id
    assert "DKIM-Signature" not in headers
    email = postmark_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.SENT
    assert "message id pm-1" in (email.reply_text or "")
    assert [r.accepted for r in email.recipients] == [True, True, True]


@pytest.mark.parametrize(
    ("reply", "wait"),
    [
        (
            Reply(429, {"ErrorCode": 429, "Message": "rate limit"}, headers={"Retry-After": "120"}),
            120,
        ),
        (Reply(500, {"Message": "oops"}), None),
    ],
    ids=["throttled", "server-error"],
)
def test_postmark_429_and_500_are_retried_and_then_sent(
    postmark_app: MailFathom, postmark: Postmark, clock: FakeClock, reply: Reply, wait: int | None
) -> None:
    postmark.script = [reply]
    recorded = postmark_app.outbox.record(message("ann@example.com"))
    postmark_app.worker().run(burst=True)
    email = postmark_app.outbox.get(recorded.id)
    assert (email.stage, email.attempts) == (OutgoingEmailStage.RECORDED, 1)
    assert email.reply_code == reply.status
    job = postmark_app.jobs.get(recorded.job_id or 0)
    assert job.state is JobState.PENDING and job.available_at is not None
    if wait is not None:  # the provider's Retry-After, not the backoff
        assert job.available_at - clock.now() == timedelta(seconds=wait)
    clock.advance(job.available_at - clock.now())
    postmark_app.worker().run(burst=True)
    assert postmark_app.outbox.get(recorded.id).stage is OutgoingEmailStage.SENT
    assert len(postmark.requests) == 2 and postmark.sent == 1


def test_postmark_401_pauses_delivery_until_the_token_is_accepted(
    postmark_app: MailFathom, postmark: Postmark, clock: FakeClock
) -> None:
    postmark.script = [Reply(401, {"ErrorCode": 10, "Message": "Bad or missing API token"})]
    recorded = postmark_app.outbox.record(message("ann@example.com"))
    postmark_app.worker().run(burst=True)
    email = postmark_app.outbox.get(recorded.id)
    assert (email.stage, email.attempts) == (OutgoingEmailStage.RECORDED, 0)
    assert "401" in (postmark_app.deliverer.problem() or "")
    clock.advance(61)  # the next probe is due; the stand-in answers 200 now
    postmark_app.worker().run(burst=True)
    assert postmark_app.outbox.get(recorded.id).stage is OutgoingEmailStage.SENT
    assert postmark_app.deliverer.problem() is None


@pytest.mark.parametrize(
    "body",
    [
        {"ErrorCode": 300, "Message": "Invalid 'From' address: 'shop@example.net'."},
        {
            "ErrorCode": 406,
            "Message": "You tried to send to a recipient that has been marked as inactive.\n"
            "Found inactive addresses: ann@example.com.\nInactive recipients are ones that "
            "have generated a hard bounce or a spam complaint.",
        },
    ],
    ids=["invalid-request", "recipients-refused"],
)
def test_postmark_422_is_refused(
    postmark_app: MailFathom, postmark: Postmark, body: dict[str, Any]
) -> None:
    postmark.script = [Reply(422, body)]
    recorded = postmark_app.outbox.record(message("ann@example.com"))
    postmark_app.worker().run(burst=True)
    email = postmark_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.REFUSED
    assert postmark_app.jobs.get(recorded.job_id or 0).state is JobState.DEAD_LETTERED
    assert postmark.sent == 0


def test_a_postmark_request_left_unanswered_is_an_unknown_outcome(
    postmark_app: MailFathom, postmark: Postmark
) -> None:
    postmark.script = [Reply(drop=True)]
    recorded = postmark_app.outbox.record(message("ann@example.com"))
    postmark_app.worker().run(burst=True)
    email = postmark_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.TRANSMISSION_BEGUN  # for an operator
    assert email.transmission_begun_at is not None
    assert postmark_app.jobs.get(recorded.job_id or 0).state is JobState.DEAD_LETTERED
    assert len(postmark.requests) == 1


def test_an_unreachable_postmark_is_retried(database_url: str, clock: FakeClock) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}/"
    closed.close()  # nothing listens there now: the connection is refused
    mf = _app(database_url, clock, DjangoBackendTransport(POSTMARK, api_url=url, server_token="t"))
    try:
        recorded = mf.outbox.record(message("ann@example.com"))
        mf.worker().run(burst=True)
        email = mf.outbox.get(recorded.id)
        assert (email.stage, email.attempts) == (OutgoingEmailStage.RECORDED, 1)
        assert "never made" in (email.reason or "")
        assert mf.jobs.get(recorded.job_id or 0).state is JobState.PENDING
    finally:
        mf.close()


def test_many_threads_deliver_at_once_each_on_its_own_backend(
    database_url: str, clock: FakeClock, postmark: Postmark
) -> None:
    transport = DjangoBackendTransport(POSTMARK, api_url=postmark.url, server_token="t")
    mf = MailFathom(database_url, clock=clock, transport=transport, concurrency=4)
    mf.migrate()
    try:
        recorded = [mf.outbox.record(message(f"r{i}@example.com")) for i in range(12)]
        mf.worker().run(burst=True)
        sent = [mf.outbox.get(r.id) for r in recorded]
        assert all(e.stage is OutgoingEmailStage.SENT for e in sent)
        ids = {(e.reply_text or "").rsplit(" ", 1)[-1] for e in sent}
        assert len(ids) == 12 and postmark.sent == 12
        assert sorted(r["To"] for r in postmark.requests) == sorted(
            f"r{i}@example.com" for i in range(12)
        )
    finally:
        mf.close()


# -- in a Django project: MAILFATHOM["DELIVERY_BACKEND"] -------------------------------


def test_a_project_delivers_through_the_backend_its_settings_name(
    database_url: str, smtp: FaultServer, tmp_path: Path
) -> None:
    extra = {
        "SMTP_URL": None,
        "DELIVERY_BACKEND": SMTP_BACKEND,
        "DELIVERY_BACKEND_OPTIONS": {"host": "127.0.0.1", "port": smtp.port, "timeout": 5},
    }
    project = Project(_env(database_url, MF_TEST_MAILFATHOM_EXTRA=json.dumps(extra)), tmp_path)
    project.shop("migrate", "mail")
    assert smtp.received() == []  # recording never talks to the backend
    project.run("mailfathom", "worker", "--burst")
    outside = MailFathom(database_url)
    try:
        emails = outside.outbox.list()
        assert len(emails) == 5
        assert {e.stage for e in emails} == {OutgoingEmailStage.SENT}
        frozen = [outside.outbox.message_bytes(e.id) for e in emails]
        # SMTP data ends with CRLF (RFC 5321 §4.1.1.4): smtplib adds one, as mailfathom's
        # own SMTP transport does, to a message that does not end with one
        wire = sorted(data if data.endswith(b"\r\n") else data + b"\r\n" for data in frozen)
        assert sorted(m.data for m in smtp.accepted()) == wire
    finally:
        outside.close()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_bad_delivery_backend_settings_are_refused_with_what_to_write(
    database_url: str, tmp_path: Path
) -> None:
    for extra, expected in [
        (
            {"SMTP_URL": "smtp://127.0.0.1:25", "DELIVERY_BACKEND": SMTP_BACKEND},
            "both MAILFATHOM['DELIVERY_BACKEND'] and SMTP_URL",
        ),
        ({"SMTP_URL": None, "DELIVERY_BACKEND": 3}, "must be the dotted path of a Django"),
        (
            {"SMTP_URL": None, "DELIVERY_BACKEND_OPTIONS": {"host": "x"}},
            "is given without DELIVERY_BACKEND",
        ),
        (
            {"SMTP_URL": None, "DELIVERY_BACKEND": SMTP_BACKEND, "DELIVERY_BACKEND_OPTIONS": 1},
            "must be a dict of the backend's keyword arguments",
        ),
        (
            {"SMTP_URL": None, "DELIVERY_BACKEND": "anymail.backends.postmrak.EmailBackend"},
            "cannot be imported",
        ),
    ]:
        env = _env(database_url, MF_TEST_MAILFATHOM_EXTRA=json.dumps(extra))
        refused = Project(env, tmp_path).run("mailfathom", "jobs", "list", check=False)
        assert refused.returncode != 0
        assert expected in refused.stderr, refused.stderr


def test_the_docs_delivery_backend_settings_deliver_through_anymail(
    tmp_path: Path, postmark: Postmark
) -> None:
    """docs/django.md's settings, then its DELIVERY_BACKEND block (anymail's URL pointed at
    the stand-in), in a minimal project: mail sent there reaches Postmark's API."""
    blocks: list[str] = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    (shown,) = [block for block in blocks if "DELIVERY_BACKEND" in block]
    site = tmp_path / "site"
    site.mkdir()
    (site / "docsite.py").write_text(
        "from pathlib import Path\n"
        "BASE_DIR = Path(__file__).parent\n"
        'SECRET_KEY = "docs"\n'
        "USE_TZ = True\n"
        'INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth"]\n'
        'DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3",'
        ' "NAME": BASE_DIR / "db.sqlite3"}}\n'
        + _docs_snippet()
        + shown
        + f'ANYMAIL["POSTMARK_API_URL"] = "{postmark.url}"\n'
    )
    env = _environ()
    env["DJANGO_SETTINGS_MODULE"] = "docsite"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env["PYTHONPATH"]]))
    for args in (
        ["migrate", "-v0"],
        ["mailfathom", "migrate"],
        [
            "shell",
            "-c",
            "from django.core.mail import send_mail; "
            "send_mail('Docs', 'Hello.', 'app@example.com', ['ann@example.com'])",
        ],
        ["mailfathom", "worker", "--burst"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "django", *args],
            env=env,
            cwd=site,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    (seen,) = postmark.requests
    assert (seen["token"], seen["To"], seen["Subject"]) == (
        "your-server-token",
        "ann@example.com",
        "Docs",
    )
    with MailFathom(f"sqlite:///{site / 'db.sqlite3'}") as mf:
        (email,) = mf.outbox.list()
        assert email.stage is OutgoingEmailStage.SENT


def test_an_html_only_message_with_an_inline_image_keeps_its_content_id(
    postmark_app: MailFathom, postmark: Postmark
) -> None:
    msg = EmailMessage()
    msg["From"] = "shop@example.net"
    msg["To"] = "ann@example.com"
    msg["Subject"] = "Logo"
    msg["Reply-To"] = "Help <help@example.net>"
    msg.set_content('<p><img src="cid:logo@shop"></p>\n', subtype="html")
    msg.add_related(b"\x89PNG\r\n\x1a\nlogo", "image", "png", cid="<logo@shop>")
    recorded = postmark_app.outbox.record(msg)
    postmark_app.worker().run(burst=True)
    assert postmark_app.outbox.get(recorded.id).stage is OutgoingEmailStage.SENT
    (seen,) = postmark.requests
    assert seen["HtmlBody"] == '<p><img src="cid:logo@shop"></p>\n'
    assert "TextBody" not in seen
    assert seen["ReplyTo"] == "Help <help@example.net>"
    (image,) = seen["Attachments"]
    assert image["ContentType"] == "image/png"
    assert image["ContentID"] == "cid:logo@shop"


def test_a_message_that_needs_smtputf8_is_refused_by_djangos_smtp_backend_unsent(
    smtp_app: MailFathom, smtp: FaultServer
) -> None:
    recorded = smtp_app.outbox.record(message("jörg@example.com"))
    smtp_app.worker().run(burst=True)
    email = smtp_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.REFUSED
    assert email.transmission_begun_at is None and email.body_transmissions == 0
    assert "SMTPUTF8" in (email.reason or "")
    assert smtp.received() == []


def test_recipients_postmark_rejects_in_a_200_are_kept_refused(
    postmark_app: MailFathom, postmark: Postmark
) -> None:
    inactive = (
        "Message OK, but will not deliver to these inactive addresses: bob@example.com. "
        "Inactive recipients are ones that have generated a hard bounce or a spam complaint."
    )
    postmark.script = [
        Reply(
            200,
            {
                "To": "ann@example.com, bob@example.com",
                "MessageID": "pm-7",
                "ErrorCode": 0,
                "Message": inactive,
            },
        )
    ]
    recorded = postmark_app.outbox.record(message("ann@example.com", "bob@example.com"))
    postmark_app.worker().run(burst=True)
    email = postmark_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.SENT
    ann, bob = email.recipients
    assert ann.accepted and bob.refused
    assert "rejected" in (bob.reply_text or "")
