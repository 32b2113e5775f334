"""Amazon SNS messages over HTTP(S): their signature checked exactly as AWS documents it.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

SNS posts a JSON document to a subscribed HTTPS endpoint; nothing but its signature says
it came from SNS. :class:`SnsVerifier` accepts a message only when

* its ``TopicArn`` is one of the allowed topics (the ``sns_topic_arns`` setting),
* its ``SigningCertURL`` is ``https`` on a host ``sns.<region>.amazonaws.com`` (or
  ``.amazonaws.com.cn``), no port, no user part; the certificate is fetched over verified
  TLS with a timeout, no redirect followed, and cached per URL,
* its ``Signature`` verifies, with that certificate's RSA key, over the canonical
  string-to-sign of its ``Type`` (``Notification``, ``SubscriptionConfirmation``,
  ``UnsubscribeConfirmation``): ``SignatureVersion`` 1 is SHA1withRSA, 2 SHA256withRSA.

A ``SubscriptionConfirmation`` that passes is confirmed by fetching its ``SubscribeURL``,
which must pass the same host rule. Uses ``cryptography`` (the ``mailfathom[sns]``
extra): the standard library cannot check an RSA signature.
"""

from __future__ import annotations

import base64
import binascii
import http.client
import json
import re
import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mailfathom.errors import ConfigurationError, InvalidInput

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

__all__ = [
    "AWS_HOSTS",
    "MESSAGE_TYPES",
    "SignatureRefused",
    "SnsFetchFailed",
    "SnsFetcher",
    "SnsMessage",
    "SnsVerifier",
    "parse_topic_arns",
    "string_to_sign",
]

#: The hosts SNS signs from and confirms subscriptions at: ``sns.<region>.amazonaws.com``.
AWS_HOSTS = re.compile(r"sns\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?")
#: The keys signed, in order, per message type (AWS: "Verifying the signatures of Amazon
#: SNS messages"). ``Subject`` is signed only when the notification has one.
MESSAGE_TYPES: dict[str, tuple[str, ...]] = {
    "Notification": ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"),
    "SubscriptionConfirmation": (
        "Message",
        "MessageId",
        "SubscribeURL",
        "Timestamp",
        "Token",
        "TopicArn",
        "Type",
    ),
    "UnsubscribeConfirmation": (
        "Message",
        "MessageId",
        "SubscribeURL",
        "Timestamp",
        "Token",
        "TopicArn",
        "Type",
    ),
}
_TOPIC_ARN = re.compile(r"arn:aws(?:-cn|-us-gov)?:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_.-]{1,256}")
_MOST_BYTES = 65_536  # a signing certificate is about 2 KB


class SignatureRefused(InvalidInput):
    """An SNS message that cannot be shown to come from an allowed topic: nothing was done."""


class SnsFetchFailed(InvalidInput):
    """The signing certificate or subscription URL could not be fetched (network, timeout,
    an answer other than 200): SNS retries later; nothing was done."""


def parse_topic_arns(value: object) -> frozenset[str]:
    """The allowed topic ARNs of the ``sns_topic_arns`` setting (comma-separated text, or
    a list from ``mailfathom.toml``), each checked; a bad one raises ConfigurationError."""
    if value is None:
        return frozenset()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise ConfigurationError(
            f"sns_topic_arns must be topic ARNs separated by commas, not {value!r}"
        )
    arns = frozenset(str(item).strip() for item in items if str(item).strip())
    for arn in sorted(arns):
        if not _TOPIC_ARN.fullmatch(arn):
            raise ConfigurationError(
                f"sns_topic_arns: {arn!r} is not an SNS topic ARN: give ARNs like "
                "arn:aws:sns:eu-west-1:123456789012:ses-bounces, separated by commas "
                "(MAILFATHOM_SNS_TOPIC_ARNS)"
            )
    return arns


@dataclass(frozen=True, slots=True)
class SnsMessage:
    """One verified SNS message: its type, topic, id, body and (for a subscription) the
    URL that confirms it."""

    type: str
    topic_arn: str
    message_id: str
    message: str
    subscribe_url: str | None


def string_to_sign(fields: Mapping[str, str]) -> bytes:
    """The canonical text SNS signs for ``fields``: ``key\\nvalue\\n`` for each signed key
    of its ``Type``, in order, ``Subject`` left out when the notification has none."""
    keys = MESSAGE_TYPES[fields["Type"]]
    lines = [f"{key}\n{fields[key]}\n" for key in keys if key != "Subject" or key in fields]
    return "".join(lines).encode("utf-8")


class SnsFetcher:
    """Fetches signing certificates (cached per URL) and subscription URLs, over HTTPS
    only, from hosts that match ``hosts`` (default :data:`AWS_HOSTS`, matched against the
    whole ``host[:port]``), with a timeout and no redirects. ``ssl_context`` defaults to
    the system's trusted roots."""

    def __init__(
        self,
        *,
        hosts: re.Pattern[str] = AWS_HOSTS,
        ssl_context: ssl.SSLContext | None = None,
        timeout: float = 10.0,
    ) -> None:
        self._hosts = hosts
        self._context = ssl_context or ssl.create_default_context()
        self._timeout = timeout
        self._keys: dict[str, RSAPublicKey] = {}
        self._lock = threading.Lock()

    def check_url(self, url: str, what: str) -> None:
        """Refuse ``url`` unless it is https on an allowed host."""
        try:
            parts = urlsplit(url)
        except ValueError:
            raise SignatureRefused(f"{what} {url[:200]!r} is not a URL: refused") from None
        if parts.scheme != "https" or not self._hosts.fullmatch(parts.netloc):
            raise SignatureRefused(
                f"{what} {url[:200]!r} is not https on an SNS host (sns.<region>.amazonaws.com):"
                " refused; a genuine SNS message never names another host"
            )

    def get(self, url: str, what: str) -> bytes:
        """GET ``url`` (checked first); its body, or SnsFetchFailed."""
        self.check_url(url, what)
        parts = urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        connection = http.client.HTTPSConnection(
            str(parts.hostname), parts.port, timeout=self._timeout, context=self._context
        )
        try:
            connection.request("GET", target or "/", headers={"Connection": "close"})
            response = connection.getresponse()
            body = response.read(_MOST_BYTES + 1)
        except (OSError, http.client.HTTPException) as exc:
            raise SnsFetchFailed(
                f"could not fetch the {what} {url[:200]!r}: {exc}; SNS retries the message"
            ) from None
        finally:
            connection.close()
        if response.status != 200 or len(body) > _MOST_BYTES:
            raise SnsFetchFailed(
                f"the {what} {url[:200]!r} answered {response.status} "
                f"({len(body)} bytes), not 200 with a small body; SNS retries the message"
            )
        return body

    def public_key(self, url: str) -> RSAPublicKey:
        """The RSA key of the certificate at ``url``, fetched once and cached."""
        self.check_url(url, "SigningCertURL")
        with self._lock:
            cached = self._keys.get(url)
        if cached is not None:
            return cached
        # here, not at the top: cryptography is optional (the sns extra)
        from cryptography import x509
        from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

        pem = self.get(url, "SigningCertURL")
        try:
            key = x509.load_pem_x509_certificate(pem).public_key()
        except ValueError:
            raise SignatureRefused(f"SigningCertURL {url!r} is not a PEM certificate") from None
        if not isinstance(key, RSAPublicKey):
            raise SignatureRefused(f"the certificate at {url!r} has no RSA key: refused")
        with self._lock:
            self._keys[url] = key
        return key


class SnsVerifier:
    """Accepts SNS messages of the allowed topics whose signature verifies (see the
    module's docstring), and confirms their subscriptions."""

    def __init__(self, topic_arns: frozenset[str], *, fetcher: SnsFetcher | None = None) -> None:
        try:  # here, not at the top: cryptography is optional (the sns extra)
            import cryptography  # noqa: F401 - checked here, used per message
        except ImportError:
            raise ConfigurationError(
                "sns_topic_arns is set but the cryptography package is missing: install "
                "mailfathom[sns] (pip install 'mailfathom[sns]') to verify SNS signatures"
            ) from None
        self.topic_arns = topic_arns
        self.fetcher = fetcher or SnsFetcher()

    def verify(self, raw: bytes, message_type: str | None) -> SnsMessage:
        """The verified message of the request body ``raw`` (``message_type`` is the
        ``x-amz-sns-message-type`` header); InvalidInput for a malformed one,
        SignatureRefused for one that does not verify."""
        fields = _fields(raw)
        kind = fields["Type"]
        if message_type is not None and message_type != kind:
            raise InvalidInput(
                f"the x-amz-sns-message-type header ({message_type[:40]!r}) is not the "
                f"message's Type ({kind!r}): refused"
            )
        topic = fields["TopicArn"]
        if topic not in self.topic_arns:
            raise SignatureRefused(
                f"topic {topic[:300]!r} is not allowed: add it to sns_topic_arns "
                "(MAILFATHOM_SNS_TOPIC_ARNS) to accept its messages"
            )
        self._check_signature(fields)
        return SnsMessage(
            type=kind,
            topic_arn=topic,
            message_id=fields["MessageId"],
            message=fields["Message"],
            subscribe_url=fields.get("SubscribeURL"),
        )

    def confirm(self, message: SnsMessage) -> None:
        """Confirm a verified ``SubscriptionConfirmation`` by fetching its SubscribeURL."""
        if message.type != "SubscriptionConfirmation" or message.subscribe_url is None:
            raise InvalidInput("only a SubscriptionConfirmation can be confirmed")
        self.fetcher.get(message.subscribe_url, "SubscribeURL")

    def _check_signature(self, fields: Mapping[str, str]) -> None:
        # here, not at the top: cryptography is optional (the sns extra)
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        version = fields["SignatureVersion"]
        algorithm: hashes.HashAlgorithm
        if version == "1":
            algorithm = hashes.SHA1()  # noqa: S303 - what SignatureVersion 1 is
        elif version == "2":
            algorithm = hashes.SHA256()
        else:
            raise SignatureRefused(
                f"SignatureVersion {version[:20]!r} is unknown: SNS signs with version 1 or 2"
            )
        try:
            signature = base64.b64decode(fields["Signature"], validate=True)
        except (binascii.Error, ValueError):
            raise SignatureRefused("the Signature is not base64: refused") from None
        key = self.fetcher.public_key(fields["SigningCertURL"])
        try:
            key.verify(signature, string_to_sign(fields), padding.PKCS1v15(), algorithm)
        except InvalidSignature:
            raise SignatureRefused(
                "the signature does not verify: the message was altered or not signed by "
                "SNS; nothing was done"
            ) from None


def _fields(raw: bytes) -> dict[str, str]:
    """The message's fields, each required one present and text."""
    try:
        data: Any = json.loads(raw)
    except (ValueError, RecursionError):
        raise InvalidInput(
            "the body is not an SNS message (JSON): subscribe this URL to an SNS topic"
        ) from None
    if not isinstance(data, dict):
        raise InvalidInput("the body is not an SNS message (a JSON object)")
    kind = data.get("Type")
    if kind not in MESSAGE_TYPES:
        raise InvalidInput(
            f"Type {str(kind)[:40]!r} is not an SNS message type: one of {sorted(MESSAGE_TYPES)}"
        )
    needed = [k for k in MESSAGE_TYPES[kind] if k != "Subject"]
    needed += ["Signature", "SignatureVersion", "SigningCertURL"]
    missing = [key for key in needed if not isinstance(data.get(key), str)]
    if missing:
        raise InvalidInput(f"the SNS {kind} lacks {missing} (each text): refused")
    if "Subject" in data and not isinstance(data["Subject"], str):
        raise InvalidInput("the SNS message's Subject must be text")
    return {key: value for key, value in data.items() if isinstance(value, str)}
