"""Settings: from arguments, then ``MAILFATHOM_*`` environment variables, then
``mailfathom.toml``, then defaults — validated at start, every error naming its setting.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from mailfathom.errors import ConfigurationError

__all__ = ["Settings"]

DEFAULT_DATABASE_URL = "sqlite:///mailfathom.db"


@dataclass(frozen=True, slots=True)
class Settings:
    """Every setting, its default, and the trade-off it makes."""

    #: Where the queue lives: ``sqlite:///path.db`` (one machine) or ``postgresql://…``.
    database_url: str = DEFAULT_DATABASE_URL
    #: Where mail goes: ``smtp://user:pass@host:587`` or ``smtps://…``. None: recording
    #: works, delivery fails transiently with "no SMTP server configured".
    smtp_url: str | None = None
    #: Largest JSON payload accepted, in bytes. Bigger rows slow every claim.
    max_payload_bytes: int = 1_048_576
    #: Jobs a worker runs at once. More hides I/O waits; too many starves the database.
    concurrency: int = 10
    #: How long a claim lasts without a heartbeat; a dead worker's jobs return after it.
    lease: float = 30.0
    #: How long a stopping worker waits for running jobs before releasing them.
    shutdown_timeout: float = 30.0
    #: Console bind address; anything but loopback requires ``web_token``.
    web_host: str = "127.0.0.1"
    #: Console port.
    web_port: int = 8025
    #: Console token (``Authorization: Bearer`` or the login form).
    web_token: str | None = None

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
        return replace(cls(), **values).validated()

    def validated(self) -> Settings:
        """This object, after checking every value; a bad one raises ConfigurationError."""
        if not isinstance(self.database_url, str) or "://" not in self.database_url:
            raise ConfigurationError(
                f"database_url {self.database_url!r} is not a URL: use sqlite:///path/to.db "
                "or postgresql://user@host/db (MAILFATHOM_DATABASE_URL)"
            )
        for name in ("max_payload_bytes", "concurrency", "web_port"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be a positive integer, not {value!r}")
        if self.web_port > 65535:
            raise ConfigurationError(f"web_port must be at most 65535, not {self.web_port}")
        for name in ("lease", "shutdown_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigurationError(f"{name} must be a positive number of seconds")
        if self.lease < 1:
            raise ConfigurationError("lease must be at least 1 second")
        return self


def _coerce(name: str, raw: str) -> Any:
    kind = {f.name: f.type for f in fields(Settings)}[name]
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError as exc:
        raise ConfigurationError(
            f"MAILFATHOM_{name.upper()}={raw!r} is not a number: set a number or unset it"
        ) from exc
    return raw
