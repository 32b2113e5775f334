"""A real SMTP server process (aiosmtpd) whose answers a test scripts, fault by fault.

Run as ``python smtp_fault_server.py --script S --records DIR [--cert C --key K]``; it
prints ``{"port": …, "tls_port": …}`` when listening. The JSON script file is read
again for every connection and every MAIL FROM, so a test rewrites it between
attempts. Every message whose end of data arrives is written to ``DIR`` with the
envelope and the answer given, before the answer is sent. Script keys (all optional):

- ``greeting``: a reply line instead of 220 (e.g. ``"554 5.3.2 no service"``)
- ``ehlo``: a reply line to both EHLO and HELO instead of 250
- ``tls``: offer STARTTLS with the given certificate
- ``auth``: ``{"user": …, "password": …}``: offer AUTH (PLAIN, LOGIN) and require it
- ``size``: the SIZE limit to advertise; ``size_text``: advertise ``SIZE <that text>``
  instead (a server whose limit does not parse); ``smtputf8``: advertise SMTPUTF8
- ``pipelining``: advertise PIPELINING (RFC 2920); each record then says whether its
  RCPT TO commands had already arrived when MAIL FROM was answered (``pipelined``)
- ``mail``: the reply to MAIL FROM; ``rcpt``: ``{address: reply}`` (default 250)
- ``rcpt_stall``: seconds to wait before answering each RCPT TO
- ``data``: a reply to DATA instead of 354
- ``end``: the reply to the end of data (default 250), ``"disconnect"`` to hang up
  without answering, or ``"stall:<seconds>"`` to wait that long first
- ``hang_up_after_reply``: close the connection right after answering the end of data
  (a server that takes one message per connection and says nothing about it)
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import itertools
import json
import ssl
import sys
import time
from pathlib import Path
from typing import Any

from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

_connections = itertools.count(1)
_messages = itertools.count(1)


class Scripted:
    """The aiosmtpd handler: every answer comes from the script file."""

    def __init__(self, script_path: Path, records: Path, connection: int) -> None:
        self.script_path = script_path
        self.records = records
        self.connection = connection
        self.script = _read(script_path)

    async def handle_EHLO(  # noqa: N802 - aiosmtpd's hook names
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        hostname: str,
        responses: list[str],
    ) -> list[str]:
        refusal = self.script.get("ehlo")
        if refusal:
            return [refusal]
        session.host_name = hostname
        size_text = self.script.get("size_text")
        if size_text is not None:
            responses = [
                f"250-SIZE {size_text}" if line.startswith("250-SIZE") else line
                for line in responses
            ]
        if self.script.get("pipelining"):
            responses = [*responses[:-1], "250-PIPELINING", responses[-1]]
        return responses

    async def handle_HELO(  # noqa: N802
        self, server: SMTP, session: Session, envelope: Envelope, hostname: str
    ) -> str:
        refusal = self.script.get("ehlo")
        if refusal:
            return str(refusal)
        session.host_name = hostname
        return f"250 {server.hostname}"

    async def handle_MAIL(  # noqa: N802
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        mail_options: list[str],
    ) -> str:
        self.script = _read(self.script_path)
        # Whether the client's next commands are already here, unanswered: pipelined.
        waiting = getattr(server._reader, "_buffer", b"")
        session.pipelined = b"RCPT" in bytes(waiting).upper()  # type: ignore[attr-defined]
        reply = str(self.script.get("mail") or "250 OK")
        if reply.startswith("2"):
            envelope.mail_from = address
            envelope.mail_options.extend(mail_options)
        return reply

    async def handle_RCPT(  # noqa: N802
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        rcpt_options: list[str],
    ) -> str:
        await asyncio.sleep(float(self.script.get("rcpt_stall", 0)))
        reply = str(self.script.get("rcpt", {}).get(address, "250 OK"))
        if reply.startswith("2"):
            envelope.rcpt_tos.append(address)
        return reply

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:  # noqa: N802
        end = str(self.script.get("end") or "250 2.0.0 OK queued")
        stall = float(end.split(":", 1)[1]) if end.startswith("stall:") else 0.0
        answer = "250 2.0.0 OK after a stall" if stall else end
        record = {
            "connection": self.connection,
            "mail_from": envelope.mail_from,
            "mail_options": envelope.mail_options,
            "rcpt_tos": envelope.rcpt_tos,
            "data": base64.b64encode(bytes(envelope.original_content or b"")).decode(),
            "answer": answer,
            "tls": session.ssl is not None or _implicit_tls(server),
            "login": _login_name(session),
            "pipelined": bool(getattr(session, "pipelined", False)),
        }
        name = f"{time.time_ns()}-{next(_messages):06d}.json"
        (self.records / name).write_text(json.dumps(record))
        if end == "disconnect":
            if server.transport is not None:
                server.transport.close()
            return "421 never sent"
        await asyncio.sleep(stall)
        if self.script.get("hang_up_after_reply") and server.transport is not None:
            asyncio.get_running_loop().call_soon(server.transport.close)
        return answer


class FaultSMTP(SMTP):
    """aiosmtpd's SMTP with a scriptable answer to DATA itself (instead of 354)."""

    async def smtp_DATA(self, arg: str) -> None:  # noqa: N802
        envelope = self.envelope
        handler = self.event_handler
        reply = handler.script.get("data") if isinstance(handler, Scripted) else None
        if reply and envelope is not None and envelope.rcpt_tos:
            await self.push(str(reply))
            return
        await super().smtp_DATA(arg)


class RefusingGreeting(asyncio.Protocol):
    """A server that greets with a refusal, answers QUIT, and refuses everything else."""

    def __init__(self, greeting: str) -> None:
        self.greeting = greeting
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(f"{self.greeting}\r\n".encode())

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        for line in data.splitlines():
            if line.strip().upper() == b"QUIT":
                self.transport.write(b"221 2.0.0 bye\r\n")
                self.transport.close()
                return
            self.transport.write(b"503 5.5.1 no service\r\n")


def _implicit_tls(server: SMTP) -> bool:
    transport = server.transport
    return transport is not None and transport.get_extra_info("sslcontext") is not None


def _read(path: Path) -> dict[str, Any]:
    script: dict[str, Any] = json.loads(path.read_text())
    return script


def _login_name(session: Session) -> str | None:
    data = session.auth_data
    if isinstance(data, LoginPassword):
        return data.login.decode()
    return None


def _protocol(
    script_path: Path, records: Path, tls: ssl.SSLContext | None, *, implicit: bool = False
) -> asyncio.Protocol:
    connection = next(_connections)
    handler = Scripted(script_path, records, connection)
    script = handler.script
    if script.get("greeting"):
        return RefusingGreeting(str(script["greeting"]))
    auth = script.get("auth")

    def authenticate(
        server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        ok = (
            isinstance(data, LoginPassword)
            and auth is not None
            and data.login.decode() == auth["user"]
            and data.password.decode() == auth["password"]
        )
        return AuthResult(success=ok, handled=False, auth_data=data if ok else None)

    server = FaultSMTP(
        handler,
        data_size_limit=script.get("size") or 33554432,
        enable_SMTPUTF8=bool(script.get("smtputf8", True)),
        hostname="fault.example",
        tls_context=tls if script.get("tls") and not implicit else None,
        auth_required=auth is not None,
        auth_require_tls=bool(script.get("tls")) and not implicit,
        authenticator=authenticate if auth is not None else None,
        timeout=30,
    )
    return server


async def _serve(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    tls: ssl.SSLContext | None = None
    if args.cert:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(args.cert, args.key)
    script, records = Path(args.script), Path(args.records)
    plain = await loop.create_server(
        lambda: _protocol(script, records, tls), "127.0.0.1", args.port
    )
    ports = {"port": plain.sockets[0].getsockname()[1], "tls_port": None}
    if tls is not None:
        implicit = await loop.create_server(
            lambda: _protocol(script, records, tls, implicit=True), "127.0.0.1", 0, ssl=tls
        )
        ports["tls_port"] = implicit.sockets[0].getsockname()[1]
    print(json.dumps(ports), flush=True)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--script", required=True)
    parser.add_argument("--records", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    args = parser.parse_args()
    try:
        asyncio.run(_serve(args))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
