"""Per-recipient-domain throttling: ``domain_limits`` mapped onto flow control.

Internal. Each delivery job (kind ``mailfathom.deliver``) carries its recipient
domain as its limit key (lower-cased, IDNA A-label form), so the fleet-wide per-key
limits of :mod:`mailfathom.jobs.flow.limits` hold per domain, where jobs are claimed: a
delivery held back by its domain is not claimed (no attempt spent, no lease held)
and never blocks another domain's mail.

``domain_limits={"gmail.com": {"rate": "20/s", "connections": 2}, "*": {"connections": 5}}``
becomes ``mf.limit_kind("mailfathom.deliver", max_running_per_key=5,
key_limits={"gmail.com": {"max_running": 2, "rate": "20/s"}})``: "connections" is
deliveries running at once for the domain (SMTP transactions in flight), "rate"
deliveries started per window. "*" gives every domain its default; a domain's own
values replace the default, and a value it leaves out falls back to it.

A message whose recipients span several domains is recorded as one record per
domain when throttling is configured (:func:`group_by_domain`), as Postfix splits
deliveries per destination: each domain's limit then counts each of its messages,
and a slow domain never holds back the others' recipients.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mailfathom.errors import InvalidInput
from mailfathom.jobs.flow.limits import MAX_RUNNING, Rate, parse_rate

__all__ = [
    "DomainLimit",
    "DomainLimits",
    "delivery_key",
    "domain_parts",
    "group_by_domain",
    "normalise_domain",
    "recipient_domain",
]

_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_FIELDS = ("connections", "rate")
_EXAMPLE = '{"gmail.com": {"rate": "20/s", "connections": 2}, "*": {"connections": 5}}'


def normalise_domain(domain: str) -> str:
    """``domain`` as a limit key: lower-case, IDNA A-labels, no trailing dot;
    :class:`InvalidInput` if it is no domain name."""
    text = domain.strip().rstrip(".").lower() if isinstance(domain, str) else ""
    try:
        ascii_form = text if text.isascii() else text.encode("idna").decode("ascii")
    except UnicodeError:
        ascii_form = ""
    labels = ascii_form.split(".")
    if not ascii_form or len(ascii_form) > 200 or not all(_LABEL.fullmatch(x) for x in labels):
        raise InvalidInput(
            f"{domain!r} is not a domain name: give one such as 'gmail.com' (or '*' for "
            "every other domain)"
        )
    return ascii_form


def recipient_domain(address: str) -> str:
    """The limit key of one envelope recipient: its domain, normalised."""
    return normalise_domain(address.rpartition("@")[2])


def delivery_key(recipients: Iterable[str]) -> str | None:
    """The limit key of a delivery: its first recipient's domain (None without any, or
    when that domain cannot be a key, so the record is still delivered unthrottled)."""
    for address in recipients:
        try:
            return recipient_domain(address)
        except InvalidInput:
            return None
    return None


def group_by_domain(recipients: Sequence[str]) -> list[tuple[str, ...]]:
    """The recipients grouped by domain, groups in order of first appearance and
    addresses in envelope order within each (a domain that is no key groups alone)."""
    groups: dict[str, list[str]] = {}
    for address in recipients:
        try:
            key = recipient_domain(address)
        except InvalidInput:
            key = "\0" + address
        groups.setdefault(key, []).append(address)
    return [tuple(group) for group in groups.values()]


def domain_parts(recipients: Sequence[str], *, split: bool) -> list[tuple[str, ...]]:
    """The recipient lists a message is recorded as: one per domain with ``split``
    (per-domain throttling on), else all of them in one."""
    return group_by_domain(recipients) if split else [tuple(recipients)]


@dataclass(frozen=True, slots=True)
class DomainLimit:
    """One domain's throttle: SMTP transactions at once, and starts per window."""

    connections: int | None = None
    rate: Rate | None = None

    @classmethod
    def build(cls, domain: str, value: object) -> DomainLimit:
        """``{"connections": 2, "rate": "20/s"}`` checked; errors name the domain."""
        where = f"domain_limits[{domain!r}]"
        if not isinstance(value, Mapping):
            raise InvalidInput(
                f"{where} must be a dict such as {{'connections': 2, 'rate': '20/s'}}, "
                f"not {value!r}"
            )
        unknown = sorted(str(k) for k in value if k not in _FIELDS)
        if unknown:
            raise InvalidInput(
                f"{where} has unknown keys {unknown}: use 'connections' (SMTP sessions at "
                "once for the domain) and/or 'rate' (messages started per window, '20/s')"
            )
        connections = value.get("connections")
        if connections is not None and (
            isinstance(connections, bool)
            or not isinstance(connections, int)
            or not 1 <= connections <= MAX_RUNNING
        ):
            raise InvalidInput(
                f"{where}['connections'] must be an integer from 1 to {MAX_RUNNING}, not "
                f"{connections!r} "
                "(to hold a domain back, give it a slow rate such as '1/h')"
            )
        rate = parse_rate(value.get("rate"), name=f"{where}['rate']")
        if connections is None and rate is None:
            raise InvalidInput(f"{where} sets nothing: give 'connections' and/or 'rate'")
        return cls(connections=connections, rate=rate)

    def flow(self) -> dict[str, Any]:
        """The same limit as a flow-control key limit (``key_limits`` value)."""
        found: dict[str, Any] = {}
        if self.connections is not None:
            found["max_running"] = self.connections
        if self.rate is not None:
            found["rate"] = self.rate
        return found


@dataclass(frozen=True, slots=True)
class DomainLimits:
    """Every domain's throttle: ``default`` ("*") and the named domains' own."""

    default: DomainLimit | None
    domains: Mapping[str, DomainLimit]

    @classmethod
    def parse(cls, value: object) -> DomainLimits | None:
        """``domain_limits`` checked and normalised (None or {}: no throttling)."""
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise InvalidInput(f"domain_limits must be a dict such as {_EXAMPLE}, not {value!r}")
        default = None
        domains: dict[str, DomainLimit] = {}
        for name, limit in value.items():
            if name == "*":
                default = DomainLimit.build("*", limit)
                continue
            if not isinstance(name, str):
                raise InvalidInput(f"domain_limits keys are domain names or '*', not {name!r}")
            try:
                key = normalise_domain(name)
            except InvalidInput as exc:
                raise InvalidInput(f"domain_limits: {exc}") from None
            if key in domains:
                raise InvalidInput(
                    f"domain_limits names {key!r} twice (as {name!r}): keep one entry per domain"
                )
            domains[key] = DomainLimit.build(name, limit)
        if default is None and not domains:
            return None
        return cls(default=default, domains=domains)

    def flow_values(self) -> dict[str, Any]:
        """The keywords of ``mf.limit_kind("mailfathom.deliver", ...)`` they amount to."""
        default = self.default or DomainLimit()
        return {
            "max_running_per_key": default.connections,
            "rate_per_key": None if default.rate is None else default.rate,
            "key_limits": {name: limit.flow() for name, limit in self.domains.items()} or None,
        }
