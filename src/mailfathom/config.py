"""Settings: from arguments, then ``MAILFATHOM_*`` environment variables, then
``mailfathom.toml``, then defaults — validated at start, every error naming its setting.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""

from __future__ import annotations

import json
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from mailfathom.clock import check_clock_skew
from mailfathom.delivery.dkim import DkimSigner
from mailfathom.delivery.domains import DomainLimits
from mailfathom.delivery.smtp_url import parse_smtp_url
from mailfathom.delivery.sns import parse_topic_arns
from mailfathom.errors import ConfigurationError, InvalidInput
from mailfathom.redact import MASK, redact
from mailfathom.retention import RetentionPolicy
from mailfathom.validate import check_max_attempts, check_name

__all__ = ["Settings"]

DEFAULT_DATABASE_URL = "sqlite:///mailfathom.db"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True, slots=True)
class Settings:
    """Every setting, its default, and the trade-off it makes.

    Checked when made, however that happens (``Settings(...)``, ``dataclasses.replace``,
    :meth:`load`): a bad value raises :class:`ConfigurationError` naming the setting.
    """

    #: Where the queue lives: ``sqlite:///path.db`` (one machine) or ``postgresql://…``.
    database_url: str = DEFAULT_DATABASE_URL
    #: How long (seconds) an SQLite write waits for another process's write lock before
    #: it fails with "database is locked". Longer rides out longer writers (a ``VACUUM``,
    #: a big ``enqueue_many``) at the price of callers that hang that long; 0 fails at once.
    sqlite_busy_timeout: float = 30.0
    #: The most seconds an enqueue (``enqueue``, ``enqueue_many``, ``mailfathom enqueue``)
    #: waits for locks before it fails with :class:`StoreError` and writes nothing:
    #: PostgreSQL's ``lock_timeout`` and ``statement_timeout`` for that transaction,
    #: SQLite's busy timeout for it. None: as long as a lock is held (PostgreSQL) or
    #: ``sqlite_busy_timeout``. Not applied inside a caller's transaction (``connection=``),
    #: whose own settings govern.
    enqueue_timeout: float | None = None
    #: Where mail goes: ``smtp://user:pass@host:587`` or ``smtps://…``. None: recording
    #: works, delivery fails transiently with "no SMTP server configured".
    smtp_url: str | None = None
    #: Largest JSON payload accepted, in bytes. Bigger rows slow every claim.
    max_payload_bytes: int = 1_048_576
    #: Refuse to enqueue a kind this app has no handler for, once it registered a job
    #: kind of its own (``@mf.job``): a typo fails at once instead of waiting for a worker
    #: that never comes. An app with no kind of its own (a producer-only service) may
    #: enqueue any kind either way; false lets this app enqueue any kind too
    #: (docs/worker.md, "Which kinds may be enqueued").
    strict_kinds: bool = True
    #: Snoozes (``raise Snooze``) a job may take; the next one counts as a transient
    #: failure, so a handler that snoozes forever still ends in the dead letters.
    snooze_limit: int = 100
    #: Jobs a worker runs at once. More hides I/O waits; too many starves the database.
    concurrency: int = 10
    #: How long a claim lasts without a heartbeat; a dead worker's jobs return after it.
    lease: float = 30.0
    #: How far apart (seconds) the clocks of the machines sharing the database may be. A
    #: lease counts as expired only this long after its end, so a worker whose clock runs
    #: ahead never takes a healthy job; the price is that a dead worker's jobs return this
    #: much later. Keep clocks in step with NTP (docs/postgresql.md, "Clocks").
    clock_skew: float = 10.0
    #: How long a stopping worker waits for running jobs before releasing them.
    shutdown_timeout: float = 30.0
    #: Seconds to wait for each SMTP reply before the body (RFC 5321 §4.5.3.2: 5 minutes).
    smtp_timeout: float = 300.0
    #: Seconds to wait for the reply to the end of data (RFC 5321 §4.5.3.2: 10 minutes).
    #: No reply in time leaves the record TransmissionBegun: an unknown outcome.
    smtp_data_timeout: float = 600.0
    #: The most SMTP connections one process has open to the relay at once: each
    #: delivery thread sends on a session of its own, in parallel, and one beyond this
    #: waits for a session to come free. Kept above the worker's default concurrency;
    #: lower it to a relay's per-client connection limit (Postfix: 50).
    smtp_sessions: int = 16
    #: Seconds between two tries of an SMTP server that answered with a configuration
    #: error (a refused password, no STARTTLS for the credentials, "authentication
    #: required"): meanwhile delivery waits and spends no message's attempts.
    smtp_config_retry: float = 300.0
    #: Delivery attempts per record before it becomes Refused. The default, with backoff
    #: up to an hour apart, keeps trying for about a day (RFC 5321 §4.5.4.1 allows 4-5).
    delivery_max_attempts: int = 48
    #: The queue delivery jobs go to, so dedicated workers can send mail.
    delivery_queue: str = "mail"
    #: Per-recipient-domain throttling, fleet-wide (docs/outbox.md, "Per-domain throttling"):
    #: ``{"gmail.com": {"rate": "20/s", "connections": 2}, "*": {"connections": 5}}``:
    #: deliveries at once ("connections") and started per window ("rate") per domain, "*"
    #: for every other. A message to several domains is then recorded once per domain.
    #: Give every app of the fleet the same value (workers write it for all). None: off.
    domain_limits: Mapping[str, Mapping[str, Any]] | None = None
    #: Largest frozen message accepted by ``record``, in bytes (25 MiB).
    max_message_bytes: int = 26_214_400
    #: DKIM signing domain (``d=``); with ``dkim_selector`` and ``dkim_key_file``, every
    #: message is signed at record time. None: no signing.
    dkim_domain: str | None = None
    #: DKIM selector (``s=``): the key is published at ``<selector>._domainkey.<domain>``.
    dkim_selector: str | None = None
    #: Path of the RSA private key (PEM) that signs.
    dkim_key_file: str | None = None
    #: Console bind address; anything but loopback requires ``web_token``.
    web_host: str = "127.0.0.1"
    #: Console port.
    web_port: int = 8025
    #: Console token (``Authorization: Bearer`` or the login form).
    web_token: str | None = None
    #: Mark the console's session cookie ``Secure`` (sent over HTTPS only). Set it when
    #: the console is served behind TLS (a reverse proxy); over plain HTTP browsers
    #: would then never send the cookie back and logging in would not stick.
    web_secure_cookies: bool = False
    #: The Amazon SNS topics whose SES bounce and complaint notifications the console's
    #: ``POST /api/suppressions/sns`` applies to the suppression list, as topic ARNs
    #: separated by commas (docs/suppression.md, "SES notifications through SNS"). The
    #: message's verified signature and this list are its authentication (SNS cannot send
    #: the console token). None: the endpoint is off (it answers 403 naming this setting).
    sns_topic_arns: str | None = None
    #: How long terminal jobs keep their payload and tracebacks, per state
    #: (``{"Succeeded": "7d", "Dropped": "30d"}``; a period, seconds, or "never"). States
    #: not named keep their default: Succeeded 7 days, Dropped 30 days, DeadLettered never
    #: (it waits for an operator, and a requeue needs the payload). After it, a row is
    #: compacted in place: it keeps its key forever (docs/retention.md).
    retention: Mapping[str, Any] | None = None
    #: Per job kind, its own periods for the states it names
    #: (``{"reports.build": {"Succeeded": "1d"}}``); ``@mf.job(..., retention=)`` adds to it.
    retention_kinds: Mapping[str, Mapping[str, Any]] | None = None
    #: How long Sent / Refused / Cancelled emails keep their bytes (default 30 days each).
    email_retention: Mapping[str, Any] | None = None
    #: How long an operator's audit event keeps its full reason (then one line of it); the
    #: event itself is kept as long as its job or email row.
    audit_retention: str | float | None = "365d"
    #: Delete, instead of compacting, rows past their period that have no idempotency key
    #: (nothing can ever collide with them). Off: every row stays, compacted.
    retention_delete_keyless: bool = False
    #: Seconds between a worker's pruning passes (one worker at a time across the fleet
    #: prunes); 0: workers never prune (run ``mailfathom prune`` from cron instead).
    prune_interval: float = 60.0
    #: Rows per pruning transaction: small, so claims never wait long behind one (on
    #: SQLite a batch holds the one writer lock; with a million rows to compact, 10 kept
    #: the p99 claim within 12 % of no pruning, 25 let it grow by a third:
    #: docs/retention.md). Larger batches prune a little faster per row.
    prune_batch: int = 10

    @classmethod
    def load(
        cls,
        arguments: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        toml_path: str | os.PathLike[str] | None = None,
    ) -> Settings:
        """Resolve every setting: argument → environment → ``mailfathom.toml`` → default."""
        environ = os.environ if environ is None else environ
        path = Path(toml_path if toml_path is not None else "mailfathom.toml")
        file_values: dict[str, Any] = {}
        if path.is_file():
            try:
                file_values = tomllib.loads(path.read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ConfigurationError(f"{path} is not valid TOML: {exc}") from exc
            file_values = file_values.get("mailfathom", file_values)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(file_values) - known)
        if unknown:
            raise ConfigurationError(
                f"{path} sets unknown settings {unknown}: the settings are {sorted(known)}"
            )
        values: dict[str, Any] = {}
        for name in known:
            given = (arguments or {}).get(name)
            env = environ.get(f"MAILFATHOM_{name.upper()}")
            if given is not None:
                values[name] = given
            elif env is not None and env != "":
                values[name] = _coerce(name, env)
            elif name in file_values:
                values[name] = file_values[name]
        unknown_args = sorted(set(arguments or {}) - known)
        if unknown_args:
            raise ConfigurationError(f"unknown settings {unknown_args}: use {sorted(known)}")
        return replace(cls(), **values)

    def __post_init__(self) -> None:
        """Check every value however the settings are made (``Settings(...)``,
        ``dataclasses.replace``, :meth:`load`); a bad one raises ConfigurationError."""
        self._validate_types()
        if not isinstance(self.database_url, str) or "://" not in self.database_url:
            raise ConfigurationError(
                f"database_url {self.database_url!r} is not a URL: use sqlite:///path/to.db "
                "or postgresql://user@host/db (MAILFATHOM_DATABASE_URL)"
            )
        for name in (
            "max_payload_bytes",
            "concurrency",
            "web_port",
            "max_message_bytes",
            "snooze_limit",
            "smtp_sessions",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be a positive integer, not {value!r}")
        try:
            check_max_attempts(self.delivery_max_attempts, name="delivery_max_attempts")
        except InvalidInput as exc:
            raise ConfigurationError(str(exc)) from None
        for flag in ("web_secure_cookies", "strict_kinds"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigurationError(
                    f"{flag} must be true or false, not {getattr(self, flag)!r}"
                )
        if self.web_port > 65535:
            raise ConfigurationError(f"web_port must be at most 65535, not {self.web_port}")
        for name in (
            "lease",
            "shutdown_timeout",
            "smtp_timeout",
            "smtp_data_timeout",
            "smtp_config_retry",
        ):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value <= 0
            ):
                raise ConfigurationError(
                    f"{name} must be a positive number of seconds, not {value!r}"
                )
        self._validate_timeouts()
        if self.lease < 1:
            raise ConfigurationError(f"lease must be at least 1 second, not {self.lease!r}")
        check_clock_skew(self.clock_skew)
        self._validate_delivery()
        self.retention_policy()
        if (
            isinstance(self.prune_interval, bool)
            or not isinstance(self.prune_interval, (int, float))
            or not math.isfinite(self.prune_interval)
            or self.prune_interval < 0
        ):
            raise ConfigurationError(
                f"prune_interval must be a number of seconds (0: workers never prune), "
                f"not {self.prune_interval!r}"
            )
        if (
            isinstance(self.prune_batch, bool)
            or not isinstance(self.prune_batch, int)
            or not 1 <= self.prune_batch <= 100_000
        ):
            raise ConfigurationError(
                f"prune_batch must be an integer from 1 to 100000, not {self.prune_batch!r}"
            )

    def __repr__(self) -> str:
        """Every setting, with passwords (database, SMTP) and the web token masked: a
        repr ends up in logs and tracebacks."""
        shown = []
        for setting in fields(self):
            value = getattr(self, setting.name)
            if setting.name == "web_token" and value is not None:
                text = repr(MASK)
            else:
                text = redact(repr(value))
            shown.append(f"{setting.name}={text}")
        return f"Settings({', '.join(shown)})"

    def _validate_timeouts(self) -> None:
        """``sqlite_busy_timeout`` is a number of seconds, 0 or more; ``enqueue_timeout``
        a positive one, or None."""
        busy = self.sqlite_busy_timeout
        if (
            isinstance(busy, bool)
            or not isinstance(busy, (int, float))
            or not math.isfinite(busy)
            or not 0 <= busy <= 86_400
        ):
            raise ConfigurationError(
                f"sqlite_busy_timeout must be a number of seconds from 0 to 86400 "
                f"(MAILFATHOM_SQLITE_BUSY_TIMEOUT), not {busy!r}"
            )
        limit = self.enqueue_timeout
        if limit is not None and (
            isinstance(limit, bool)
            or not isinstance(limit, (int, float))
            or not math.isfinite(limit)
            or not 0 < limit <= 86_400
        ):
            raise ConfigurationError(
                f"enqueue_timeout must be a positive number of seconds up to 86400, or unset "
                f"(MAILFATHOM_ENQUEUE_TIMEOUT), not {limit!r}"
            )

    def _validate_types(self) -> None:
        """The text settings are text (``web_host`` non-empty); the optional ones may be None."""
        if not isinstance(self.web_host, str) or not self.web_host:
            raise ConfigurationError(
                f"web_host must be a host name or address such as 127.0.0.1, not {self.web_host!r}"
            )
        for name in (
            "smtp_url",
            "web_token",
            "dkim_domain",
            "dkim_selector",
            "dkim_key_file",
            "sns_topic_arns",
        ):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ConfigurationError(f"{name} must be text or unset, not {value!r}")

    def _validate_delivery(self) -> None:
        if self.smtp_url is not None:
            parse_smtp_url(self.smtp_url)
        self.domain_throttle()
        parse_topic_arns(self.sns_topic_arns)
        try:
            check_name("delivery_queue", self.delivery_queue, longest=100)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from exc
        dkim = {"dkim_domain": self.dkim_domain, "dkim_selector": self.dkim_selector}
        dkim["dkim_key_file"] = self.dkim_key_file
        given = [name for name, value in dkim.items() if value]
        if given and len(given) != len(dkim):
            missing = sorted(set(dkim) - set(given))
            raise ConfigurationError(
                f"DKIM signing needs dkim_domain, dkim_selector and dkim_key_file together: "
                f"set {missing} too, or unset {given}"
            )
        if given:
            DkimSigner.load(str(self.dkim_domain), str(self.dkim_selector), str(self.dkim_key_file))

    def retention_policy(self) -> RetentionPolicy:
        """The retention rules these settings describe, validated."""
        return RetentionPolicy.parse(
            jobs=self.retention,
            kinds=self.retention_kinds,
            emails=self.email_retention,
            audit=self.audit_retention,
            delete_keyless=self.retention_delete_keyless,
        )

    def domain_throttle(self) -> DomainLimits | None:
        """The per-domain throttle ``domain_limits`` describes, or None when it is off."""
        try:
            return DomainLimits.parse(self.domain_limits)
        except InvalidInput as exc:
            raise ConfigurationError(
                f"{exc} (setting domain_limits, MAILFATHOM_DOMAIN_LIMITS as JSON)"
            ) from None

    def dkim_signer(self) -> DkimSigner | None:
        """The DKIM signer these settings describe, or None when signing is off."""
        if not (self.dkim_domain and self.dkim_selector and self.dkim_key_file):
            return None
        return DkimSigner.load(self.dkim_domain, self.dkim_selector, self.dkim_key_file)


def _coerce(name: str, raw: str) -> Any:
    kind = {f.name: f.type for f in fields(Settings)}[name]
    if isinstance(kind, str) and kind.startswith("Mapping"):
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ConfigurationError(
                f"MAILFATHOM_{name.upper()}={raw!r} is not JSON: set a JSON object such as "
                '\'{"Succeeded": "7d"}\', or unset it'
            ) from exc
    if kind == "bool":
        flag = raw.strip().lower()
        if flag in _TRUE or flag in _FALSE:
            return flag in _TRUE
        raise ConfigurationError(
            f"MAILFATHOM_{name.upper()}={raw!r} is not true or false: set 1/true/yes/on "
            "or 0/false/no/off, or unset it"
        )
    try:
        if kind == "int":
            return int(raw)
        if kind in ("float", "float | None"):
            return float(raw)
    except ValueError as exc:
        raise ConfigurationError(
            f"MAILFATHOM_{name.upper()}={raw!r} is not a number: set a number or unset it"
        ) from exc
    return raw
