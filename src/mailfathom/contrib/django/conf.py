"""The ``MAILFATHOM`` Django setting and the database URL of a ``DATABASES`` alias.

Internal. ``MAILFATHOM = {"DATABASE": "default", "SMTP_URL": "smtp://…", …}``: the
keys are mailfathom's settings in capitals (``docs/django.md``), plus ``DATABASE``
(the alias whose database holds jobs and email, default ``"default"``) and
``CONSOLE_URL`` (where the admin's link points), ``DELIVERY_BACKEND`` (the dotted path
of a Django email backend that delivers the outbox instead of ``SMTP_URL``, e.g.
anymail's; :mod:`mailfathom.contrib.django.transport`) and ``DELIVERY_BACKEND_OPTIONS``
(its keyword arguments). The database URL is built from that
alias's own ``DATABASES`` entry, never given separately, so mailfathom's tables live
in the same SQLite file, or the same PostgreSQL database and schema, as the
application's data — which is what lets a write join the application's transaction.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import quote, urlencode

from django.conf import settings as django_settings
from django.db import connections

from mailfathom.config import Settings
from mailfathom.errors import ConfigurationError

__all__ = ["DjangoConfig", "database_url", "load_config"]

#: Keys of a PostgreSQL alias's ``OPTIONS`` that Django itself consumes (not libpq's).
_DJANGO_ONLY_OPTIONS = frozenset(
    {"isolation_level", "server_side_binding", "pool", "assume_role", "cursor_factory"}
    | {"context", "prepare_threshold"}
)
_OWN_KEYS = ("DATABASE", "CONSOLE_URL", "DELIVERY_BACKEND", "DELIVERY_BACKEND_OPTIONS")


@dataclass(frozen=True, slots=True)
class DjangoConfig:
    """What ``MAILFATHOM`` says: the alias, mailfathom's settings, the console's URL, and
    the Django email backend that delivers (None: ``SMTP_URL`` does) with its options."""

    alias: str
    settings: Settings
    console_url: str
    delivery_backend: str | None = None
    delivery_backend_options: Mapping[str, Any] | None = None


def load_config() -> DjangoConfig:
    """Read and validate ``settings.MAILFATHOM``; a bad key or value names itself."""
    raw = getattr(django_settings, "MAILFATHOM", {})
    if not isinstance(raw, Mapping):
        raise ConfigurationError(
            f"settings.MAILFATHOM must be a dict, not {type(raw).__name__}: write "
            'MAILFATHOM = {"DATABASE": "default"}'
        )
    values = dict(raw)
    alias = values.pop("DATABASE", "default")
    console_url = values.pop("CONSOLE_URL", None)
    backend = values.pop("DELIVERY_BACKEND", None)
    options = values.pop("DELIVERY_BACKEND_OPTIONS", None)
    if "DATABASE_URL" in values:
        raise ConfigurationError(
            "MAILFATHOM['DATABASE_URL'] is not used with Django: the database is a DATABASES "
            "alias, so set MAILFATHOM['DATABASE'] to its name (default 'default')"
        )
    known = sorted(f.name.upper() for f in fields(Settings) if f.name != "database_url")
    arguments: dict[str, Any] = {}
    for key, value in values.items():
        if key not in known:
            raise ConfigurationError(
                f"MAILFATHOM[{key!r}] is not a setting: use {[*_OWN_KEYS, *known]}"
            )
        arguments[key.lower()] = value
    if not isinstance(alias, str):
        raise ConfigurationError(f"MAILFATHOM['DATABASE'] must be an alias name, not {alias!r}")
    arguments["database_url"] = database_url(alias)
    settings = Settings.load(arguments)
    if console_url is None:
        console_url = f"http://{settings.web_host}:{settings.web_port}/"
    elif not isinstance(console_url, str) or not console_url:
        raise ConfigurationError(
            f"MAILFATHOM['CONSOLE_URL'] must be the console's address, not {console_url!r}"
        )
    _check_backend(backend, options, settings)
    return DjangoConfig(
        alias=alias,
        settings=settings,
        console_url=console_url,
        delivery_backend=backend,
        delivery_backend_options=options,
    )


def _check_backend(backend: object, options: object, settings: Settings) -> None:
    """``DELIVERY_BACKEND`` is a dotted path and ``DELIVERY_BACKEND_OPTIONS`` a dict, only
    with it; and only one of it and ``SMTP_URL`` says where email goes."""
    if backend is not None and (not isinstance(backend, str) or "." not in backend):
        raise ConfigurationError(
            "MAILFATHOM['DELIVERY_BACKEND'] must be the dotted path of a Django email "
            f"backend, e.g. 'anymail.backends.postmark.EmailBackend', not {backend!r}"
        )
    if options is not None and not isinstance(options, Mapping):
        raise ConfigurationError(
            "MAILFATHOM['DELIVERY_BACKEND_OPTIONS'] must be a dict of the backend's keyword "
            f"arguments, not {type(options).__name__}"
        )
    if options is not None and backend is None:
        raise ConfigurationError(
            "MAILFATHOM['DELIVERY_BACKEND_OPTIONS'] is given without DELIVERY_BACKEND: name "
            "the backend they are for"
        )
    if backend is not None and settings.smtp_url is not None:
        raise ConfigurationError(
            "both MAILFATHOM['DELIVERY_BACKEND'] and SMTP_URL (or MAILFATHOM_SMTP_URL) say "
            "where email goes: keep one"
        )


def database_url(alias: str) -> str:
    """The mailfathom URL of the database behind ``DATABASES[alias]`` (SQLite or PostgreSQL)."""
    if alias not in connections.settings:
        raise ConfigurationError(
            f"MAILFATHOM['DATABASE'] is {alias!r}, which is not in DATABASES "
            f"({sorted(connections.settings)}): name one of those aliases"
        )
    wrapper = connections[alias]
    conf = wrapper.settings_dict
    if wrapper.vendor == "sqlite":
        return _sqlite_url(alias, str(conf["NAME"] or ""))
    if wrapper.vendor == "postgresql":
        return _postgres_url(conf)
    raise ConfigurationError(
        f"DATABASES[{alias!r}] uses {conf['ENGINE']!r} ({wrapper.vendor}): mailfathom runs on "
        "SQLite and PostgreSQL; point MAILFATHOM['DATABASE'] at such an alias"
    )


def _sqlite_url(alias: str, name: str) -> str:
    if not name or name == ":memory:" or name.startswith("file:") or "mode=memory" in name:
        raise ConfigurationError(
            f"DATABASES[{alias!r}] NAME is {name!r}: mailfathom needs a SQLite file that its "
            "workers can open too; give NAME a file path (for tests, TEST: {'NAME': a path})"
        )
    return "sqlite:///" + os.path.abspath(name)


def _postgres_url(conf: Mapping[str, Any]) -> str:
    netloc = ""
    if conf.get("USER"):
        netloc = quote(str(conf["USER"]), safe="")
    if conf.get("PASSWORD"):
        netloc += ":" + quote(str(conf["PASSWORD"]), safe="")
    if netloc:
        netloc += "@"
    query: dict[str, str] = {}
    host = str(conf.get("HOST") or "")
    if host.startswith("/"):  # a Unix socket folder: libpq takes it as a parameter
        query["host"] = host
    elif ":" in host:
        netloc += f"[{host}]"
    else:
        netloc += host
    if conf.get("PORT"):
        netloc += f":{conf['PORT']}"
    options = conf.get("OPTIONS") or {}
    for key, value in options.items():
        if key not in _DJANGO_ONLY_OPTIONS and value is not None:
            query[str(key)] = str(value)
    name = quote(str(conf.get("NAME") or "postgres"), safe="")
    encoded = urlencode(query, quote_via=quote)  # libpq reads %20, not +, as a space
    return f"postgresql://{netloc}/{name}" + (f"?{encoded}" if query else "")
