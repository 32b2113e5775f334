"""Loopback names and addresses: the rule a console without a token applies to its
``Host`` header, shared by the worker's metrics port.

Internal. A base module (standard library only), so that both the console
(:mod:`mailfathom.web.security`) and the worker's metrics server
(:mod:`mailfathom.observability.server`) use the one rule without either importing
the other's layer.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["hostname", "is_loopback", "loopback_host"]

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost names."""
    name = host.strip("[]").lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def loopback_host(host_header: str) -> bool:
    """True when a ``Host`` header (``name[:port]``) names a loopback address: the rule a
    console without a token applies, shared by the worker's metrics port."""
    return is_loopback(hostname(host_header))


def hostname(host: str) -> str:
    """The host name of a ``Host`` header (``name[:port]``); '' when it does not parse."""
    try:
        return urlsplit(f"//{host}").hostname or ""
    except ValueError:
        return ""
