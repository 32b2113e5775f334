"""A real SNS signing chain on loopback, for the tests of ``POST /api/suppressions/sns``.

An RSA key and its self-signed certificate (made with ``cryptography``), served over a
real HTTPS server on 127.0.0.1 whose TLS certificate comes from a trustme CA, and
messages signed the way SNS signs them. The canonical string-to-sign is written here
from AWS's documentation, apart from the code under test, so that a mistake there is
not mirrored here.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

TOPIC = "arn:aws:sns:eu-west-1:123456789012:ses-bounces"
OTHER_TOPIC = "arn:aws:sns:eu-west-1:123456789012:someone-elses"


def signing_pair() -> tuple[rsa.RSAPrivateKey, bytes]:
    """A fresh RSA key and its self-signed certificate (PEM), as SNS's signing cert."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    return key, cert.public_bytes(serialization.Encoding.PEM)


def canonical(message: dict[str, str]) -> bytes:
    """What SNS signs: per AWS, for a Notification the keys Message, MessageId, Subject
    (only if present), Timestamp, TopicArn, Type; for the two subscription messages
    Message, MessageId, SubscribeURL, Timestamp, Token, TopicArn, Type; each written as
    its name, a newline, its value, a newline."""
    if message["Type"] == "Notification":
        keys = ["Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"]
    else:
        keys = ["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"]
    return "".join(f"{k}\n{message[k]}\n" for k in keys if k in message).encode()


@dataclass
class SnsChain:
    """The HTTPS server with the signing certificate(s), the client TLS context that
    trusts it, and what it was asked for."""

    port: int
    client_context: ssl.SSLContext
    key: rsa.RSAPrivateKey
    files: dict[str, bytes]
    hits: Counter[str] = field(default_factory=Counter)
    confirmed: list[str] = field(default_factory=list)
    confirmed_event: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str, host: str = "localhost", scheme: str = "https") -> str:
        """A URL of this server."""
        return f"{scheme}://{host}:{self.port}{path}"

    def sign(
        self,
        message: dict[str, str],
        *,
        version: str = "1",
        cert_url: str | None = None,
        key: rsa.RSAPrivateKey | None = None,
    ) -> dict[str, str]:
        """``message`` with SNS's signature fields, signed by this chain's key."""
        algorithm: hashes.HashAlgorithm = hashes.SHA1() if version == "1" else hashes.SHA256()
        signature = (key or self.key).sign(canonical(message), padding.PKCS1v15(), algorithm)
        return {
            **message,
            "SignatureVersion": version,
            "Signature": base64.b64encode(signature).decode(),
            "SigningCertURL": cert_url or self.url("/cert.pem"),
        }

    def notification(
        self, ses: dict[str, Any], *, topic: str = TOPIC, message_id: str | None = None
    ) -> dict[str, str]:
        """An unsigned SNS Notification carrying the SES notification ``ses``."""
        return {
            "Type": "Notification",
            "MessageId": message_id or str(uuid.uuid4()),
            "TopicArn": topic,
            "Subject": "Amazon SES Email Event Notification",
            "Message": json.dumps(ses),
            "Timestamp": "2026-12-07T12:00:00.000Z",
            "UnsubscribeURL": self.url("/unsubscribe"),
        }

    def subscription(self, token: str, *, topic: str = TOPIC) -> dict[str, str]:
        """An unsigned SubscriptionConfirmation whose SubscribeURL is this server's."""
        return {
            "Type": "SubscriptionConfirmation",
            "MessageId": str(uuid.uuid4()),
            "Token": token,
            "TopicArn": topic,
            "Message": f"You have chosen to subscribe to the topic {topic}.",
            "SubscribeURL": self.url(f"/confirm?Token={token}"),
            "Timestamp": "2026-12-07T12:00:00.000Z",
        }


def bounce(bounce_type: str, *addresses: str, sub_type: str = "General") -> dict[str, Any]:
    """An SES bounce notification for ``addresses``."""
    status = "5.1.1" if bounce_type == "Permanent" else "4.2.2"
    return {
        "notificationType": "Bounce",
        "bounce": {
            "bounceType": bounce_type,
            "bounceSubType": sub_type,
            "bouncedRecipients": [
                {
                    "emailAddress": address,
                    "action": "failed",
                    "status": status,
                    "diagnosticCode": f"smtp; 550 {status} <{address}> mailbox problem",
                }
                for address in addresses
            ],
            "timestamp": "2026-12-07T11:59:58.000Z",
            "feedbackId": "0100018c-feedback",
        },
        "mail": {"messageId": "0100018c-mail", "source": "app@example.net"},
    }


def complaint(*addresses: str) -> dict[str, Any]:
    """An SES complaint notification for ``addresses``."""
    return {
        "notificationType": "Complaint",
        "complaint": {
            "complainedRecipients": [{"emailAddress": a} for a in addresses],
            "complaintFeedbackType": "abuse",
            "timestamp": "2026-12-07T11:59:58.000Z",
            "feedbackId": "0100018c-feedback",
        },
        "mail": {"messageId": "0100018c-mail", "source": "app@example.net"},
    }


@pytest.fixture(scope="module")
def sns_chain() -> Iterator[SnsChain]:
    """The HTTPS server on 127.0.0.1 (TLS name ``localhost``) serving the signing
    certificate at ``/cert.pem`` and recording each SubscribeURL fetched."""
    key, pem = signing_pair()
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    chain = SnsChain(port=0, client_context=client_context, key=key, files={"/cert.pem": pem})

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path
            chain.hits[path.partition("?")[0]] += 1
            if path.startswith("/confirm?Token="):
                chain.confirmed.append(path.partition("=")[2])
                chain.confirmed_event.set()
                body = b"<ConfirmSubscriptionResponse/>"
            elif path in chain.files:
                body = chain.files[path]
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = server_context.wrap_socket(server.socket, server_side=True)
    chain.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield chain
    server.shutdown()
    server.server_close()
    thread.join(10)
