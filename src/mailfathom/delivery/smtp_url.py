"""The SMTP server to submit to, from one URL.

Internal. ``smtp://user:password@host:587`` (STARTTLS whenever the server offers
it) or ``smtps://user:password@host:465`` (TLS from the first byte).
Certificates are always verified against the system's trust store, or against
``?cafile=/path/ca.pem``. Options (query string):

- ``starttls=auto`` (default: use it when offered, and then it must succeed),
  ``starttls=require`` (a server not offering it is a session failure) or
  ``starttls=off`` (never; the only way to send credentials unencrypted);
- ``cafile=/path/to/ca.pem`` trusts that CA instead of the system's;
- ``helo=name`` is the name given in EHLO (default: this host's name).

User and password are percent-decoded, so ``p%40ss`` means ``p@ss``.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qs, unquote, urlsplit

from mailfathom.errors import ConfigurationError

__all__ = ["SmtpTarget", "parse_smtp_url"]

StartTls = Literal["auto", "require", "off"]
_OPTIONS = ("starttls", "cafile", "helo")
_DEFAULT_PORTS = {"smtp": 25, "smtps": 465}


@dataclass(frozen=True, slots=True)
class SmtpTarget:
    """Where and how to connect; ``password`` is kept out of ``repr``."""

    scheme: Literal["smtp", "smtps"]
    host: str
    port: int
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    starttls: StartTls = "auto"
    cafile: str | None = None
    helo: str | None = None

    @property
    def implicit_tls(self) -> bool:
        """True for ``smtps://``: TLS from the first byte."""
        return self.scheme == "smtps"

    def tls_context(self) -> ssl.SSLContext:
        """A verifying client context (hostname and chain), with ``cafile`` when given."""
        return ssl.create_default_context(cafile=self.cafile)

    def local_hostname(self) -> str:
        """The EHLO name."""
        return self.helo or socket.gethostname() or "localhost"

    def describe(self) -> str:
        """``scheme://host:port`` — safe to log."""
        return f"{self.scheme}://{self.host}:{self.port}"


def parse_smtp_url(url: str) -> SmtpTarget:
    """Parse and check ``url``; anything unusable is a :class:`ConfigurationError`."""
    if not isinstance(url, str) or "://" not in url:
        raise ConfigurationError(
            "smtp_url is not a URL (no scheme://; not shown, it may hold a password): use "
            "smtp://user:password@host:587 or "
            "smtps://user:password@host:465 (MAILFATHOM_SMTP_URL)"
        )
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ConfigurationError(
            f"smtp_url scheme {parts.scheme!r} is not supported: use smtp:// (STARTTLS) or "
            "smtps:// (implicit TLS)"
        )
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:  # its message quotes the "port", which may be part of the password
        raise ConfigurationError(
            "smtp_url has a bad port (a number from 1 to 65535 is needed): if the password "
            "holds any of / @ : # ? %, percent-encode them (%2F %40 %3A %23 %3F %25)"
        ) from None
    if not parts.hostname:
        raise ConfigurationError("smtp_url names no host: write smtp://host:port")
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - set(_OPTIONS))
    if unknown:
        raise ConfigurationError(
            f"smtp_url has unknown options {unknown}: the options are {list(_OPTIONS)}"
        )
    options = {name: values[-1] for name, values in query.items()}
    starttls = options.get("starttls", "auto").lower()
    if starttls not in ("auto", "require", "off"):
        raise ConfigurationError(
            f"smtp_url option starttls={starttls!r} is not one of auto, require, off"
        )
    if scheme == "smtps" and starttls == "require":
        raise ConfigurationError("smtps:// is already TLS: drop starttls=require")
    cafile = options.get("cafile") or None
    if cafile is not None and not Path(cafile).is_file():
        raise ConfigurationError(f"smtp_url cafile {cafile!r} is not a file")
    username = unquote(parts.username, errors="strict") if parts.username else None
    try:
        password = unquote(parts.password, errors="strict") if parts.password is not None else None
    except UnicodeDecodeError:
        raise ConfigurationError(
            "smtp_url has a password whose percent-encoding is not UTF-8: encode it with "
            "urllib.parse.quote(password, safe='')"
        ) from None
    if password is not None and username is None:
        raise ConfigurationError("smtp_url has a password but no user: write user:password@")
    return SmtpTarget(
        scheme="smtps" if scheme == "smtps" else "smtp",
        host=parts.hostname,
        port=port,
        username=username,
        password=password,
        starttls=starttls,  # type: ignore[arg-type]
        cafile=cafile,
        helo=options.get("helo") or None,
    )
