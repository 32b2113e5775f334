"""Fixtures for the outbox tests: a real SMTP server process with scripted faults.

One ``smtp_fault_server.py`` process serves the whole session (plain port, and an
implicit-TLS port with a test CA made by trustme); each test gets a fresh script
and an empty record of what the server received.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import trustme

from mailfathom import FakeClock, MailFathom

SERVER_SCRIPT = Path(__file__).with_name("smtp_fault_server.py")


@dataclass(frozen=True)
class Received:
    """One message whose end of data reached the server, and what the server answered."""

    connection: int
    mail_from: str
    mail_options: list[str]
    rcpt_tos: list[str]
    data: bytes
    answer: str
    tls: bool
    login: str | None
    #: Whether the RCPT TO commands had arrived before MAIL FROM was answered.
    pipelined: bool = False

    @property
    def accepted(self) -> bool:
        """The server answered 2xx: it took responsibility for the message."""
        return self.answer.startswith("2")


@dataclass(frozen=True)
class ServerProcess:
    """The running server: its ports, files and process."""

    process: subprocess.Popen[str]
    port: int
    tls_port: int
    script_path: Path
    records: Path
    cafile: Path


class FaultServer:
    """The test's handle on the server: script it, point at it, read what it received."""

    def __init__(self, server: ServerProcess) -> None:
        self._server = server
        self.port = server.port
        self.tls_port = server.tls_port
        self.cafile = server.cafile
        #: Script keys every :meth:`script` call starts from (e.g. ``pipelining``).
        self.base: dict[str, Any] = {}

    def script(self, **script: Any) -> None:
        """Answer the next connections and transactions as ``script`` says (see the server),
        on top of :attr:`base`."""
        self._server.script_path.write_text(json.dumps({**self.base, **script}))

    def url(
        self,
        *,
        implicit_tls: bool = False,
        user: str | None = None,
        password: str | None = None,
        **options: str,
    ) -> str:
        """An ``smtp_url`` for this server; TLS URLs trust the test CA."""
        scheme, port = ("smtps", self.tls_port) if implicit_tls else ("smtp", self.port)
        credentials = ""
        if user is not None:
            credentials = quote(user, safe="") + ":" + quote(password or "", safe="") + "@"
        if implicit_tls or options.get("starttls") != "off":
            options.setdefault("cafile", str(self.cafile))
        query = "&".join(f"{key}={quote(value, safe='/')}" for key, value in options.items())
        return f"{scheme}://{credentials}127.0.0.1:{port}" + (f"?{query}" if query else "")

    def received(self) -> list[Received]:
        """Every message whose end of data reached the server, in order."""
        found = []
        for path in sorted(self._server.records.glob("*.json")):
            raw = json.loads(path.read_text())
            raw["data"] = base64.b64decode(raw["data"])
            found.append(Received(**raw))
        return found

    def accepted(self) -> list[Received]:
        """The messages the server accepted (answered 2xx after the body)."""
        return [message for message in self.received() if message.accepted]


@pytest.fixture(scope="session")
def smtp_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The SMTP server process, with a certificate for 127.0.0.1 from a test CA."""
    folder = tmp_path_factory.mktemp("smtp")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cafile, certfile, keyfile = folder / "ca.pem", folder / "cert.pem", folder / "key.pem"
    ca.cert_pem.write_to_path(str(cafile))
    cert.private_key_pem.write_to_path(str(keyfile))
    for index, blob in enumerate(cert.cert_chain_pems):
        blob.write_to_path(str(certfile), append=index > 0)
    script_path, records = folder / "script.json", folder / "records"
    records.mkdir()
    script_path.write_text("{}")
    process = subprocess.Popen(
        [
            sys.executable,
            str(SERVER_SCRIPT),
            "--script",
            str(script_path),
            "--records",
            str(records),
            "--cert",
            str(certfile),
            "--key",
            str(keyfile),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    ports = json.loads(process.stdout.readline())
    yield ServerProcess(process, ports["port"], ports["tls_port"], script_path, records, cafile)
    process.terminate()
    process.wait(10)
    process.stdout.close()


@pytest.fixture
def smtp(smtp_process: ServerProcess) -> FaultServer:
    """The server, answering everything with success, with nothing received yet."""
    for path in smtp_process.records.glob("*.json"):
        path.unlink()
    server = FaultServer(smtp_process)
    server.script()
    return server


@pytest.fixture
def mail_app(database_url: str, clock: FakeClock, smtp: FaultServer) -> Iterator[MailFathom]:
    """A migrated app on a fresh database that submits to the fault server."""
    app = MailFathom(database_url, clock=clock, smtp_url=smtp.url(), smtp_data_timeout=1.0)
    app.migrate()
    yield app
    app.close()


@pytest.fixture
def split_app(database_url: str, clock: FakeClock, smtp: FaultServer) -> Iterator[MailFathom]:
    """:func:`mail_app` throttled per recipient domain: a message is recorded once per
    domain, as parts of one handle."""
    app = MailFathom(
        database_url,
        clock=clock,
        smtp_url=smtp.url(),
        smtp_data_timeout=1.0,
        domain_limits={"*": {"connections": 5}},
    )
    app.migrate()
    yield app
    app.close()
