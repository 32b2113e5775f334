"""DKIM signing at record time (dkimpy), so every attempt sends the same signed bytes.

Internal. Configured by three settings together — ``dkim_domain``, ``dkim_selector``
and ``dkim_key_file`` (an RSA private key in PEM) — and checked at start, so a
broken key is a configuration error, not a failed delivery a day later.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import dkim

from mailfathom.errors import ConfigurationError

__all__ = ["DkimSigner"]

#: Signed header fields (when present): what a reader sees and what threads replies.
SIGNED_HEADERS = (
    b"from",
    b"sender",
    b"reply-to",
    b"subject",
    b"date",
    b"message-id",
    b"to",
    b"cc",
    b"mime-version",
    b"content-type",
    b"content-transfer-encoding",
    b"in-reply-to",
    b"references",
)


@dataclass(frozen=True, slots=True)
class DkimSigner:
    """Signs frozen messages for one domain and selector (rsa-sha256, relaxed/simple)."""

    domain: str
    selector: str
    private_key: bytes

    @classmethod
    def load(cls, domain: str, selector: str, key_file: str) -> DkimSigner:
        """Read and check the key now; any problem is a :class:`ConfigurationError`."""
        try:
            key = Path(key_file).read_bytes()
        except OSError as exc:
            raise ConfigurationError(
                f"dkim_key_file {key_file!r} cannot be read ({exc}): point it at the PEM "
                f"private key of selector {selector!r}"
            ) from exc
        try:
            dkim.crypto.parse_pem_private_key(key)
        except Exception as exc:
            raise ConfigurationError(
                f"dkim_key_file {key_file!r} is not an RSA private key in PEM form ({exc}): "
                "generate one with `openssl genrsa -out dkim.pem 2048`"
            ) from exc
        return cls(domain=domain, selector=selector, private_key=key)

    def sign(self, data: bytes) -> bytes:
        """``data`` with a DKIM-Signature header field prepended."""
        try:
            signature: bytes = dkim.sign(
                data,
                self.selector.encode("ascii"),
                self.domain.encode("ascii"),
                self.private_key,
                include_headers=list(SIGNED_HEADERS),
                linesep=b"\r\n",
            )
        except dkim.DKIMException as exc:
            raise ConfigurationError(
                f"DKIM signing for {self.domain} failed ({exc}): check dkim_domain, "
                "dkim_selector and dkim_key_file"
            ) from exc
        return signature + data
